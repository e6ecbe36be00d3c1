#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Programs that bring their own allocator (tests/pool/foreign.c, linked to
# jemalloc, mimalloc and tcmalloc_minimal) on LD_PRELOAD=libshmpool.so,
# with SHMPOOL_MODE unset, process and children: each mixes its
# allocator's own entry points with the standard ones on each other's
# blocks, in a process and its forked child, and must exit 0 with no word
# on stderr, where the preload takes the heap over (jemalloc: in the arena
# where the mode puts it); where it cannot (tcmalloc, mimalloc), one line
# at start says so, and the program runs on its own allocator.
#
# A program configure could not build (its library missing) is named with
# its Debian package, and the test exits 77 once the others have run.
#
# Environment (set by make check): SHMPOOL_LIB, TESTS_BUILDDIR.
set -u

lib=${SHMPOOL_LIB:?SHMPOOL_LIB is not set}
builddir=${TESTS_BUILDDIR:?TESTS_BUILDDIR is not set}
limit=60

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0 missing=0

fail() {
    echo "foreign: FAIL: $*" >&2
    status=1
}

# run NAME WANT_STDOUT WANT_STDERR_LINES COMMAND...: exit 0, stdout exactly
# WANT_STDOUT, and that many lines on stderr, each saying the program runs
# on its own allocator.
run() {
    name=$1 want=$2 lines=$3
    shift 3
    timeout $limit "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    got=$(cat "$tmp/out")
    n=$(wc -l <"$tmp/err")
    said=$(grep -c 'runs on that allocator, without the arena' "$tmp/err")
    if [ $rc -ne 0 ]; then
        fail "$name: exit status $rc"
        head -n 5 "$tmp/err" >&2
    elif [ "$got" != "$want" ]; then
        fail "$name: printed '$(echo $got)', expected '$(echo $want)'"
    elif [ "$n" -ne "$lines" ] || [ "$said" -ne "$lines" ]; then
        fail "$name: $n lines on stderr, expected $lines saying it runs on its own allocator"
        head -n 5 "$tmp/err" >&2
    else
        echo "foreign: ok: $name: $(echo $got), $lines line(s) on stderr"
    fi
}

landed() {
    printf 'parent: %s\nchild: %s' "$1" "$2"
}

# allocator NAME PACKAGE TAKEN_OVER
allocator() {
    prog=$builddir/foreign_$1
    if [ ! -x "$prog" ]; then
        echo "foreign: SKIP: $1: configure found no lib$1 (Debian package $2)," \
             "so tests/foreign_$1 was not built; scripts/deps-debian.sh installs it" >&2
        missing=1
        return
    fi
    run "$1 without the preload" "$(landed private private)" 0 "$prog"
    run "$1, SHMPOOL_MODE unset" "$(landed private private)" 0 \
        env LD_PRELOAD="$lib" "$prog"
    if [ "$3" = yes ]; then
        run "$1, SHMPOOL_MODE=process" "$(landed arena private)" 0 \
            env LD_PRELOAD="$lib" SHMPOOL_MODE=process "$prog"
        run "$1, SHMPOOL_MODE=children" "$(landed private arena)" 0 \
            env LD_PRELOAD="$lib" SHMPOOL_MODE=children "$prog"
    else
        for mode in process children; do
            run "$1, SHMPOOL_MODE=$mode" "$(landed private private)" 1 \
                env LD_PRELOAD="$lib" SHMPOOL_MODE=$mode "$prog"
        done
    fi
}

allocator jemalloc libjemalloc-dev yes
allocator mimalloc libmimalloc-dev no
allocator tcmalloc libgoogle-perftools-dev no

[ $status -ne 0 ] && exit $status
[ $missing -ne 0 ] && exit 77
exit 0
