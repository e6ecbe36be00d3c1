# layout-probe.py TREE: patch TREE/bench/pb-workloads.c so that batch
# records, at the end of each malloc phase, the cache line of every object
# of workers 0 and 1 and, at exit, prints how many pairs of their objects
# share a 64-byte line and how many share a 4 KiB page (their last
# round's).  For a probe build only (configure --enable-pool in TREE, then
# make bench/poolbench); the recording costs time inside the timed phase.
import sys
p = sys.argv[1] + '/bench/pb-workloads.c'
s = open(p).read()
old = """        int64_t t1 = pb_now_ns();
        for (unsigned i = 0; i < n; i++)
            ops->release(v[i]);"""
assert old in s
s = s.replace(old, """        int64_t t1 = pb_now_ns();
        probe_record(c->worker, v, n);
        for (unsigned i = 0; i < n; i++)
            ops->release(v[i]);""")
helper = r'''
#include <stdio.h>
static uintptr_t probe_lines[2][10000];
static unsigned probe_n[2];
static void probe_report(void)
{
    unsigned long lines = 0, pages = 0;
    for (unsigned a = 0; a < probe_n[0]; a++)
        for (unsigned b = 0; b < probe_n[1]; b++) {
            lines += probe_lines[0][a] == probe_lines[1][b];
            pages += probe_lines[0][a] >> 6 == probe_lines[1][b] >> 6;
        }
    fprintf(stderr, "probe: objects %u %u, pairs sharing a line %lu, a 4 KiB page %lu\n",
            probe_n[0], probe_n[1], lines, pages);
}
static void probe_record(unsigned w, void **v, unsigned n)
{
    static int registered;
    if (w > 1 || n != 10000)
        return;
    if (!registered) {
        registered = 1;
        atexit(probe_report);
    }
    for (unsigned i = 0; i < n; i++)
        probe_lines[w][i] = (uintptr_t)v[i] >> 6;
    probe_n[w] = n;
}
'''
i = s.index('#define BATCH_BLOCKS')
s = s[:i] + helper + s[i:]
open(p, 'w').write(s)
