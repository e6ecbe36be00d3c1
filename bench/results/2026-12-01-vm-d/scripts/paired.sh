#!/bin/bash
# paired.sh ROUNDS WORKLOAD MODE PHASE BASE HEAD: per round, BASE then HEAD
# (order alternating), the ratio HEAD/BASE of PHASE's median; then the
# median ratio and its quartiles.  PFX: a command to run each under (such
# as one-cpu.sh).
rounds=$1; w=$2; m=$3; ph=$4; A=$5; B=$6
for i in $(seq $rounds); do
  if [ $((i % 2)) = 1 ]; then order="A B"; else order="B A"; fi
  for arm in $order; do bin=${!arm}
    v=$($PFX $bin --workload $w --allocator pool $m --runs 5 2>&1 | awk -v ph=$ph '$1=="'$w'" && $2==ph {print $4}')
    eval "v$arm=$v"
  done
  echo "$i $vA $vB"
done | python3 -c '
import sys, statistics as st
rows=[l.split() for l in sys.stdin]
a=[float(r[1]) for r in rows]; b=[float(r[2]) for r in rows]
q=sorted(y/x for x,y in zip(a,b))
for r in rows: print(" ".join(r))
n=len(q)
print("base median %.2f (%.2f-%.2f), head median %.2f (%.2f-%.2f)"%(st.median(a),min(a),max(a),st.median(b),min(b),max(b)))
print("head/base per round: median %.3f, quartiles %.3f-%.3f, range %.3f-%.3f, %d of %d rounds above 1"%(st.median(q),q[n//4],q[(3*n)//4],q[0],q[-1],sum(1 for x in q if x>1),n))
'
