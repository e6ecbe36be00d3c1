#!/bin/sh
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
# poolbench calling pool_malloc/pool_free itself, without the override.
set -eu

usage() {
    cat <<EOF
usage: callgrind.sh [-b BUILDDIR] [-w "WORKLOAD ..."] [-a "ALLOCATOR ..."] [-n N1] [-N N2]
  workloads:  fixed16 batch random256 random8k heavy (default: fixed16 heavy)
  allocators: pool pool-direct glibc jemalloc tcmalloc mimalloc
              (default: pool glibc jemalloc tcmalloc mimalloc pool-direct)
  N1, N2:     pair counts (default 95000 and 760000, whole heavy rounds)
EOF
}

build=.
workloads="fixed16 heavy"
allocators="pool glibc jemalloc tcmalloc mimalloc pool-direct"
n1=95000
n2=760000
while getopts b:w:a:n:N:h opt; do
    case $opt in
    b) build=$OPTARG ;;
    w) workloads=$OPTARG ;;
    a) allocators=$OPTARG ;;
    n) n1=$OPTARG ;;
    N) n2=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
case $n1$n2 in *[!0-9]*|'') echo "callgrind.sh: -n and -N take counts" >&2; exit 2 ;; esac
if [ "$n1" -ge "$n2" ]; then
    echo "callgrind.sh: N1 ($n1) must be below N2 ($n2)" >&2
    exit 2
fi

bench=$build/bench/poolbench
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
    preload= mode= arg=malloc
    case $1 in
    pool) preload=$pool_so mode=process ;;
    pool-direct) arg=pool ;;
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
        "$bench" --workload "$2" --allocator "$arg" --pairs "$3" \
        >"$tmp/stdout" 2>"$tmp/stderr" || {
        echo "callgrind.sh: $1 $2 --pairs $3 failed:" >&2
        tail -n 5 "$tmp/stderr" >&2
        exit 1
    }
    awk '/^(summary|totals):/ { print $2; exit }' "$out"
}

# slope ALLOCATOR WORKLOAD: instructions per pair including the loop.
slope() {
    a=$(ir "$1" "$2" "$n1") || exit 1
    b=$(ir "$1" "$2" "$n2") || exit 1
    awk -v a="$a" -v b="$b" -v n1="$n1" -v n2="$n2" \
        'BEGIN { printf "%.1f", (b - a) / (n2 - n1) }'
}

echo "callgrind: instructions per malloc+free pair, (Ir(N2)-Ir(N1))/(N2-N1)" \
     "with N1=$n1 N2=$n2, minus the loop's own cost"
printf '%-12s' allocator
for w in $workloads; do printf '%10s' "$w"; done
printf '\n'
for w in $workloads; do
    l=$(slope none "$w") || exit 1
    eval "loop_$w=\$l"
done
for a in $allocators; do
    printf '%-12s' "$a"
    for w in $workloads; do
        s=$(slope "$a" "$w") || exit 1
        eval "l=\$loop_$w"
        awk -v s="$s" -v l="$l" 'BEGIN { printf "%10.1f", s - l }'
    done
    printf '\n'
done
printf '%-12s' "(loop)"
for w in $workloads; do
    eval "l=\$loop_$w"
    printf '%10s' "$l"
done
printf '\n'
