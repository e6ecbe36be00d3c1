#!/bin/bash
# against-base.sh OUT BASE AFTER: the pool arm of every workload at every
# mode (MODES, comma-separated, default all five; WL: the workloads), one
# workload per invocation, 3 rounds alternating the two poolbench binaries,
# 5 runs each.  against-base-table.py OUT NAME makes the table.
out=$1; B=$2; F=$3
: > "$out"
IFS=, read -ra MM <<< "${MODES:--P 1,-P 2,-P 4,-T 2,-T 4}"
for m in "${MM[@]}"; do
 for w in ${WL:-fixed16 fixed64 batch random256 random8k heavy pingpong prodcons frag large}; do
  case "$m:$w" in "-P 1:pingpong"|"-P 1:prodcons") continue;; esac
  for r in 1 2 3; do
   for b in base final; do
    p=$B; [ $b = final ] && p=$F
    $p $m --workload $w --allocator pool --runs 5 2>/dev/null | grep " pool " |
      awk -v b=$b -v m="$m" -v r=$r '{print m, b, r, $1, $2, $4}' >> "$out"
   done
  done
 done
done
