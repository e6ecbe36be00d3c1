#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The fork contract itself (tests/programs/forkcontract.c): under LD_PRELOAD and
# SHMPOOL_MODE=children, a private master forks an attached child, which
# forks in turn; every process must read back only what it wrote itself,
# in every block it inherited.  Without the library the program must
# refuse to run, or it would pass on glibc without testing anything.
set -eu
. "$(dirname "$0")/lib.sh"

t_init fork 60
prog=${TESTS_BUILDDIR:?TESTS_BUILDDIR is not set}/forkcontract

rc=0
timeout 30 env LD_PRELOAD="$lib" SHMPOOL_MODE=children "$prog" \
    >"$tmp/out" 2>"$tmp/err" || rc=$?
if [ $rc -eq 0 ]; then
    t_ok "$(cat "$tmp/out")"
else
    t_bad "forkcontract exited $rc:"
    sed 's/^/    /' "$tmp/err"
fi
if timeout 30 "$prog" >/dev/null 2>&1; then
    t_bad "forkcontract passed without the library preloaded"
else
    t_ok "forkcontract refuses to run without the library"
fi
t_end
