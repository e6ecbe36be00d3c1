#!/bin/bash
# The kill-soak campaign whose outputs are beside it (OUT/random.txt and
# OUT/t-POINT:1.txt, renamed kill-soak-random.txt and kill-soak-POINT.txt): a
# random phase, then targeted phases for the points too rare for a probability.
B=${B:?set B to a build configured with --enable-debug}
out=${OUT:?set OUT to a directory for the outputs}
mkdir -p "$out"
cd "$(dirname "$0")/../../../.."
run() { name=$1; shift; echo "== $name: bench/kill-soak -b $B $*" | tee "$out/$name.txt"; \
  ( time SHMPOOL_TCACHE=16K,8 bench/kill-soak -b "$B" "$@" ) >>"$out/$name.txt" 2>&1; echo "rc=$?" >>"$out/$name.txt"; }
run random -r 0.00002 -k 10000 -w 2 -c 8 -t 1800
for p in reap.found:1 reap.object:1 reap.transit:1 reap.slot:1 recover.undo:1 recover.rebuild:1 \
         journal.reap:1 journal.page-return:1 pageheap.merge_left:1 pageheap.merge_right:1 pageheap.release:1; do
  run "t-$p" -r "0.00002,$p" -k 300 -w 2 -c 8 -t 300
done
