#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Runs the test program NAME (tests/NAME, whose lines start "NAME: ")
# under LD_PRELOAD=libshmpool.so SHMPOOL_MODE=children and passes on its
# verdict: the common body of the tests that are one such program.
#
#   children.sh NAME
#
# Environment (set by make check): SHMPOOL_LIB, TESTS_BUILDDIR.
set -u
name=${1:?usage: children.sh NAME}
lib=${SHMPOOL_LIB:?SHMPOOL_LIB is not set}
prog=${TESTS_BUILDDIR:?TESTS_BUILDDIR is not set}/$name
if out=$(LD_PRELOAD=$lib SHMPOOL_MODE=children "$prog" 2>&1); then
    echo "$out" | sed "s/^$name: /$name: PASS: /"
    exit 0
fi
echo "$name: FAIL: $out"
exit 1
