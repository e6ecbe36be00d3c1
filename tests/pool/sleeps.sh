#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# The sleeps libshmpool.so cuts into slices for an attached thread with
# something to give back keep their meaning, and the thread's cache goes
# back while it sleeps: tests/sleeps (see there) under
# LD_PRELOAD=libshmpool.so SHMPOOL_MODE=process.
#
# Environment (set by make check): SHMPOOL_LIB, TESTS_BUILDDIR.
set -u
lib=${SHMPOOL_LIB:?SHMPOOL_LIB is not set}
prog=${TESTS_BUILDDIR:?TESTS_BUILDDIR is not set}/sleeps
if out=$(LD_PRELOAD=$lib SHMPOOL_MODE=process timeout 60 "$prog" 2>&1); then
    echo "$out" | sed "s/^sleeps: /sleeps: PASS: /"
    exit 0
fi
echo "sleeps: FAIL: $out"
exit 1
