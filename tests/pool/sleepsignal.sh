#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# A signal that comes between two slices of a sleep the library cut still
# ends it with EINTR: tests/sleepsignal (see there) for poll, epoll_wait
# and accept, each in a process of its own that a crash point stops in its
# first slice's drain (debug builds; a skip elsewhere).
#
# Environment (set by make check): SHMPOOL_LIB, TESTS_BUILDDIR.
set -u
lib=${SHMPOOL_LIB:?SHMPOOL_LIB is not set}
prog=${TESTS_BUILDDIR:?TESTS_BUILDDIR is not set}/sleepsignal
for how in poll epoll accept; do
    # timeout outside the preload: the crash point would stop it too.
    out=$(timeout 20 env LD_PRELOAD="$lib" SHMPOOL_MODE=process \
          SHMPOOL_CRASH=central.release:1:stop "$prog" "$how" 2>&1)
    rc=$?
    case $rc in
    0) echo "$out" | grep '^sleepsignal: ' | sed "s/^sleepsignal: /sleepsignal: PASS: /" ;;
    77) echo "$out"; exit 77 ;;
    124) echo "sleepsignal: FAIL: $how did not return within 20 s: $out"; exit 1 ;;
    *) echo "sleepsignal: FAIL: $out"; exit 1 ;;
    esac
done
