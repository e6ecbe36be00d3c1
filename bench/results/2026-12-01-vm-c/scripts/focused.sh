#!/bin/bash
# focused.sh OUT ROUNDS "WORKLOAD:MODE ..." BEFORE AFTER: the pool arm of the
# named cells (MODE as P4 or T2) of two poolbench binaries in turn, ROUNDS
# times, 5 runs each; then the median of the rounds' medians (arm A is
# BEFORE, arm B is AFTER).
out=$1; rounds=$2; cells=$3; A=$4; B=$5
: > "$out"
for r in $(seq "$rounds"); do for c in $cells; do
  w=${c%%:*}; m=${c##*:}; mode="-${m:0:1} ${m:1}"
  for arm in A B; do
    bin=${!arm}
    $bin --workload "$w" --allocator pool $mode --runs 5 2>/dev/null |
      awk -v arm=$arm -v mode="$mode" '/^  [a-z]/{print arm, mode, $1, $2, $4}' >> "$out"
  done
done; done
python3 "$(dirname "$0")/../../2026-12-01-vm-b/layout/alternate-table.py" "$out"
