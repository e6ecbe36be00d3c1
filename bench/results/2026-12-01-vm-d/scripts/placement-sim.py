# placement-sim.py: large's request streams under -T 2 (workers 0 and 1:
# the same 5-120 MiB sizes from poolbench's generator, a warm-up of one
# pair, then five runs of ten) through a model of the page heap's long
# requests: best fit among free spans, else extend the free span on top,
# else carve; a freed block coalesces with free neighbours.  Each thread
# holds one block for a time that grows with its size and, much more, with
# the fresh pages it touches.  For 60 random interleavings per setting it
# prints the heap's growth (MB of pages touched for the first time) inside
# the timed runs, and how often runs 3-5 grew nothing, for two placements
# of a block in the span it takes: at the bottom ("bottom", the page heap
# before 03e528e) and at the top end when the span is the top free span
# and does not start the heap ("top-end", 03e528e).
import heapq, itertools, random

M = (1 << 64) - 1

def sizes(worker, n=10):
    s = ((0x9e3779b97f4a7c15 * (worker + 1)) & M) ^ 0x5eed
    out = []
    for _ in range(n):
        x = s
        x ^= x >> 12
        x ^= (x << 25) & M
        x ^= x >> 27
        s = x
        r = (x * 2685821657736338717) & M
        out.append(((5 << 20) + r % ((115 << 20) + 1) + 8191) // 8192)
    return out

class Heap:
    def __init__(self, top_end):
        self.free, self.carved, self.mapped, self.top_end = [], 0, 0, top_end

    def alloc(self, n):
        fits = [f for f in self.free if f[1] >= n]
        if fits:
            f = min(fits, key=lambda f: (f[1], f[0]))
            self.free.remove(f)
            if self.top_end and f[0] + f[1] == self.carved and f[0] != 0:
                if f[1] > n:
                    self.free.append([f[0], f[1] - n])
                return f[0] + f[1] - n
            if f[1] > n:
                self.free.append([f[0] + n, f[1] - n])
            return f[0]
        top = [f for f in self.free if f[0] + f[1] == self.carved]
        start = top[0][0] if top else self.carved
        if top:
            self.free.remove(top[0])
        self.carved = start + n
        return start

    def release(self, start, n):
        span = [start, n]
        for f in list(self.free):
            if f[0] + f[1] == span[0]:
                self.free.remove(f)
                span = [f[0], f[1] + span[1]]
        for f in list(self.free):
            if span[0] + span[1] == f[0]:
                self.free.remove(f)
                span = [span[0], span[1] + f[1]]
        self.free.append(span)

def cell(top_end, seed, fresh_cost, jitter):
    h, rnd = Heap(top_end), random.Random(seed)
    streams = [sizes(0), sizes(1)]
    growth = []
    for run in range(6):
        pairs = 1 if run == 0 else 10
        done, live, mapped0 = [0, 0], [None, None], h.mapped
        q = [(rnd.random() * jitter, w, 'alloc') for w in (0, 1)]
        heapq.heapify(q)
        while q:
            t, w, what = heapq.heappop(q)
            if what == 'alloc':
                if done[w] >= pairs:
                    continue
                n = streams[w][done[w]]
                start = h.alloc(n)
                fresh = max(0, start + n - max(start, h.mapped))
                h.mapped = max(h.mapped, start + n)
                live[w] = (start, n)
                heapq.heappush(q, (t + (20 * n + 2 * fresh_cost * fresh) * rnd.uniform(0.5, 1.5), w, 'free'))
            else:
                h.release(*live[w])
                done[w] += 1
                heapq.heappush(q, (t + rnd.uniform(0, jitter / 10), w, 'alloc'))
        growth.append((h.mapped - mapped0) * 8192 >> 20)
    return growth

for fresh_cost, jitter in itertools.product([500, 2500, 10000], [1e3, 50e3, 500e3]):
    line = []
    for name, top_end in (('bottom', False), ('top-end', True)):
        cells = [cell(top_end, seed, fresh_cost, jitter) for seed in range(60)]
        grown = sum(sum(c[1:]) for c in cells) / len(cells)
        clean = sum(1 for c in cells for g in c[3:] if g == 0) / (3 * len(cells))
        line.append('%s: %3.0f MB in runs 1-5, runs 3-5 clean %3.0f%%' % (name, grown, 100 * clean))
    print('fresh page cost %5d, start jitter %6.0f | %s' % (fresh_cost, jitter, ' | '.join(line)))
