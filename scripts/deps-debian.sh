#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Install everything poold needs to build, test and benchmark on Debian 12.
# Run as root.  Safe to run again.
set -eu
export DEBIAN_FRONTEND=noninteractive

# The servers tests/servers/ and bench/prefork/prefork run (nginx, PostgreSQL 15 and
# its pgbench, Apache, gunicorn, Redis and its tools) start their own instances in
# temporary directories.
# Their packages would start services on install, on ports the tests do
# not use but others may (and a second server on port 80 fails its
# package's configuration): keep invoke-rc.d from starting anything while
# we install, unless a policy is in place already.
policy=/usr/sbin/policy-rc.d
if [ ! -e $policy ]; then
    printf '#!/bin/sh\nexit 101\n' >$policy
    chmod 0755 $policy
    trap 'rm -f $policy' EXIT
fi

apt-get update -qq
apt-get install -y -qq --no-install-recommends \
    build-essential autoconf automake libtool pkg-config \
    libevent-dev libhttp-parser-dev check \
    mandoc valgrind python3 git \
    wrk libjemalloc-dev libgoogle-perftools-dev libmimalloc-dev gnuplot-nox \
    nginx-light postgresql-15 apache2 python3-gunicorn redis-server redis-tools curl procps \
    >/dev/null

# Nothing of theirs may run or start at boot: stop the services wherever a
# policy let them start, and the Debian cluster postgresql-15 creates.
for svc in nginx apache2 postgresql redis-server; do
    if service $svc status >/dev/null 2>&1; then
        service $svc stop >/dev/null 2>&1 || true
    fi
    if [ -d /run/systemd/system ]; then
        systemctl disable --now $svc >/dev/null 2>&1 || true
    else
        update-rc.d $svc disable >/dev/null 2>&1 || true
    fi
done
pg_lsclusters -h 2>/dev/null | while read -r version cluster _ status _; do
    [ "$status" = online ] && pg_ctlcluster "$version" "$cluster" stop
    echo manual >"/etc/postgresql/$version/$cluster/start.conf"
done
