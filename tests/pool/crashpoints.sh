#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# The crash points the sources use are the ones the library lists (which
# crashfuzz runs, every one): a point added without being listed would
# never be fuzzed, and a listed one the code no longer has would make the
# fuzzer's "every point reached" check fail for the wrong reason.
set -eu
fuzz=${TESTS_BUILDDIR:?}/crashfuzz
src=${top_srcdir:?}/shm
used=$(grep -oh 'POOL_CRASH_POINT("[^"]*")' "$src"/*.c | sed 's/.*("\(.*\)")/\1/' | sort -u)
listed=$("$fuzz" --list | grep -v '^journal\.' | sort -u)
if [ "$used" != "$listed" ]; then
    echo "crashpoints: the sources use: $(echo $used)"
    echo "crashpoints: the library lists: $(echo $listed)"
    exit 1
fi
# Every operation kind's journaled steps are points too.
ops=$(sed -n 's/^ *POOL_OP_\([A-Z_]*\) = [1-9].*/\1/p' "$src"/pool-types.h | wc -l)
steps=$("$fuzz" --list | grep -c '^journal\.')
if [ "$ops" -ne "$steps" ]; then
    echo "crashpoints: $ops operation kinds but $steps journal.<op> points"
    exit 1
fi
echo "crashpoints: $(echo "$used" | wc -l) named points and $steps journal.<op> points, all listed"
