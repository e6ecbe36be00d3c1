import sys,glob,collections
d=sys.argv[1]
files=sorted(glob.glob(d+'/x.*'))
bypid=collections.defaultdict(list)
for f in files:
    p=f.split('.')[-2]; bypid[p].append(f)
pids=sorted(bypid)
sets=[]
for p in pids:
    fs=sorted(bypid[p], key=lambda f:int(f.split('.')[-1]))
    sets.append([int(x,16) for x in open(fs[-1])])
out=[]
for g in (64,128,4096,8192,16384,65536):
    a=set(x//g for x in sets[0]); b=set(x//g for x in sets[1])
    out.append("%d:%d/%d"%(g,len(a&b),len(a)))
print(' '.join(out), "range0 %x-%x range1 %x-%x"%(min(sets[0]),max(sets[0]),min(sets[1]),max(sets[1])))
