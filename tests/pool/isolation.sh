#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# A heap bug stays in the process that has it: tests/isolation (see there)
# runs a culprit and a bystander attached to one arena under
# LD_PRELOAD=libshmpool.so SHMPOOL_MODE=children, for a double free, an
# interior free and two links forged to point at the bystander's live
# block, and for an overflow: none of the culprit's blocks may lie
# directly before a live block of the bystander.
#
# Environment (set by make check): SHMPOOL_LIB, TESTS_BUILDDIR.
set -u
lib=${SHMPOOL_LIB:?SHMPOOL_LIB is not set}
prog=${TESTS_BUILDDIR:?TESTS_BUILDDIR is not set}/isolation
if timeout 120 env LD_PRELOAD="$lib" SHMPOOL_MODE=children "$prog"; then
    exit 0
fi
echo "isolation: FAIL"
exit 1
