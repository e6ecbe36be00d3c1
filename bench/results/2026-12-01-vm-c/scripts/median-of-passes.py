import sys,statistics,re
files=sys.argv[1:]
tabs=[]
for f in files:
    t={}
    sec=None
    for l in open(f):
        if l.startswith('## '): sec=l.strip()
        if sec!='## ns per malloc+free pair (median)' or not l.startswith('| ') or l.startswith('| workload') or l.startswith('|--'): continue
        c=[x.strip() for x in l.strip().strip('|').split('|')]
        t[(c[0],c[1])]=c[2:9]
    tabs.append(t)
cols=['pool','pool-spin','pool-preload','glibc','jemalloc','tcmalloc','mimalloc']
def num(x):
    try: return float(x)
    except: return None
print("| workload | mode | pool (3 passes) | glibc | best peer | pool ÷ glibc | pool ÷ best |")
print("|---|---|--:|--:|--:|--:|--:|")
for k in tabs[0]:
    vals=[[num(t[k][i]) if k in t else None for t in tabs] for i in range(7)]
    med=[statistics.median([v for v in vs if v is not None]) if any(v is not None for v in vs) else None for vs in vals]
    if med[0] is None: continue
    pool=med[0]
    peers={cols[i]:med[i] for i in (4,5,6) if med[i] is not None}
    # pingpong/prodcons under -P: peers from -T same N
    if not peers and k[1].startswith('P'):
        kt=(k[0],'T'+k[1][1:])
        if kt in tabs[0]:
            for i in (4,5,6):
                vs=[num(t[kt][i]) for t in tabs if kt in t and num(t[kt][i]) is not None]
                if vs: peers[cols[i]+'(T)']=statistics.median(vs)
    g=med[3]
    if g is None and k[1].startswith('P'):
        kt=(k[0],'T'+k[1][1:]); vs=[num(t[kt][3]) for t in tabs if kt in t and num(t[kt][3]) is not None]
        g=statistics.median(vs) if vs else None
    best=min(peers.items(), key=lambda x:x[1]) if peers else None
    rng="%.4g (%.4g-%.4g)"%(pool,min(v for v in vals[0] if v is not None),max(v for v in vals[0] if v is not None))
    print("| %s | %s | %s | %s | %s | %s | %s |"%(k[0],k[1],rng, "%.4g"%g if g else "", "%.4g %s"%(best[1],best[0]) if best else "", "%.3f"%(pool/g) if g else "", "%.3f"%(pool/best[1]) if best else ""))
