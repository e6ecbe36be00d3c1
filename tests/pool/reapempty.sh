#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# A dead child's blocks, freed by the reap of its parent's wait, do not
# stay in the classes' budgets of empty spans: tests/reapempty (see there)
# under LD_PRELOAD=libshmpool.so SHMPOOL_MODE=children.
exec sh "$(dirname "$0")/children.sh" reapempty
