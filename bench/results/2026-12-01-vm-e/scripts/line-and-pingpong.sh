#!/bin/bash
# line-and-pingpong.sh ROUNDS BUILD: per round, a cache line's round trip
# between CPUs 0 and 1 (../2026-12-01-vm-d/scripts/line-round-trip.c, a
# million times), pingpong -P 2 on the pool and -T 2 on tcmalloc, and the
# round trip again.  Run with the harness of fd734d7 (before eb70af3).
here=$(cd "$(dirname "$0")" && pwd)
cc -O2 -pthread -o /tmp/lrt "$here/../../2026-12-01-vm-d/scripts/line-round-trip.c" || exit 1
PB=$2/bench/poolbench
TC=$(dpkg -L libtcmalloc-minimal4 | grep '/libtcmalloc_minimal.so.4$' | head -n 1)
for i in $(seq "$1"); do
  a=$(/tmp/lrt | awk '{print $3}')
  p=$($PB --workload pingpong --allocator pool -P 2 --runs 5 | awk '$1=="pingpong"{print $4}')
  t=$(LD_PRELOAD=$TC $PB --workload pingpong --allocator malloc -T 2 --runs 5 | awk '$1=="pingpong"{print $4}')
  b=$(/tmp/lrt | awk '{print $3}')
  echo "$i lrt $a $b poolP2 $p tcT2 $t"
done
