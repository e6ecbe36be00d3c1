#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Every poolbench workload at -P 1, -P 2, -P 4, -T 2 and -T 4 for every
# allocator, into one CSV and one Markdown table.  Run from a Release build
# directory (or pass -b); poolbench --help describes the workloads.
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
#   pool-thp      the pool arm with SHMPOOL_HUGEPAGES=thp, for frag, large
#                 and largemix (the workloads whose cost is page faults), when the
#                 system gives shared memory transparent huge pages
#                 (shmem_enabled not never or deny).  A kernel that maps
#                 private memory in folios of several pages (mTHP) but
#                 shared memory in base pages makes every fresh page cost
#                 the pool more than a private heap (bench/probes/faultcost
#                 measures both); this arm shows what the arena's option
#                 for it buys.
# frag runs alone per allocator: its memory figures are the process's.
# large does too: glibc's arm faults in and zeroes some 600 MB of fresh
# pages a run, which leaves the caches cold for the next arm's page walks
# (the pool's -P 1 run took 270-290 us a pair after glibc's, 160-180 us
# alone), and the peers it is compared with run alone.  largemix too:
# in the same runs as glibc's (25-100 us a pair) the pool's -T 2 took
# 5.6 us a pair, the pool preloaded, alone, 0.26.
# pingpong and prodcons free every block in another worker than the one
# that allocated it, which under -P only the pool can do: there the peers
# get a row that says so, and the report compares the pool's -P N with the
# peers' -T N.
#
# The region table (regions.csv, regions.md; alone with --regions-only):
# the per-request region against the same arms, every workload cut into
# requests of N allocations (--request, default 100; heavy: one /heavy
# request of 95) for every arm.  16 B with one worker, 64 B with 2 and 4
# workers (threads and processes), 1-256 B and 1 B-8 KiB, and heavy:
#   region        4 KiB blocks from glibc, run interleaved with pool and glibc
#   region-64k    64 KiB blocks from glibc
#   region/pool   4 KiB blocks from the pool (libshmpool.so preloaded, -T only)
set -eu

usage() {
    cat <<EOF
usage: poolbench-all.sh [-b BUILDDIR] [--spin-build DIR] [--quick] [--runs R]
                        [--request N] [--workloads "NAME ..."] [--regions-only] [OUTDIR]
  OUTDIR defaults to bench/runs/<date>-<host> under the source tree;
  poolbench.csv and poolbench.md, then regions.csv and regions.md are written there.
  --quick         a quarter of every workload's pairs per run (about 2 minutes on
                  2 cores for each of the two tables)
  --workloads L   only these workloads in the first table (default: every one
                  poolbench --help lists)
  --request N     allocations per request in the region table (default 100)
  --regions-only  only the region table
EOF
}

here=$(cd "$(dirname "$0")" && pwd)
build=.
spin=
scale=1
runs=5
request=100
regions_only=
workloads=
out=
while [ $# -gt 0 ]; do
    case $1 in
    -b) [ $# -ge 2 ] || { usage >&2; exit 2; }; build=$2; shift 2 ;;
    --spin-build) [ $# -ge 2 ] || { usage >&2; exit 2; }; spin=$2; shift 2 ;;
    --quick) scale=0.25; shift ;;
    --runs) [ $# -ge 2 ] || { usage >&2; exit 2; }; runs=$2; shift 2 ;;
    --request) [ $# -ge 2 ] || { usage >&2; exit 2; }; request=$2; shift 2 ;;
    --workloads) [ $# -ge 2 ] || { usage >&2; exit 2; }; workloads=$2; shift 2 ;;
    --regions-only) regions_only=yes; shift ;;
    -h|--help) sed -n '2,/^set -/{/^#/{s/^# \{0,1\}//;p;};}' "$0"; echo; usage; exit 0 ;;
    -*) echo "poolbench-all.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) [ -z "$out" ] || { usage >&2; exit 2; }; out=$1; shift ;;
    esac
done
case $runs in ''|*[!0-9]*) echo "poolbench-all.sh: --runs takes a count" >&2; exit 2 ;; esac
if [ "$runs" -lt 5 ]; then
    echo "poolbench-all.sh: --runs must be at least 5 (a median of fewer is noise)" >&2
    exit 2
fi
case $request in ''|*[!0-9]*|0) echo "poolbench-all.sh: --request takes a count from 1" >&2; exit 2 ;; esac
[ -n "$out" ] || out=$here/../runs/$(date +%Y-%m-%d)-$(hostname -s)

bench=$build/bench/poolbench/poolbench
pool_so=$build/shm/.libs/libshmpool.so
for f in "$bench" "$pool_so"; do
    if [ ! -x "$f" ] && [ ! -f "$f" ]; then
        echo "poolbench-all.sh: $f not found; run make in the build directory or pass -b" >&2
        exit 1
    fi
done
if [ -n "$spin" ] && [ ! -x "$spin/bench/poolbench/poolbench" ]; then
    echo "poolbench-all.sh: $spin/bench/poolbench/poolbench not found (a build configured with --enable-pool-lock=spin)" >&2
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
rcsv=$out/regions.csv
rmd=$out/regions.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/rows"
: >"$tmp/rrows"
known=$("$bench" --help | awk '/^workloads:/ { on = 1; next } on && NF { print $1 }')
for w in $workloads; do
    case " $(echo $known) " in
    *" $w "*) ;;
    *) echo "poolbench-all.sh: no workload $w (poolbench --help lists: $(echo $known))" >&2; exit 2 ;;
    esac
done
[ -n "$workloads" ] || workloads=$known
modes="-P1 -P2 -P4 -T2 -T4"
thp=
case $(cat /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null) in
*'[advise]'*|*'[within_size]'*|*'[always]'*|*'[force]'*) thp=yes ;;
esac
version() { dpkg-query -W -f '${Version}' "$1" 2>/dev/null || echo unknown; }

# one ROWS RENAMES ENV... -- POOLBENCH-ARGS: one poolbench invocation whose
# rows are appended to the file ROWS, the allocator column renamed as
# RENAMES says ("from=to ...", or empty).
one() {
    rows=$1 renames=$2
    shift 2
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
    tail -n +2 "$tmp/one" | awk -F, -v OFS=, -v renames="$renames" '
        BEGIN { n = split(renames, r, " "); for (i = 1; i <= n; i++) { split(r[i], kv, "="); to[kv[1]] = kv[2] } }
        $3 in to { $3 = to[$3] } { print }' >>"$rows"
}

# For both reports' awk: a Markdown table of v[row, arm] over the rows
# sel[1..n] and the arms names[1..k] (the caller's globals): the row
# columns' head and separator (e.g. "| mode |", "|---|"), then each arm's
# column with `align` as its separator cell, a blank cell where v has none.
md_table='
function md_table(head, sep, align, v, sel, n,   i, r) {
    printf "%s", head
    for (i = 1; i <= k; i++) printf " %s |", names[i]
    printf "\n%s", sep
    for (i = 1; i <= k; i++) printf "%s", align
    printf "\n"
    for (r = 1; r <= n; r++) {
        printf "| %s |", sel[r]
        for (i = 1; i <= k; i++) printf " %s |", ((sel[r], names[i]) in v) ? v[sel[r], names[i]] : ""
        printf "\n"
    }
}'

# The folio sizes the kernel may use, per size and kind ("enabled" for
# private memory, "shmem_enabled" for shared), with their setting, and the
# top-level one that "inherit" refers to: they decide what a fresh page
# costs each arm.
folios() {
    list=
    for f in /sys/kernel/mm/transparent_hugepage/hugepages-*kB/"$1"; do
        [ -r "$f" ] || continue
        v=$(sed 's/.*\[\([a-z_+]*\)\].*/\1/' "$f")
        [ "$v" = never ] && continue
        size=${f#*hugepages-}
        list="$list ${size%%/*} $v,"
    done
    top=$(sed 's/.*\[\([a-z_+]*\)\].*/\1/' "/sys/kernel/mm/transparent_hugepage/$1" 2>/dev/null)
    echo "${list:- none,} top-level ${top:-unknown}"
}

# The machine, for both reports.
machine() {
    echo "Machine: $(hostname -s), $(nproc) online CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)),"
    echo "Linux $(uname -r), $(ldd --version 2>&1 | head -n 1)."
    echo "Folios (mTHP) for private memory:$(folios enabled); for shared memory:$(folios shmem_enabled)."
    echo "Allocators: jemalloc $(version libjemalloc2), tcmalloc (minimal) $(version libtcmalloc-minimal4),"
    echo "mimalloc $(version libmimalloc2.0); the pool and the region from this tree$(git -C "$here/../.." rev-parse --short HEAD 2>/dev/null | sed 's/^/ at /')."
}

if [ -z "$regions_only" ]; then
    started=$(date +%s)
    for mode in $modes; do
        flag=${mode%?}
        n=${mode#??}
        for w in $workloads; do
            echo "poolbench-all.sh: $w $flag $n" >&2
            if [ "$w" = frag ] || [ "$w" = large ] || [ "$w" = largemix ]; then
                one "$tmp/rows" "" -- "$bench" --workload "$w" "$flag" "$n" --allocator pool
                one "$tmp/rows" "" -- "$bench" --workload "$w" "$flag" "$n" --allocator malloc \
                    --label glibc
                if [ -n "$thp" ]; then
                    one "$tmp/rows" pool=pool-thp SHMPOOL_HUGEPAGES=thp -- "$bench" --workload "$w" \
                        "$flag" "$n" --allocator pool
                fi
            else
                one "$tmp/rows" "" -- "$bench" --workload "$w" "$flag" "$n" --label glibc
            fi
            if [ "$flag" = -T ]; then
                one "$tmp/rows" "" LD_PRELOAD="$pool_so" SHMPOOL_MODE=process -- \
                    "$bench" --workload "$w" "$flag" "$n" --allocator malloc --label pool-preload
            fi
            for peer in jemalloc tcmalloc mimalloc; do
                eval "so=\$$peer"
                one "$tmp/rows" "" LD_PRELOAD="$so" -- "$bench" --workload "$w" "$flag" "$n" \
                    --allocator malloc --label "$peer"
            done
            if [ -n "$spin" ] && { [ "$mode" = -P2 ] || [ "$mode" = -P4 ]; }; then
                one "$tmp/rows" pool=pool-spin -- "$spin/bench/poolbench/poolbench" --workload "$w" "$flag" "$n" \
                    --allocator pool
            fi
        done
    done
    cat "$tmp/header" "$tmp/rows" >"$csv"
    elapsed=$(( $(date +%s) - started ))

    # ------------------------------------------------------------------------
    # The Markdown report: one table of ns per pair, one of frag's memory.
    # ------------------------------------------------------------------------
    {
        echo "# poolbench: the allocator alone"
        echo
        echo "Generated by \`bench/poolbench/poolbench-all.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC') in ${elapsed} s."
        echo
        machine
        echo
        echo "Each cell: $runs timed runs after a warm-up, median of the runs; a run's figure"
        echo "is the mean over its workers of ns per malloc+free pair (a worker's elapsed"
        echo "time, so with more workers than cores it includes time spent descheduled)."
        echo "Pairs per run are each workload's default times $scale. Absolute figures from a"
        echo "shared 2-core VM are not production figures; compare ratios, and the pool"
        echo "with glibc above all, which ran interleaved with it in the same runs."
        echo "\`-P N\`: N processes sharing the arena; \`-T N\`: N threads of one process."
        echo "pool-preload runs only under -T (its forked children leave the pool);"
        echo "pingpong and prodcons under -P are impossible for a preloaded malloc (private"
        echo "heaps: no process can free another's block), so in their -P rows pool ÷ glibc"
        echo "and pool ÷ best peer compare the pool's \`-P N\` with the others' \`-T N\`,"
        echo "marked so. CPU time (the thread's CPU clock; its system part is getrusage's"
        echo "share, sampled at the kernel's tick), faults and voluntary context switches"
        echo "(getrusage) are per pair and the workers' mean, like ns per pair."
        echo
        awk -F, "$md_table"'
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        {
            w = $col["workload"]; ph = $col["phase"]; a = $col["allocator"]; m = $col["mode"]
            shape = w (ph == "all" ? "" : " " ph)
            row = shape " | " m
            if (!(row in seen)) { seen[row] = 1; order[++nrow] = row; rshape[row] = shape; rmode[row] = m; rw[row] = w }
            if (!(a in aseen)) { aseen[a] = 1 }
            v = $col["median_ns"]
            cell[row, a] = v == "" ? "n/a" : num(v)
            if (v != "") {
                cpu[row, a] = num($col["cpu_ns"]) " (" num($col["sys_ns"]) ")"
                vcsw[row, a] = $col["vcsw_per_kpair"]
                fpp[row, a] = sprintf("%.0f", $col["faults_per_kpair"] / 1000)
            }
            if (v != "" && a != "pool" && a != "pool-spin" && a != "pool-thp" && a != "pool-preload" && a != "glibc" &&
                (!((row) in best) || v + 0 < best[row] + 0)) { best[row] = v; bestname[row] = a }
            if (a == "pool" && $col["ratio_to_malloc"] != "") ratio[row] = $col["ratio_to_malloc"]
            if (a == "pool" && v != "") pool[row] = v
            if (a == "pool-thp" && v != "") { thp[row] = v; anythp = 1 }
            if (w == "thrash" && $col["near64"] != "")
                near[row, a] = $col["near64"] " / " $col["near128"]
            if (w == "frag" && v != "") {
                mrow = m; if (!(mrow in mseen)) { mseen[mrow] = 1; morder[++nm] = mrow }
                mem[mrow, a] = $col["pss_kb"] " / " $col["rss_kb"] " / " $col["rss_shmem_kb"] " / " $col["big_10mib"]
                flt[mrow, a] = $col["faults_per_kpair"]
            }
        }
        # A figure of 1,000 or more needs no decimals (the ns of large run to millions).
        function num(v) { return v + 0 >= 1000 ? sprintf("%.0f", v) : v }
        # One table of a usage figure v[row, arm] for the rows of the workloads in
        # the space-separated list that have one; nothing when none has.
        function detail(title, note, list, v,   r, n, sel) {
            n = 0
            for (r = 1; r <= nrow; r++)
                if (index(" " list " ", " " rw[order[r]] " ") > 0 && ((order[r] in pool) || (order[r] in best)))
                    sel[++n] = order[r]
            if (n == 0) return
            printf "\n## %s\n\n%s\n\n", title, note
            md_table("| workload | mode |", "|---|---|", "--:|", v, sel, n)
        }
        END {
            n = split("pool pool-spin pool-thp pool-preload glibc jemalloc tcmalloc mimalloc", all, " ")
            k = 0
            for (i = 1; i <= n; i++) if (all[i] in aseen) names[++k] = all[i]
            # A -P row the peers cannot run (pingpong, prodcons) is compared with
            # their -T row of as many workers.
            for (r = 1; r <= nrow; r++) {
                row = order[r]
                if (rmode[row] !~ /^P/ || (row in best) || !(row in pool)) continue
                tmode = "T" substr(rmode[row], 2)
                trow = rshape[row] " | " tmode
                if (trow in best) { best[row] = best[trow]; bestname[row] = bestname[trow] " " tmode }
                if (!(row in ratio) && cell[trow, "glibc"] + 0 > 0)
                    ratio[row] = sprintf("%.3f (glibc %s)", pool[row] / cell[trow, "glibc"], tmode)
            }
            printf "## ns per malloc+free pair (median)\n\n| workload | mode |"
            for (i = 1; i <= k; i++) printf " %s |", names[i]
            printf " pool ÷ glibc | pool ÷ best peer |%s\n|---|---|", anythp ? " pool-thp ÷ best peer |" : ""
            for (i = 1; i <= k + 2 + anythp; i++) printf "--:|"
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
                if (anythp && (row in thp) && (row in best) && best[row] + 0 > 0)
                    printf " %.3f (%s) |", thp[row] / best[row], bestname[row]
                else if (anythp)
                    printf " |"
                printf "\n"
            }
            if (nm > 0) {
                printf "\n## frag: memory held after the churn\n\n"
                printf "PSS / RSS / RssShmem in kB, and whether a 10 MiB block could still be had;"
                printf " under -P summed over the worker processes (PSS sums to the footprint).\n"
                printf "Minor faults per 1,000 pairs in the second table.\n\n"
                md_table("| mode |", "|---|", "---|", mem, morder, nm)
                printf "\n"
                md_table("| mode |", "|---|", "--:|", flt, morder, nm)
            }
            detail("Work that crosses workers or goes to the kernel: CPU ns per pair (of it system)",
                "User plus system time. Workers that wait for each other (pingpong, prodcons) spin, then\n" \
                "sched_yield, so their CPU time includes the waiting; large waits for nothing.",
                "pingpong prodcons large", cpu)
            detail("Voluntary context switches per 1,000 pairs",
                "Waits that blocked: on these workloads a futex wait on a contended lock (or on the mmap\n" \
                "lock in a fault); a sched_yield is not one. No syscall is counted by name.",
                "pingpong prodcons large", vcsw)
            detail("large: minor faults per pair",
                "A pair is one block of 5-120 MiB with every 4 KiB page written: an allocator that gave the\n" \
                "last block back to the kernel faults the next one in page by page (huge pages fault less).",
                "large", fpp)
            detail("thrash: worker 0'"'"'s blocks within 64 / 128 B of another worker'"'"'s",
                "Of its blocks (PB_THRASH_OBJECTS, poolbench.h), counted from their addresses after the\n" \
                "workers allocated them in turn: neighbours on one cache line or on the prefetcher'"'"'s pair\n" \
                "of lines, whose writes fight.\n" \
                "Under -P only the pool has a count (a private heap'"'"'s addresses are its process'"'"'s own).",
                "thrash", near)
        }' "$csv"
    } >"$md"
    echo "poolbench-all.sh: $csv and $md written in ${elapsed} s" >&2
fi

# ------------------------------------------------------------------------
# The region table: every arm cut into the same requests.
# ------------------------------------------------------------------------
# WORKLOAD:MODE cells: 16 B with one worker, 64 B with workers <= and >
# cores as threads and as processes, small and large random sizes, heavy.
region_cells="fixed16:-T1 fixed64:-T2 fixed64:-P2 fixed64:-T4 fixed64:-P4 random256:-T1
random8k:-T1 random8k:-P2 heavy:-T1 heavy:-P2"
started=$(date +%s)
rm -f "$tmp/header"
for cell in $region_cells; do
    w=${cell%%:*}
    mode=${cell#*:}
    flag=${mode%?}
    n=${mode#??}
    cut=
    [ "$w" = heavy ] || cut="--request $request"
    echo "poolbench-all.sh: regions: $w $flag $n" >&2
    one "$tmp/rrows" "" -- "$bench" --workload "$w" "$flag" "$n" $cut \
        --allocator region,pool,malloc --label glibc
    one "$tmp/rrows" region=region-64k -- "$bench" --workload "$w" "$flag" "$n" $cut \
        --allocator region --region-block 65536
    if [ "$flag" = -T ]; then
        one "$tmp/rrows" region=region/pool LD_PRELOAD="$pool_so" SHMPOOL_MODE=process -- \
            "$bench" --workload "$w" "$flag" "$n" $cut --allocator region,malloc \
            --label pool-preload
    fi
    for peer in jemalloc tcmalloc mimalloc; do
        eval "so=\$$peer"
        one "$tmp/rrows" "" LD_PRELOAD="$so" -- "$bench" --workload "$w" "$flag" "$n" $cut \
            --allocator malloc --label "$peer"
    done
done
cat "$tmp/header" "$tmp/rrows" >"$rcsv"
elapsed=$(( $(date +%s) - started ))
{
    echo "# poolbench: per-request regions against the allocators"
    echo
    echo "Generated by \`bench/poolbench/poolbench-all.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC') in ${elapsed} s."
    echo
    machine
    echo
    echo "Every arm runs the same requests: \`NAME/rN\` is NAME cut into requests of N"
    echo "allocations (N blocks allocated, then all freed in allocation order; a region"
    echo "frees nothing and is reset), heavy is one \`/heavy\` request of 95 blocks freed"
    echo "in the handler's order.  Each worker has its own region, which keeps up to 64 KiB"
    echo "of blocks across requests and frees the rest, and larger chunks, at every reset.  region: 4 KiB blocks"
    echo "from glibc, run interleaved with pool and glibc; region-64k: 64 KiB blocks from"
    echo "glibc; region/pool: 4 KiB blocks from the pool (libshmpool.so preloaded, -T only)."
    echo "pool is poolbench calling the pool directly, pool-preload the pool as malloc."
    echo "Each cell: $runs timed runs after a warm-up, median of the runs, pairs per run"
    echo "each workload's default times $scale; a pair is one allocation and its share of"
    echo "the frees or of the reset.  Absolute figures from a shared 2-core VM are not"
    echo "production figures: compare ratios, above all those measured in the same runs"
    echo "(region, pool and glibc)."
    echo
    awk -F, "$md_table"'
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    {
        row = $col["workload"] " | " $col["mode"]; a = $col["allocator"]
        if (!(row in seen)) { seen[row] = 1; order[++nrow] = row }
        aseen[a] = 1
        v = $col["median_ns"]
        cell[row, a] = v == "" ? "n/a" : v
        flt[row, a] = $col["faults_per_kpair"]
        if (v != "" && (!(row in best) || v + 0 < best[row] + 0)) { best[row] = v; bestname[row] = a }
    }
    function ratio(row, x, y) {
        if (!((row, x) in cell) || !((row, y) in cell) || cell[row, y] + 0 <= 0) return ""
        return sprintf("%.3f", cell[row, x] / cell[row, y])
    }
    END {
        n = split("region region-64k region/pool pool pool-preload glibc jemalloc tcmalloc mimalloc", all, " ")
        k = 0
        for (i = 1; i <= n; i++) if (all[i] in aseen) names[++k] = all[i]
        printf "## ns per allocation and its free (median)\n\n| workload | mode |"
        for (i = 1; i <= k; i++) printf " %s |", names[i]
        printf " region ÷ glibc | region ÷ pool | pool ÷ glibc | fastest |\n|---|---|"
        for (i = 1; i <= k + 4; i++) printf "--:|"
        printf "\n"
        for (r = 1; r <= nrow; r++) {
            row = order[r]
            printf "| %s |", row
            for (i = 1; i <= k; i++) printf " %s |", ((row, names[i]) in cell) ? cell[row, names[i]] : ""
            printf " %s | %s | %s | %s |\n", ratio(row, "region", "glibc"), ratio(row, "region", "pool"),
                ratio(row, "pool", "glibc"), bestname[row]
        }
        printf "\n## Minor page faults per 1,000 allocations (median)\n\n"
        printf "What a region frees at a reset (chunks over a block, blocks over its 64 KiB keep) goes\n"
        printf "back to malloc; where malloc gives it back to the kernel, the next request faults it in again.\n\n"
        md_table("| workload | mode |", "|---|---|", "--:|", flt, order, nrow)
    }' "$rcsv"
} >"$rmd"
echo "poolbench-all.sh: $rcsv and $rmd written in ${elapsed} s" >&2
