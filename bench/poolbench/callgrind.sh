#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Instructions per malloc+free pair, counted by valgrind's callgrind, for
# each workload and allocator.  Run from a build directory (or pass -b).
#
# Method: the whole program's instruction total Ir is taken at two pair
# counts N1 < N2 of `poolbench --pairs`; (Ir(N2) - Ir(N1)) / (N2 - N1)
# cancels start-up, arena creation and exit.  The same slope of
# `--allocator none` (the identical loop around a do-nothing allocator) is
# the loop's own cost and is subtracted, so a figure is what one malloc and
# one free cost the program: the call, the PLT jump and the allocator.
# --toggle-collect is not used: the peers' malloc symbols are aliases whose
# names callgrind reports differently from one library to the next.
#
# Allocators: pool (libshmpool.so, SHMPOOL_MODE=process), glibc, and
# jemalloc, tcmalloc (the minimal library) and mimalloc from their Debian
# packages, all through the same poolbench binary's `malloc`; pool-direct is
# poolbench calling pool_malloc/pool_free itself, without the override;
# region is poolbench's per-request region (blocks of 4 KiB from glibc),
# region-64k the same with 64 KiB blocks; a region has no figure (n/a) for
# batch, frag and large, which free objects one by one.
#
# large: every pair writes a block of 5-120 MiB page by page, so it runs at
# a 5,000th of N1 and N2; callgrind counts user space only, and what large
# costs is mostly the kernel's (faults, munmap, MADV_REMOVE): see the timed
# run's system time and faults.  pingpong and prodcons need workers and do
# not run here; nor does thrash, whose cost is the cache lines two workers
# write, which callgrind does not see (rounds.sh and poolbench-all.sh time
# it).  largemix writes every page of its blocks too, one in 100 of them
# 64 KiB-4 MiB: here only its user-space part counts.
#
# Requests: a region frees only at the end of a request, so when one is
# listed, fixed16, fixed64, random256 and random8k are cut into requests of
# N allocations (-r, default 100) for every allocator, the loop included:
# N allocated, then all freed, or the region reset.  Their columns are then
# headed NAME/rN.  heavy is one /heavy request (95 allocations) either way.
set -eu

usage() {
    cat <<EOF
usage: callgrind.sh [-b BUILDDIR] [-w "WORKLOAD ..."] [-a "ALLOCATOR ..."] [-n N1] [-N N2]
                    [-r N]
  workloads:  fixed16 fixed64 batch random256 random8k heavy frag large leak largemix
              (default: fixed16 heavy)
  allocators: region region-64k pool pool-direct glibc jemalloc tcmalloc mimalloc
              (default: region pool glibc jemalloc tcmalloc mimalloc pool-direct)
  N1, N2:     pair counts (default 95000 and 760000, whole heavy rounds; large
              runs N1/5000 and N2/5000)
  N:          allocations per request for fixed16, fixed64, random256 and random8k
              (default 100 when a region is listed; 0: their plain loops, no region)
EOF
}

build=.
workloads="fixed16 heavy"
allocators="region pool glibc jemalloc tcmalloc mimalloc pool-direct"
n1=95000
n2=760000
request=
# --help prints the comment above (the method), then the usage.
case ${1:-} in -h|--help) sed -n '2,/^set -/{/^#/{s/^# \{0,1\}//;p;};}' "$0"; echo; usage; exit 0 ;; esac
while getopts b:w:a:n:N:r:h opt; do
    case $opt in
    b) build=$OPTARG ;;
    w) workloads=$OPTARG ;;
    a) allocators=$OPTARG ;;
    n) n1=$OPTARG ;;
    N) n2=$OPTARG ;;
    r) request=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
case $n1$n2 in *[!0-9]*|'') echo "callgrind.sh: -n and -N take counts" >&2; exit 2 ;; esac
for w in $workloads; do
    case $w in
    pingpong|prodcons) echo "callgrind.sh: $w needs workers; time it (rounds.sh)" >&2; exit 2 ;;
    thrash) echo "callgrind.sh: thrash costs cache lines, not instructions; time it (rounds.sh)" >&2; exit 2 ;;
    esac
done
if [ "$n1" -ge "$n2" ]; then
    echo "callgrind.sh: N1 ($n1) must be below N2 ($n2)" >&2
    exit 2
fi
regions=
for a in $allocators; do
    case $a in region|region-64k) regions=yes ;; esac
done
if [ -z "$request" ]; then
    request=0
    [ -z "$regions" ] || request=100
fi
case $request in *[!0-9]*|'') echo "callgrind.sh: -r takes a count" >&2; exit 2 ;; esac
if [ "$request" -eq 0 ] && [ -n "$regions" ]; then
    echo "callgrind.sh: a region needs requests: leave -r out or give it a count" >&2
    exit 2
fi

# request_opt WORKLOAD: the poolbench option that cuts it into requests, if any.
request_opt() {
    case $1 in
    fixed16|fixed64|random256|random8k) [ "$request" -eq 0 ] || echo "--request $request" ;;
    esac
}

# pairs WORKLOAD N: how many pairs WORKLOAD runs for the count N.
pairs() {
    case $1 in
    large) echo $(($2 / 5000)) ;;
    *) echo "$2" ;;
    esac
}

bench=$build/bench/poolbench/poolbench
pool_so=$build/shm/.libs/libshmpool.so
for f in "$bench" "$pool_so"; do
    if [ ! -f "$f" ]; then
        echo "callgrind.sh: $f not found; run make in the build directory or pass -b" >&2
        exit 1
    fi
done
if ! command -v valgrind >/dev/null; then
    echo "callgrind.sh: valgrind not found (Debian package valgrind)" >&2
    exit 1
fi

. "$(dirname "$0")/peers.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ir ALLOCATOR WORKLOAD N: total instructions of one poolbench run.
ir() {
    preload= mode= arg=malloc block=
    case $1 in
    pool) preload=$pool_so mode=process ;;
    pool-direct) arg=pool ;;
    region) arg=region ;;
    region-64k) arg=region block="--region-block 65536" ;;
    none) arg=none ;;
    glibc) ;;
    jemalloc) preload=$(peer_so jemalloc) || exit 1 ;;
    tcmalloc) preload=$(peer_so tcmalloc) || exit 1 ;;
    mimalloc) preload=$(peer_so mimalloc) || exit 1 ;;
    *) echo "callgrind.sh: unknown allocator $1" >&2; exit 2 ;;
    esac
    out=$tmp/callgrind.out
    env ${preload:+LD_PRELOAD=$preload} ${mode:+SHMPOOL_MODE=$mode} \
        valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$bench" --workload "$2" --allocator "$arg" --pairs "$3" $(request_opt "$2") $block \
        >"$tmp/stdout" 2>"$tmp/stderr" || {
        echo "callgrind.sh: $1 $2 --pairs $3 failed:" >&2
        tail -n 5 "$tmp/stderr" >&2
        exit 1
    }
    awk '/^(summary|totals):/ { print $2; exit }' "$out"
}

# slope ALLOCATOR WORKLOAD: instructions per pair including the loop.
slope() {
    m1=$(pairs "$2" "$n1")
    m2=$(pairs "$2" "$n2")
    if [ "$m1" -lt 1 ] || [ "$m1" -ge "$m2" ]; then
        echo "callgrind.sh: $2 runs $m1 and $m2 pairs for N1=$n1 and N2=$n2: raise them" >&2
        exit 2
    fi
    a=$(ir "$1" "$2" "$m1") || exit 1
    b=$(ir "$1" "$2" "$m2") || exit 1
    awk -v a="$a" -v b="$b" -v n1="$m1" -v n2="$m2" \
        'BEGIN { printf "%.1f", (b - a) / (n2 - n1) }'
}

echo "callgrind: instructions per malloc+free pair, (Ir(N2)-Ir(N1))/(N2-N1)" \
     "with N1=$n1 N2=$n2, minus the loop's own cost"
[ "$request" -eq 0 ] || echo "NAME/r$request: NAME in requests of $request allocations, then all" \
    "freed (a region: reset); heavy: requests of 95"
case " $workloads " in
*" large "*) echo "large: $(pairs large "$n1") and $(pairs large "$n2") pairs, user space only" \
    "(its faults are the kernel's)" ;;
esac
printf '%-12s' allocator
for w in $workloads; do
    if [ -n "$(request_opt "$w")" ]; then printf ' %14s' "$w/r$request"; else printf ' %14s' "$w"; fi
done
printf '\n'
for w in $workloads; do
    l=$(slope none "$w") || exit 1
    eval "loop_$w=\$l"
done
# runs ALLOCATOR WORKLOAD: false for a region on a workload without
# requests (batch, pingpong, prodcons, frag, large, leak and largemix free
# objects one by one).
runs() {
    case $1:$2 in
    region*:batch|region*:pingpong|region*:prodcons|region*:frag|region*:large) return 1 ;;
    region*:leak|region*:largemix) return 1 ;;
    esac
    return 0
}

for a in $allocators; do
    printf '%-12s' "$a"
    for w in $workloads; do
        if ! runs "$a" "$w"; then
            printf ' %14s' n/a
            continue
        fi
        s=$(slope "$a" "$w") || exit 1
        eval "l=\$loop_$w"
        awk -v s="$s" -v l="$l" 'BEGIN { printf " %14.1f", s - l }'
    done
    printf '\n'
done
printf '%-12s' "(loop)"
for w in $workloads; do
    eval "l=\$loop_$w"
    printf ' %14s' "$l"
done
printf '\n'
