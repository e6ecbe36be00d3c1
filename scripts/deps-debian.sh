#!/bin/sh
# Install everything poold needs to build, test and benchmark on Debian 12.
# Run as root.  Safe to run again.
set -eu
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
    build-essential autoconf automake libtool pkg-config \
    libevent-dev libhttp-parser-dev check \
    mandoc valgrind python3 git \
    wrk libjemalloc-dev libgoogle-perftools-dev libmimalloc-dev gnuplot-nox \
    >/dev/null
