#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# A parent under plain LD_PRELOAD=libshmpool.so never blocks in a wait
# because a child holds a pool lock: tests/waitstopped (see there) stops a
# child inside the page-heap lock and waits, with WNOHANG and for another
# child, while it sleeps there.
#
# Environment (set by make check): SHMPOOL_LIB, TESTS_BUILDDIR.
set -u
lib=${SHMPOOL_LIB:?SHMPOOL_LIB is not set}
prog=${TESTS_BUILDDIR:?TESTS_BUILDDIR is not set}/waitstopped
if out=$(LD_PRELOAD=$lib SHMPOOL_MODE=children "$prog" 2>&1); then
    echo "$out" | sed 's/^waitstopped: /waitstopped: PASS: /'
    exit 0
fi
echo "waitstopped: FAIL: $out"
exit 1
