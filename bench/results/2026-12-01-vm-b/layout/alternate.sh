#!/bin/bash
# alternate.sh OUT ROUNDS BEFORE AFTER: the pool arm of every workload at
# -P 1/2/4 and -T 2/4, BEFORE and AFTER (two poolbench binaries) in turn,
# 5 runs each, ROUNDS times; then the median of the rounds' medians.
out=$1; rounds=$2; A=$3; B=$4
: > "$out"
for r in $(seq "$rounds"); do for mode in "-P 1" "-P 2" "-P 4" "-T 2" "-T 4"; do for arm in A B; do
  bin=${!arm}
  $bin --allocator pool $mode --runs 5 2>/dev/null |
    awk -v arm=$arm -v mode="$mode" '/^  [a-z]/{print arm, mode, $1, $2, $4}' >> "$out"
done; done; done
python3 "$(dirname "$0")/alternate-table.py" "$out"
