import sys,collections,statistics
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    f=l.split()
    if len(f)!=6 or f[5]=="skipped:": continue
    arm,m1,m2,w,ph,v=f; d[(m1+m2,w,ph,arm)].append(float(v))
keys=sorted(set(k[:3] for k in d), key=lambda k:(k[0],k[1],k[2]))
for k in keys:
    a=d.get(k+('A',),[]); b=d.get(k+('B',),[])
    if not a or not b: continue
    ma,mb=statistics.median(a),statistics.median(b)
    print("%-4s %-10s %-6s before %10.2f (%s)  after %10.2f (%s)  ratio %.2f"%(k[0],k[1],k[2],ma,"%.2f-%.2f"%(min(a),max(a)),mb,"%.2f-%.2f"%(min(b),max(b)),mb/ma))
