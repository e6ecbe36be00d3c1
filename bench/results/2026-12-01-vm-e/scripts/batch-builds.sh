#!/bin/sh
# batch-builds.sh ROUNDS BUILD...: batch at -T 2, each build in turn per
# round: its free phase and (from a second invocation) the whole, ns a
# pair; then $LINETRIP (default: the first build's bench/linetrip).
r=1
while [ "$r" -le "$1" ]; do
    line="$r"
    for b in $(echo "$@" | cut -d' ' -f2-); do
        f=$("$b/bench/poolbench" --workload batch --allocator pool -T 2 --runs 5 | awk '$1=="batch" && $2=="free" {print $4}')
        a=$("$b/bench/poolbench" --workload batch --allocator pool -T 2 --runs 5 | awk '$1=="batch" && $2=="all" {print $4}')
        line="$line $f/$a"
    done
    echo "$line $("${LINETRIP:-$2/bench/linetrip}" | cut -d' ' -f1)"
    r=$((r + 1))
done
