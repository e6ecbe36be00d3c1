# median-of-passes.py PASS.md ...: the median over passes of each cell of
# poolbench-all's "ns per malloc+free pair" table, pool ÷ glibc and pool ÷
# the best peer (jemalloc, tcmalloc, mimalloc); pingpong and prodcons
# under -P take glibc and the peers from their -T row.  With a pool-thp
# column, its median and ratio to the best peer too.  Columns are found
# by the table's header, so passes with and without pool-thp mix.
import sys, statistics
tabs = []
for f in sys.argv[1:]:
    t, sec, head = {}, None, None
    for l in open(f):
        if l.startswith('## '):
            sec = l.strip()
        if sec != '## ns per malloc+free pair (median)' or not l.startswith('| ') or l.startswith('|--'):
            continue
        c = [x.strip() for x in l.strip().strip('|').split('|')]
        if c[0] == 'workload':
            head = c
            continue
        t[(c[0], c[1])] = dict(zip(head[2:], c[2:]))
    tabs.append(t)

def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None

def med(k, col):
    vs = [num(t[k].get(col)) for t in tabs if k in t]
    vs = [v for v in vs if v is not None]
    return (statistics.median(vs), min(vs), max(vs)) if vs else None

peers = ('jemalloc', 'tcmalloc', 'mimalloc')
thp = any('pool-thp' in row for t in tabs for row in t.values())
print("| workload | mode | pool (median, range) | glibc | best peer | pool ÷ glibc | pool ÷ best |"
      + (" pool-thp | pool-thp ÷ best |" if thp else ""))
print("|---|---|--:|--:|--:|--:|--:|" + ("--:|--:|" if thp else ""))
for k in tabs[0]:
    pool = med(k, 'pool')
    if pool is None:
        continue
    ref = k
    if k[1].startswith('P') and all(med(k, p) is None for p in peers):
        ref = (k[0], 'T' + k[1][1:])
    best = min(((med(ref, p)[0], p + ('' if ref == k else ' ' + ref[1])) for p in peers
                if med(ref, p) is not None), default=None)
    g = med(ref, 'glibc')
    line = "| %s | %s | %.4g (%.4g-%.4g) | %s | %s | %s | %s |" % (
        k[0], k[1], pool[0], pool[1], pool[2], "%.4g" % g[0] if g else "",
        "%.4g %s" % best if best else "", "%.3f" % (pool[0] / g[0]) if g else "",
        "%.3f" % (pool[0] / best[0]) if best else "")
    if thp:
        h = med(k, 'pool-thp')
        line += " %s | %s |" % ("%.4g (%.4g-%.4g)" % h if h else "",
                                "%.3f" % (h[0] / best[0]) if h and best else "")
    print(line)
