#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# The cells whose figures move with the machine's state between one
# invocation and the next (pingpong, batch free, anything under -P 4 on two
# cores), measured in rounds: each round runs every arm once, one poolbench
# invocation each, in an order that turns by one arm every round, so a
# state that lasts a few seconds lands on every arm alike.  Then per arm the
# median of its rounds, and per round the pool's ratio to the best peer of
# that same round, and to the pool of another build (--before).  Before
# each invocation bench/probes/linetrip times a cache line's trip between CPUs 0
# and 1, which on a virtual machine moves with the host's placement of
# them, and with it every cross-worker cell.  thrash, whose cost is cache
# lines and so shows in time only, is measured here too, with per arm how
# many of worker 0's blocks poolbench found near another worker's.
set -eu

usage() {
    cat <<EOF
usage: rounds.sh [-b BUILDDIR] [--before BUILDDIR] [--rounds R] [--runs N]
                 [--peers "NAME ..."] [--per-round] CELL ...
  CELL is WORKLOAD:MODE[:PHASE], e.g. pingpong:P2 or batch:T2:free; MODE is
  P1, P2, P4, T1, T2 or T4; PHASE is all (the default), malloc or free.
  --before DIR   also the pool arm of the build in DIR, and pool ÷ before
  --rounds R     rounds (default 12)
  --runs N       timed runs per invocation, its median taken (default 5)
  --peers L      of glibc jemalloc tcmalloc mimalloc (default all four)
  --per-round    also every round's figures, with the line round trip
                 bench/probes/linetrip measured before each invocation
EOF
}

here=$(cd "$(dirname "$0")" && pwd)
build=.
before=
rounds=12
runs=5
peers="glibc jemalloc tcmalloc mimalloc"
per_round=
cells=
while [ $# -gt 0 ]; do
    case $1 in
    -b) [ $# -ge 2 ] || { usage >&2; exit 2; }; build=$2; shift 2 ;;
    --before) [ $# -ge 2 ] || { usage >&2; exit 2; }; before=$2; shift 2 ;;
    --rounds) [ $# -ge 2 ] || { usage >&2; exit 2; }; rounds=$2; shift 2 ;;
    --runs) [ $# -ge 2 ] || { usage >&2; exit 2; }; runs=$2; shift 2 ;;
    --peers) [ $# -ge 2 ] || { usage >&2; exit 2; }; peers=$2; shift 2 ;;
    --per-round) per_round=yes; shift ;;
    -h|--help) sed -n '2,/^set -/{/^#/{s/^# \{0,1\}//;p;};}' "$0"; echo; usage; exit 0 ;;
    -*) echo "rounds.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) cells="$cells $1"; shift ;;
    esac
done
case $rounds in ''|*[!0-9]*|0|1|2) echo "rounds.sh: --rounds takes a count from 3" >&2; exit 2 ;; esac
case $runs in ''|*[!0-9]*|0) echo "rounds.sh: --runs takes a count from 1" >&2; exit 2 ;; esac
[ -n "$cells" ] || { echo "rounds.sh: name at least one cell" >&2; usage >&2; exit 2; }

for b in "$build" ${before:+"$before"}; do
    if [ ! -x "$b/bench/poolbench/poolbench" ]; then
        echo "rounds.sh: $b/bench/poolbench/poolbench not found; run make there or pass -b" >&2
        exit 1
    fi
    if grep -q '^#define POOL_CONFIG_STATS 1' "$b/config.h" 2>/dev/null; then
        echo "rounds.sh: $b is a stats build; time a Release build" >&2
        exit 1
    fi
done
bench=$build/bench/poolbench/poolbench
linetrip=$build/bench/probes/linetrip
if [ ! -x "$linetrip" ]; then
    echo "rounds.sh: $linetrip not found; run make in $build" >&2
    exit 1
fi

. "$here/peers.sh"
arms="pool${before:+ before}"
for p in $peers; do
    case $p in
    glibc) ;;
    jemalloc|tcmalloc|mimalloc) so=$(peer_so "$p") || exit 1; eval "so_$p=\$so" ;;
    *) echo "rounds.sh: no peer named $p (glibc, jemalloc, tcmalloc, mimalloc)" >&2; exit 2 ;;
    esac
    arms="$arms $p"
done
[ -n "$peers" ] || { echo "rounds.sh: --peers names none" >&2; exit 2; }

known=$("$bench" --help | awk '/^workloads:/ { on = 1; next } on && NF { print $1 }')
for c in $cells; do
    IFS=: read -r w m ph extra <<EOF
$c
EOF
    case " $(echo $known) " in
    *" $w "*) ;;
    *) echo "rounds.sh: $c: no workload $w (poolbench --help lists: $(echo $known))" >&2; exit 2 ;;
    esac
    case $m in P1|P2|P4|T1|T2|T4) ;; *) echo "rounds.sh: $c: no mode ${m:-(none)}; P1, P2, P4, T1, T2 or T4" >&2; exit 2 ;; esac
    case ${ph:-all} in all|malloc|free) ;; *) echo "rounds.sh: $c: no phase $ph; all, malloc or free" >&2; exit 2 ;; esac
    [ -z "$extra" ] || { echo "rounds.sh: $c: WORKLOAD:MODE[:PHASE]" >&2; exit 2; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/values"

# mode_flag M: "-P 2" for P2.
mode_flag() { echo "-${1%?} ${1#?}"; }

# peer_mode W M: the mode the peers run: a block freed in another process
# than the one that allocated it is something only the pool can do, so for
# pingpong and prodcons under -P the peers' figure is their -T of as many
# workers (as in poolbench-all.sh's report).
peer_mode() {
    case $1:$2 in pingpong:P*|prodcons:P*) echo "T${2#P}" ;; *) echo "$2" ;; esac
}

# value ARM W M PH: one invocation's median for that arm, then thrash's
# near count as N64/N128 (or -); fails loudly.
value() {
    arm=$1 w=$2 m=$3 ph=$4
    case $arm in
    pool) set -- "$bench" --allocator pool $(mode_flag "$m") ;;
    before) set -- "$before/bench/poolbench/poolbench" --allocator pool $(mode_flag "$m") ;;
    glibc) set -- "$bench" --allocator malloc --label glibc $(mode_flag "$(peer_mode "$w" "$m")") ;;
    *) eval "so=\$so_$arm"
       set -- env LD_PRELOAD="$so" "$bench" --allocator malloc --label "$arm" \
           $(mode_flag "$(peer_mode "$w" "$m")") ;;
    esac
    if ! "$@" --workload "$w" --runs "$runs" >"$tmp/out" 2>"$tmp/err"; then
        echo "rounds.sh: failed: $* --workload $w --runs $runs" >&2
        cat "$tmp/err" >&2
        exit 1
    fi
    # The row after its workload, phase and arm: a figure, or why not.
    row=$(awk -v w="$w" -v ph="$ph" '$1 == w && $2 == ph { $1 = $2 = $3 = ""; sub(/^ +/, ""); print; exit }' "$tmp/out")
    near=$(echo "$row" | sed -n 's/.*near: \([0-9]*\) of .*, \([0-9]*\) within 128 B.*/\1\/\2/p')
    case $row in
    [0-9]*) echo "${row%% *} ${near:--}" ;;
    '') echo "rounds.sh: no $w $ph row from: $* --workload $w" >&2; exit 1 ;;
    *) echo "rounds.sh: $w $ph $row" >&2; exit 1 ;;
    esac
}

# rotated K ARM...: the arms, starting from the K-th (counting from 0).
rotated() {
    k=$1
    shift
    i=0 first= last=
    for a; do
        if [ "$i" -lt "$k" ]; then last="$last $a"; else first="$first $a"; fi
        i=$((i + 1))
    done
    echo $first $last
}

narms=$(echo $arms | wc -w)
r=1
while [ "$r" -le "$rounds" ]; do
    for c in $cells; do
        IFS=: read -r w m ph <<EOF
$c
EOF
        ph=${ph:-all}
        for a in $(rotated $(( (r - 1) % narms )) $arms); do
            lt=$("$linetrip") || exit 1
            v=$(value "$a" "$w" "$m" "$ph") || exit 1
            echo "$c $a $r ${v%% *} ${lt%% *} ${v#* }" >>"$tmp/values"
        done
    done
    echo "rounds.sh: round $r of $rounds done" >&2
    r=$((r + 1))
done

echo "# rounds.sh: $rounds rounds, each arm once a round in an order turned by one each round;"
echo "# one invocation: poolbench --runs $runs, its median in ns per malloc+free pair per worker (large: us);"
echo "# line: bench/probes/linetrip's round trip between CPUs 0 and 1 just before it, in ns.  A steady round is"
echo "# one whose invocations all saw a line trip within 1.25 times the round's shortest."
for c in $cells; do
    IFS=: read -r w m ph <<EOF
$c
EOF
    pm=$(peer_mode "$w" "$m")
    awk -v cell="$c" -v arms="$arms" -v peers="$peers" -v pm="$pm" -v m="$m" -v per_round="$per_round" '
    function sort(a, n,   i, j, t) {
        for (i = 2; i <= n; i++)
            for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    }
    function median(a, n) { return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
    # ratios q[1..n], sorted: median, quartiles (as the n/4-th and 3n/4-th
    # smallest), range, and how many rounds were above 1.
    function ratios(what, q, n,   i, above) {
        sort(q, n)
        above = 0
        for (i = 1; i <= n; i++) above += q[i] > 1
        printf "  %s, per round: median %.3f, quartiles %.3f-%.3f, range %.3f-%.3f, above 1 in %d of %d\n",
            what, median(q, n), q[int(n / 4) + 1], q[int(3 * n / 4) + 1], q[1], q[n], above, n
    }
    $1 == cell { v[$2, $3] = $4; lt[$2, $3] = $5; if ($6 != "-") near[$2] = $6; if ($3 > nr) nr = $3 }
    END {
        na = split(arms, arm, " ")
        np = split(peers, peer, " ")
        printf "\n%s%s\n", cell, pm != m ? " (the peers at " pm ")" : ""
        printf "  %-10s %10s  %s\n", "arm", "median", "(min-max) of the rounds"
        for (i = 1; i <= na; i++) {
            n = 0
            for (r = 1; r <= nr; r++) x[++n] = v[arm[i], r]
            sort(x, n)
            printf "  %-10s %10.2f  (%.2f-%.2f)\n", arm[i], median(x, n), x[1], x[n]
        }
        s = ""
        for (i = 1; i <= na; i++)
            if (arm[i] in near) s = s (s == "" ? " " : ", ") arm[i] " " near[arm[i]]
        if (s != "")
            printf "  worker 0'"'"'s blocks within 64 / 128 B of another worker'"'"'s:%s\n", s
        n = ns = nl = 0
        for (r = 1; r <= nr; r++) {
            best = ""
            lo = hi = lt["pool", r]
            for (i = 1; i <= na; i++) {
                y = lt[arm[i], r]
                if (y < lo) lo = y
                if (y > hi) hi = y
                l[++nl] = y
            }
            for (i = 1; i <= np; i++)
                if (best == "" || v[peer[i], r] < v[best, r]) best = peer[i]
            wins[best]++
            q[++n] = v["pool", r] / v[best, r]
            if (("before", r) in v) b[n] = v["pool", r] / v["before", r]
            steady[r] = hi <= 1.25 * lo
            if (steady[r]) {
                qs[++ns] = q[n]
                if (n in b) bs[ns] = b[n]
            }
            if (per_round != "") {
                if (r == 1) {
                    printf "  %5s %15s", "round", "line (min-max)"
                    for (i = 1; i <= na; i++) printf " %9s", arm[i]
                    printf " %12s\n", "pool / best"
                }
                printf "  %5d %6.1f-%-8.1f", r, lo, hi
                for (i = 1; i <= na; i++) printf " %9.2f", v[arm[i], r]
                printf " %12.3f%s\n", q[n], steady[r] ? "" : "  (not steady)"
            }
        }
        sort(l, nl)
        printf "  line round trip beside the invocations: median %.1f ns (%.1f-%.1f); %d of %d rounds steady\n",
            median(l, nl), l[1], l[nl], ns, nr
        s = ""
        for (i = 1; i <= np; i++)
            if (peer[i] in wins) s = s (s == "" ? " " : ", ") peer[i] " " wins[peer[i]]
        printf "  best peer of a round (rounds):%s\n", s
        ratios("pool / best peer of the round", q, n)
        if (ns > 0 && ns < n) ratios("the same, steady rounds only", qs, ns)
        if (1 in b) ratios("pool / before", b, n)
        if (1 in bs && ns < n) ratios("the same, steady rounds only", bs, ns)
    }' "$tmp/values"
done
