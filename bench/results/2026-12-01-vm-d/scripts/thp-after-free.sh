#!/bin/sh
# thp-after-free.sh BUILD: what a fresh huge page of shared memory costs
# right after another process freed some 600 MB (glibc's arm of large at
# -T 2), against the same a second time and with nothing freed before.
# Three rounds.  The guest's virtio_balloon reports free 2 MiB blocks to
# the host (page_reporting_order 9), which may then drop their backing.
b=$1; here=$(dirname "$0")
cc -O2 -o /tmp/first-touch "$here/first-touch.c" || exit 1
echo "page_reporting_order: $(cat /sys/module/page_reporting/parameters/page_reporting_order 2>/dev/null || echo none)"
for r in 1 2 3; do
    echo "round $r: nothing freed before"; /tmp/first-touch
    "$b/bench/poolbench" --workload large --allocator malloc -T 2 --runs 5 >/dev/null 2>&1
    echo "round $r: after glibc's large -T 2"; /tmp/first-touch
    echo "round $r: again"; /tmp/first-touch
done
