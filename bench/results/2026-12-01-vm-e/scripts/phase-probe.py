# phase-probe.py TREE: patch TREE/bench/pb-workloads.c (a probe build only:
# configure --enable-pool in TREE, then make bench/poolbench) so that batch
#  - notes when each of its batches' malloc and free phases begin and end,
#    in workers 0 and 1, and prints at exit, for each run, how long worker
#    0's phases took and what share of its free phase ran while worker 1
#    was freeing too (or allocating);
#  - with PROBE_DELAY_NS=N in the environment, has worker 1 spin N ns
#    before the timed part of each run, so that its phases run that far
#    behind worker 0's instead of starting with them.
# The notes are taken between the phases, outside their timing.
import sys
p = sys.argv[1] + '/bench/pb-workloads.c'
s = open(p).read()

start = """    void **v = c->scratch;
    c->phase_ns[0] = c->phase_ns[1] = 0;
    c->t_begin = pb_now_ns();"""
assert start in s
s = s.replace(start, """    void **v = c->scratch;
    c->phase_ns[0] = c->phase_ns[1] = 0;
    if (c->worker == 1 && getenv("PROBE_DELAY_NS") != NULL) {
        int64_t until = pb_now_ns() + atol(getenv("PROBE_DELAY_NS"));
        while (pb_now_ns() < until)
            ;
    }
    c->t_begin = pb_now_ns();""")

end = """        int64_t t2 = pb_now_ns();
        c->phase_ns[0] += t1 - t0;"""
assert end in s
s = s.replace(end, """        int64_t t2 = pb_now_ns();
        probe_note(c, t0, t1, t2);
        c->phase_ns[0] += t1 - t0;""")

helper = r'''
#include <stdio.h>
#include <stdlib.h>
/* [worker][run (seq)][batch]: the malloc phase's start, the free phase's
 * start, the free phase's end. */
static int64_t probe_t[2][64][12][3];
static unsigned probe_b[2][64];
static double probe_overlap(unsigned seq, int ph0, int ph1)
{
    double ov = 0;
    for (unsigned i = 0; i < probe_b[0][seq] && i < 12; i++)
        for (unsigned j = 0; j < probe_b[1][seq] && j < 12; j++) {
            int64_t a = probe_t[0][seq][i][ph0], b = probe_t[0][seq][i][ph0 + 1];
            int64_t c = probe_t[1][seq][j][ph1], d = probe_t[1][seq][j][ph1 + 1];
            int64_t lo = a > c ? a : c, hi = b < d ? b : d;
            if (hi > lo)
                ov += (double)(hi - lo);
        }
    return ov;
}
static void probe_report(void)
{
    for (unsigned seq = 2; seq < 64; seq++) {
        if (probe_b[0][seq] == 0 || probe_b[1][seq] == 0)
            continue;
        double tot[2] = { 0, 0 };
        for (unsigned i = 0; i < probe_b[0][seq] && i < 12; i++)
            for (int ph = 0; ph < 2; ph++)
                tot[ph] += (double)(probe_t[0][seq][i][ph + 1] - probe_t[0][seq][i][ph]);
        fprintf(stderr, "probe run %u: worker 0's malloc %.0f us, free %.0f us; of its free, %.0f%% beside worker 1's free, %.0f%% beside its malloc\n",
                seq, tot[0] / 1e3, tot[1] / 1e3, 100 * probe_overlap(seq, 1, 1) / tot[1],
                100 * probe_overlap(seq, 1, 0) / tot[1]);
    }
}
static void probe_note(pb_ctx_t *c, int64_t t0, int64_t t1, int64_t t2)
{
    static int registered;
    if (c->worker > 1 || c->seq >= 64)
        return;
    if (!__atomic_exchange_n(&registered, 1, __ATOMIC_RELAXED))
        atexit(probe_report);
    unsigned b = probe_b[c->worker][c->seq]++;
    if (b >= 12)
        return;
    probe_t[c->worker][c->seq][b][0] = t0;
    probe_t[c->worker][c->seq][b][1] = t1;
    probe_t[c->worker][c->seq][b][2] = t2;
}
'''
i = s.index('#define BATCH_BLOCKS')
s = s[:i] + helper + s[i:]
open(p, 'w').write(s)
