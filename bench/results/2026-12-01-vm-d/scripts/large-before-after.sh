#!/bin/sh
# large-before-after.sh ROUNDS BEFORE AFTER "MODE ...": large's pool arm of
# two poolbench binaries and tcmalloc (preloaded into AFTER's malloc arm)
# in turn, ROUNDS times per mode (e.g. "-T 2 -T 4" as "T2 T4").  Each line:
# the median of the 5 runs (what poolbench-all reports), the sum over the
# 5 runs of the workers' mean (what the cell costs in all), the minor
# faults of every run and worker, and each run's mean in us.
rounds=$1; before=$2; after=$3; modes=$4
tc=$(dpkg -L libtcmalloc-minimal4 | grep 'libtcmalloc_minimal\.so\.4$' | head -n 1)
for m in $modes; do
    flag=-$(echo "$m" | cut -c1); n=$(echo "$m" | cut -c2-)
    for r in $(seq "$rounds"); do
        for arm in before after tcmalloc; do
            case $arm in
            before) out=$("$before" --workload large --allocator pool "$flag" "$n" --runs 5 --per-run 2>&1) ;;
            after) out=$("$after" --workload large --allocator pool "$flag" "$n" --runs 5 --per-run 2>&1) ;;
            tcmalloc) out=$(LD_PRELOAD=$tc "$after" --workload large --allocator malloc "$flag" "$n" --runs 5 --per-run 2>&1) ;;
            esac
            echo "$out" | awk -v arm=$arm -v m=$m -v r=$r '
                $1 == "large" { med = $4 }
                / run [0-9]/ {
                    n = 0; s = 0
                    for (k = 4; k <= NF && $k != "faults"; k++) { s += $k; n++ }
                    t += s / n; runs = runs sprintf(" %.0f", s / n / 1000)
                    for (j = k + 1; j <= NF; j++) f += $j
                }
                END { printf "%s round %d %-8s median %7.0f us  sum %6.2f ms  faults %7d  runs (us):%s\n",
                      m, r, arm, med / 1000, t / 1e6, f, runs }'
        done
    done
done
