import sys,statistics,collections
src,after_name=sys.argv[1],sys.argv[2]
d=collections.defaultdict(list)
for l in open(src):
    f=l.split()
    if len(f)!=7: continue
    m=f[0]+f[1]; b=f[2]; w=f[4]; ph=f[5]
    try: v=float(f[6])
    except: continue
    d[(w,ph,m,b)].append(v)
modes=['-P1','-P2','-P4','-T2','-T4']
rows=[('fixed16','all'),('fixed64','all'),('batch','all'),('batch','malloc'),('batch','free'),('random256','all'),('random8k','all'),('heavy','all'),('pingpong','all'),('prodcons','all'),('frag','all'),('large','all')]
print(f"""# poolbench: the pool before and after issue 16

The pool arm alone (`poolbench --allocator pool`, pool_malloc/pool_free called
directly), before = 140cc68 (the tree before issue 16's changes), after =
{after_name}, both Release builds of the same poolbench workloads.  For every mode
and workload: 3 rounds, each round one invocation of each build in turn
(`poolbench MODE --workload W --allocator pool --runs 5`); a cell is the
median of the three invocations' medians, ns per pair, before → after
(after ÷ before).  large is in µs per pair.  Run on 2026-12-01 right after
`poolbench-all.sh`, with nothing else running; the 2-core VM is shared, so a
ratio within 10 % of 1 whose rounds overlap is noise (the rounds are listed
below the table for the cells that moved).
""")
print("| workload | P1 | P2 | P4 | T2 | T4 |")
print("|---|---|---|---|---|---|")
moved=[]
for w,ph in rows:
    name=w if ph=='all' else f"{w} {ph}"
    cells=[]
    for m in modes:
        b=d.get((w,ph,m,'base')); a=d.get((w,ph,m,'final'))
        if not b or not a: cells.append('n/a'); continue
        mb,ma=statistics.median(b),statistics.median(a)
        sc=1000 if w=='large' else 1
        fmt=(lambda x: f"{x/sc:.0f}") if w=='large' else (lambda x: f"{x:.2f}")
        r=ma/mb
        cells.append(f"{fmt(mb)} → {fmt(ma)} ({r:.2f})" if w!='large' else f"{fmt(mb)} → {fmt(ma)} ({r:.3f})")
        if abs(r-1)>0.10 and w!='large':
            moved.append(f"- {name} {m[1:]}: {', '.join(fmt(x) for x in b)}; {', '.join(fmt(x) for x in a)}")
    print(f"| {name} | " + " | ".join(cells) + " |")
print("\nRounds (before; after) of the cells that moved by more than 10 %:\n")
print("\n".join(moved))
