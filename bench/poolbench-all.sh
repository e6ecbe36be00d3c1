#!/bin/sh
# Every poolbench workload at -P 1, -P 2, -P 4, -T 2 and -T 4 for every
# allocator, into one CSV and one Markdown table.  Run from a Release build
# directory (or pass -b); see bench/README.md.
#
# Arms:
#   pool          poolbench --allocator pool: pool_malloc/pool_free called
#                 directly; the arena is created by poolbench and, under -P,
#                 attached by every worker process after fork.  Measured in
#                 the same runs as glibc (interleaved), so pool/glibc is a
#                 side-by-side ratio.
#   pool-preload  libshmpool.so under LD_PRELOAD, SHMPOOL_MODE=process: -T
#                 only, because the forked children of such a process run on
#                 a private copy of the arena (libshmpool(7)); for -P the
#                 pool arm is the measurement.
#   glibc, jemalloc, tcmalloc, mimalloc
#                 the same binary's malloc, the peers preloaded from their
#                 Debian packages (paths from dpkg -L).
#   pool-spin     with --spin-build DIR: the pool arm of a build configured
#                 with --enable-pool-lock=spin, at -P 2 (workers <= cores on
#                 a 2-core machine) and -P 4 (workers > cores).
# frag runs alone per allocator: its memory figures are the process's.
set -eu

usage() {
    cat <<EOF
usage: poolbench-all.sh [-b BUILDDIR] [--spin-build DIR] [--quick] [--runs R] [OUTDIR]
  OUTDIR defaults to bench/results/<date>-<host> under the source tree;
  poolbench.csv and poolbench.md are written there.
  --quick   a quarter of every workload's pairs per run (about 2 minutes on 2 cores)
EOF
}

here=$(cd "$(dirname "$0")" && pwd)
build=.
spin=
scale=1
runs=5
out=
while [ $# -gt 0 ]; do
    case $1 in
    -b) [ $# -ge 2 ] || { usage >&2; exit 2; }; build=$2; shift 2 ;;
    --spin-build) [ $# -ge 2 ] || { usage >&2; exit 2; }; spin=$2; shift 2 ;;
    --quick) scale=0.25; shift ;;
    --runs) [ $# -ge 2 ] || { usage >&2; exit 2; }; runs=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "poolbench-all.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) [ -z "$out" ] || { usage >&2; exit 2; }; out=$1; shift ;;
    esac
done
case $runs in ''|*[!0-9]*) echo "poolbench-all.sh: --runs takes a count" >&2; exit 2 ;; esac
if [ "$runs" -lt 5 ]; then
    echo "poolbench-all.sh: --runs must be at least 5 (a median of fewer is noise)" >&2
    exit 2
fi
[ -n "$out" ] || out=$here/results/$(date +%Y-%m-%d)-$(hostname -s)

bench=$build/bench/poolbench
pool_so=$build/shm/.libs/libshmpool.so
for f in "$bench" "$pool_so"; do
    if [ ! -x "$f" ] && [ ! -f "$f" ]; then
        echo "poolbench-all.sh: $f not found; run make in the build directory or pass -b" >&2
        exit 1
    fi
done
if [ -n "$spin" ] && [ ! -x "$spin/bench/poolbench" ]; then
    echo "poolbench-all.sh: $spin/bench/poolbench not found (a build configured with --enable-pool-lock=spin)" >&2
    exit 1
fi
if [ -n "$spin" ] && ! grep -q '^#define POOL_CONFIG_SPINLOCK 1' "$spin/config.h" 2>/dev/null; then
    echo "poolbench-all.sh: $spin is not configured with --enable-pool-lock=spin" >&2
    exit 1
fi
for b in "$build" ${spin:+"$spin"}; do
    if grep -q '^#define POOL_CONFIG_STATS 1' "$b/config.h" 2>/dev/null; then
        echo "poolbench-all.sh: $b is a stats build; time a Release build (poolbench --stats there)" >&2
        exit 1
    fi
done

. "$here/peers.sh"
jemalloc=$(peer_so jemalloc)
tcmalloc=$(peer_so tcmalloc)
mimalloc=$(peer_so mimalloc)

mkdir -p "$out"
csv=$out/poolbench.csv
md=$out/poolbench.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/rows"
workloads=$("$bench" --help | awk '/^workloads:/ { on = 1; next } on && NF { print $1 }')
modes="-P1 -P2 -P4 -T2 -T4"
started=$(date +%s)

# one NAME ENV... -- POOLBENCH-ARGS: one poolbench invocation whose rows
# are appended with the allocator column renamed NAME (if not empty).
one() {
    name=$1
    shift
    envs=
    while [ "$1" != -- ]; do envs="$envs $1"; shift; done
    shift
    if ! env $envs "$@" --runs "$runs" --scale "$scale" --csv >"$tmp/one" 2>"$tmp/err"; then
        echo "poolbench-all.sh: failed: $envs $*" >&2
        cat "$tmp/err" >&2
        exit 1
    fi
    cat "$tmp/err" >&2
    [ -s "$tmp/header" ] || head -n 1 "$tmp/one" >"$tmp/header"
    tail -n +2 "$tmp/one" | awk -F, -v OFS=, -v name="$name" \
        'name != "" { $3 = name } { print }' >>"$tmp/rows"
}

for mode in $modes; do
    flag=${mode%?}
    n=${mode#??}
    for w in $workloads; do
        echo "poolbench-all.sh: $w $flag $n" >&2
        if [ "$w" = frag ]; then
            one "" -- "$bench" --workload "$w" "$flag" "$n" --allocator pool
            one glibc -- "$bench" --workload "$w" "$flag" "$n" --allocator malloc --label glibc
        else
            one "" -- "$bench" --workload "$w" "$flag" "$n" --label glibc
        fi
        if [ "$flag" = -T ]; then
            one pool-preload LD_PRELOAD="$pool_so" SHMPOOL_MODE=process -- \
                "$bench" --workload "$w" "$flag" "$n" --allocator malloc --label pool-preload
        fi
        for peer in jemalloc tcmalloc mimalloc; do
            eval "so=\$$peer"
            one "$peer" LD_PRELOAD="$so" -- "$bench" --workload "$w" "$flag" "$n" \
                --allocator malloc --label "$peer"
        done
        if [ -n "$spin" ] && { [ "$mode" = -P2 ] || [ "$mode" = -P4 ]; }; then
            one pool-spin -- "$spin/bench/poolbench" --workload "$w" "$flag" "$n" --allocator pool
        fi
    done
done
cat "$tmp/header" "$tmp/rows" >"$csv"
elapsed=$(( $(date +%s) - started ))

# ------------------------------------------------------------------------
# The Markdown report: one table of ns per pair, one of frag's memory.
# ------------------------------------------------------------------------
version() { dpkg-query -W -f '${Version}' "$1" 2>/dev/null || echo unknown; }
{
    echo "# poolbench: the allocator alone"
    echo
    echo "Generated by \`bench/poolbench-all.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC') in ${elapsed} s."
    echo
    echo "Machine: $(hostname -s), $(nproc) online CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)),"
    echo "Linux $(uname -r), $(ldd --version 2>&1 | head -n 1)."
    echo "Allocators: jemalloc $(version libjemalloc2), tcmalloc (minimal) $(version libtcmalloc-minimal4),"
    echo "mimalloc $(version libmimalloc2.0); the pool from this tree$(git -C "$here/.." rev-parse --short HEAD 2>/dev/null | sed 's/^/ at /')."
    echo
    echo "Each cell: $runs timed runs after a warm-up, median of the runs; a run's figure"
    echo "is the mean over its workers of ns per malloc+free pair (a worker's elapsed"
    echo "time, so with more workers than cores it includes time spent descheduled)."
    echo "Pairs per run are each workload's default times $scale. Absolute figures from a"
    echo "shared 2-core VM are not production figures; compare ratios, and the pool"
    echo "with glibc above all, which ran interleaved with it in the same runs."
    echo "\`-P N\`: N processes sharing the arena; \`-T N\`: N threads of one process."
    echo "pool-preload runs only under -T (its forked children leave the pool);"
    echo "pingpong under -P is impossible for a preloaded malloc (private heaps)."
    echo
    awk -F, '
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    {
        w = $col["workload"]; ph = $col["phase"]; a = $col["allocator"]; m = $col["mode"]
        row = w (ph == "all" ? "" : " " ph) " | " m
        if (!(row in seen)) { seen[row] = 1; order[++nrow] = row }
        if (!(a in aseen)) { aseen[a] = 1 }
        v = $col["median_ns"]
        cell[row, a] = v == "" ? "n/a" : v
        if (v != "" && a != "pool" && a != "pool-spin" && a != "pool-preload" && a != "glibc" &&
            (!((row) in best) || v + 0 < best[row] + 0)) { best[row] = v; bestname[row] = a }
        if (a == "pool" && $col["ratio_to_malloc"] != "") ratio[row] = $col["ratio_to_malloc"]
        if (a == "pool" && v != "") pool[row] = v
        if (w == "frag" && v != "") {
            mrow = m; if (!(mrow in mseen)) { mseen[mrow] = 1; morder[++nm] = mrow }
            mem[mrow, a] = $col["pss_kb"] " / " $col["rss_kb"] " / " $col["rss_shmem_kb"] " / " $col["big_10mib"]
            flt[mrow, a] = $col["faults_per_kpair"]
        }
    }
    END {
        n = split("pool pool-spin pool-preload glibc jemalloc tcmalloc mimalloc", all, " ")
        k = 0
        for (i = 1; i <= n; i++) if (all[i] in aseen) names[++k] = all[i]
        printf "## ns per malloc+free pair (median)\n\n| workload | mode |"
        for (i = 1; i <= k; i++) printf " %s |", names[i]
        printf " pool ÷ glibc | pool ÷ best peer |\n|---|---|"
        for (i = 1; i <= k + 2; i++) printf "--:|"
        printf "\n"
        for (r = 1; r <= nrow; r++) {
            row = order[r]
            printf "| %s |", row
            for (i = 1; i <= k; i++) printf " %s |", ((row, names[i]) in cell) ? cell[row, names[i]] : ""
            printf " %s |", (row in ratio) ? ratio[row] : ""
            if ((row in pool) && (row in best) && best[row] + 0 > 0)
                printf " %.3f (%s) |", pool[row] / best[row], bestname[row]
            else
                printf " |"
            printf "\n"
        }
        printf "\n## frag: memory held after the churn\n\n"
        printf "PSS / RSS / RssShmem in kB, and whether a 10 MiB block could still be had;"
        printf " under -P summed over the worker processes (PSS sums to the footprint).\n"
        printf "Minor faults per 1,000 pairs in the second table.\n\n| mode |"
        for (i = 1; i <= k; i++) printf " %s |", names[i]
        printf "\n|---|"
        for (i = 1; i <= k; i++) printf "---|"
        printf "\n"
        for (r = 1; r <= nm; r++) {
            printf "| %s |", morder[r]
            for (i = 1; i <= k; i++) printf " %s |", ((morder[r], names[i]) in mem) ? mem[morder[r], names[i]] : ""
            printf "\n"
        }
        printf "\n| mode |"
        for (i = 1; i <= k; i++) printf " %s |", names[i]
        printf "\n|---|"
        for (i = 1; i <= k; i++) printf "--:|"
        printf "\n"
        for (r = 1; r <= nm; r++) {
            printf "| %s |", morder[r]
            for (i = 1; i <= k; i++) printf " %s |", ((morder[r], names[i]) in flt) ? flt[morder[r], names[i]] : ""
            printf "\n"
        }
    }' "$csv"
} >"$md"
echo "poolbench-all.sh: $csv and $md written in ${elapsed} s" >&2
