#!/bin/sh
# batch-delay.sh HEAD_TREE BASE_TREE: batch at -T 2, phase by phase, in 12
# rounds of bench/rounds.sh for each worker-1 delay, the probe builds of
# scripts/phase-probe.py (TREE/rel, with bench/linetrip copied in).
for d in 0 150000 300000; do
    echo "### PROBE_DELAY_NS=$d"
    PROBE_DELAY_NS=$d sh "$(dirname "$0")/../../../rounds.sh" -b "$1/rel" --before "$2/rel" \
        --rounds 12 --peers mimalloc batch:T2:all batch:T2:malloc batch:T2:free 2>/dev/null
done
