#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# A preloaded worker that goes quiet after a burst gives back what the
# burst left in its cache, its classes and the page heap within seconds,
# with no call of its own: tests/giveback (see there) under
# LD_PRELOAD=libshmpool.so SHMPOOL_MODE=children.
#
# Environment (set by make check): SHMPOOL_LIB, TESTS_BUILDDIR.
set -u
lib=${SHMPOOL_LIB:?SHMPOOL_LIB is not set}
prog=${TESTS_BUILDDIR:?TESTS_BUILDDIR is not set}/giveback
if out=$(LD_PRELOAD=$lib SHMPOOL_MODE=children "$prog" 2>&1); then
    echo "$out" | sed 's/^giveback: /giveback: PASS: /'
    exit 0
fi
echo "giveback: FAIL: $out"
exit 1
