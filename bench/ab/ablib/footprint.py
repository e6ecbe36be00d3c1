# SPDX-License-Identifier: BSD-2-Clause
"""Memory footprint: the whole server's PSS, after each workload of the
timed pass, over time in the skewed-burst scenario, and in the scaling
series, the same scenario at several worker counts.

A server's footprint is the sum of Pss over its master and workers
(/proc/PID/smaps_rollup).  The kernel divides a page among the processes
that map it, so the sum counts the pool's shared arena once; a page that no
living process maps (one only a dead worker had touched) is in no one's Pss
and escapes it (bench/prefork/prefork --help has the experiment).

The skewed burst: W workers, each with a few keep-alive connections pinned
to it (SO_REUSEPORT spreads connections by their addresses, so the harness
opens connections until each worker has its share, asking `/` which worker
answered).  Worker 0 gets a burst of /heavy?n=K over its connections and
goes quiet; a period later worker 1 bursts, and so on; then everything is
quiet for the settle time.  Quiet is not silent unless asked: every worker
gets a trickle of plain /heavy throughout, the light load a server goes back
to, because an allocator whose decay runs only when it is called (jemalloc's
does) gives nothing back to a worker that is never entered.  A sampler
thread reads every process's Pss on a fixed grid of SAMPLE_S seconds, the
same for every arm, so that the arms' curves can be drawn against one time
axis.
"""

import dataclasses
import http.client
import json
import os
import statistics
import threading
import time

from .common import AbError, log, write_csv
from .servers import Server

# A sample of three processes' smaps_rollup takes 0.25 ms here, and a
# burst's peak lasts a few tens of milliseconds (glibc gives a request's
# memory back as it frees it), so sample often.
SAMPLE_S = 0.05

# Connections per worker in a burst: enough that the worker's output
# buffers hold several large responses at once, as a burst does.
BURST_CONNS = 4

# Seconds of quiet sampling before the first burst, with the connections open.
BASELINE_S = 2.0

# LazyFree is memory an allocator gave back with MADV_FREE: still resident,
# and in Pss, until the kernel needs it, so the report shows it apart.
ROLLUP_KEYS = {"Pss": "pss_kb", "Pss_Anon": "pss_anon_kb", "Pss_Shmem": "pss_shmem_kb",
               "Pss_File": "pss_file_kb", "LazyFree": "lazyfree_kb"}
PSS_FIELDS = list(ROLLUP_KEYS.values())
MEMORY_FIELDS = ["arm", "procs"] + PSS_FIELDS     # after the cell's coordinates
FOOTPRINT_FIELDS = ["arm", "sample", "t_s", "phase", "worker", "proc", "pid"] + PSS_FIELDS
# The scaling series' settled footprints: this many seconds after the last
# burst ended.
SETTLED_S = (5, 30)
SCALING_FIELDS = ["arm", "workers", "idle_kib", "peak_kib"] + [f"settled{q}_kib"
                                                                for q in SETTLED_S]
SCALING_SERIES_FIELDS = ["arm", "workers", "t_s", "phase", "pss_kb", "lazyfree_kb"]
BURST_FIELDS = ["arm", "workers", "scale", "requests", "conns", "period_s", "settle_s",
                "trickle_rps", "sample_s", "arena_used_kb", "arena_returned_kb"]


def rollup(pid):
    """One process's Pss figures, in kB."""
    out = dict.fromkeys(PSS_FIELDS, 0)
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            key = ROLLUP_KEYS.get(parts[0].rstrip(":"))
            if key:
                out[key] = int(parts[1])
    return out


def processes(server):
    """(name, pid) of every process of a server, the master first."""
    return [("master", server.master)] + [(f"w{i}", p) for i, p in enumerate(server.pids)]


def total(server):
    """The whole server's Pss figures, summed over its processes."""
    out = dict.fromkeys(PSS_FIELDS, 0)
    for _, pid in processes(server):
        for k, v in rollup(pid).items():
            out[k] += v
    return out


def memory_row(cell, arm, server):
    """memory.csv's row for one arm after a cell's load."""
    return dict(cell.key, arm=arm, procs=len(processes(server)), **total(server))


class Sampler(threading.Thread):
    """Samples every process of a server at t = k * SAMPLE_S from start (a
    grid point missed while the thread waited for the interpreter is
    skipped, not sampled late); `phase` and `worker` are set by the
    scenario and recorded with each sample."""

    def __init__(self, server, arm):
        super().__init__(daemon=True)
        self.server, self.arm = server, arm
        self.phase, self.worker = "baseline", ""
        self.rows, self.error = [], None
        self.done = threading.Event()
        self.t0 = time.monotonic()

    def run(self):
        k = 0
        try:
            while not self.done.is_set():
                phase, worker = self.phase, self.worker
                for name, pid in processes(self.server):
                    self.rows.append(dict(rollup(pid), arm=self.arm, sample=k,
                                          t_s=f"{k * SAMPLE_S:.2f}", phase=phase,
                                          worker=worker, proc=name, pid=pid))
                k = max(k + 1, int((time.monotonic() - self.t0) / SAMPLE_S) + 1)
                self.done.wait(max(0.0, self.t0 + k * SAMPLE_S - time.monotonic()))
        except OSError as e:   # a process vanished: the scenario reports it
            self.error = e

    def until(self, t):
        """Sleep until t seconds after the start."""
        time.sleep(max(0.0, self.t0 + t - time.monotonic()))


def get(conn, path):
    """One request on a keep-alive connection: (status, body)."""
    conn.request("GET", path)
    r = conn.getresponse()
    return r.status, r.read()


def pin_connections(server, workers, per_worker):
    """Keep-alive connections, per_worker to each worker: connect, ask `/`
    which worker accepted, keep it if that worker needs more."""
    pinned = {i: [] for i in range(workers)}
    for _ in range(50 * workers * per_worker):
        if all(len(c) == per_worker for c in pinned.values()):
            return pinned
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        try:
            status, body = get(conn, "/")
        except (OSError, http.client.HTTPException) as e:
            raise AbError(f"pinning connections: / failed: {e}") from None
        w = json.loads(body)["worker"] if status == 200 else None
        if w in pinned and len(pinned[w]) < per_worker:
            pinned[w].append(conn)
        else:
            conn.close()
    raise AbError(f"could not pin {per_worker} connections to each of {workers} workers")


def checked_get(conn, path, errors):
    """One request that must be answered 200; a failure is appended to
    errors (this runs in client threads) and returns False."""
    try:
        status, _ = get(conn, path)
    except (OSError, http.client.HTTPException) as e:
        errors.append(f"{path}: {e}")
        return False
    if status != 200:
        errors.append(f"{path} answered {status}")
    return status == 200


def burst(conns, path, n):
    """n requests for path spread over conns, one thread a connection, each
    waiting for its answer before it sends the next."""
    errors = []

    def one(conn, count):
        for _ in range(count):
            if not checked_get(conn, path, errors):
                return

    threads = [threading.Thread(target=one, args=(c, n // len(conns) + (i < n % len(conns))))
               for i, c in enumerate(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise AbError(f"burst failed: {errors[0]}")


class Trickle:
    """Plain /heavy at `rate` requests a second on one connection of each
    worker, until stopped."""

    def __init__(self, conns, rate):
        self.rate, self.errors = rate, []
        self.done = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(c,), daemon=True)
                        for c in conns]
        for t in self.threads:
            t.start()

    def run(self, conn):
        due = time.monotonic()
        while not self.done.is_set() and checked_get(conn, "/heavy", self.errors):
            due += 1 / self.rate
            self.done.wait(max(0.0, due - time.monotonic()))

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join()
        if self.errors:
            raise AbError(f"trickle failed: {self.errors[0]}")


def burst_plan_s(a, workers=None, settle=None):
    """Seconds one arm's scenario lasts, start-up and pinning aside: W
    workers (the burst pass's by default) and the quiet after them."""
    workers = a.burst_workers if workers is None else workers
    settle = a.burst_settle if settle is None else settle
    return BASELINE_S + workers * a.burst_period + settle


def scenario(a, arm, workers, settle, tmpdir, tag):
    """The skewed burst on one arm with `workers` workers, `settle` seconds
    of quiet after the last burst: the sampler's rows, and the pool's arena
    from /stats at the end ({} for another allocator)."""
    path = f"/heavy?n={a.burst_scale}"
    # Each arm's own -w, and connections that outlive the quiet periods.
    idle = str(min(3600, int(burst_plan_s(a, workers, settle)) + 60))
    arm = dataclasses.replace(arm, arm=arm.arm.derive(arm.name,
                                                      ["-w", str(workers), "--idle-timeout", idle]))
    s = Server(a, arm, tmpdir, tag)
    try:
        # One more connection per worker for the trickle, the last.
        pinned = pin_connections(s, workers, BURST_CONNS + bool(a.burst_trickle))
        trickle = (Trickle([c.pop() for c in pinned.values()], a.burst_trickle)
                   if a.burst_trickle else None)
        sampler = Sampler(s, arm.name)
        sampler.start()
        for w in range(workers):
            sampler.until(BASELINE_S + w * a.burst_period)
            sampler.phase, sampler.worker = "burst", w
            burst(pinned[w], path, a.burst_requests)
            sampler.phase = "quiet"
        # A last burst that overran its period still gets its full quiet.
        last = time.monotonic() - sampler.t0
        sampler.until(BASELINE_S + workers * a.burst_period)
        sampler.phase, sampler.worker = "settle", ""
        sampler.until(max(burst_plan_s(a, workers, settle), last + settle))
        sampler.done.set()
        sampler.join()
        if trickle:
            trickle.stop()
        if sampler.error:
            raise AbError(f"{tag}: sampling failed: {sampler.error}")
        for conns in pinned.values():
            for c in conns:
                c.close()
        arena = s.stats()["allocator"].get("arena", {})
    finally:
        s.stop()
    return sampler.rows, arena


def burst_pass(a, arms, tmpdir, out):
    """The skewed burst on every arm that runs on /heavy: footprint.csv (every
    sample of every process) and burst.csv (the scenario's settings per arm,
    and the pool's own view of its arena at the end)."""
    rows, summary = [], []
    for arm in arms.values():
        if not arm.arm.runs_on("heavy"):
            continue
        log(f"burst {arm.name}: {a.burst_workers} workers, {a.burst_requests} x "
            f"/heavy?n={a.burst_scale} each, every {a.burst_period} s, then "
            f"{a.burst_settle} s quiet")
        samples, arena = scenario(a, arm, a.burst_workers, a.burst_settle, tmpdir,
                                  f"burst-{arm.name}")
        rows += samples
        summary.append(dict(arm=arm.name, workers=a.burst_workers, scale=a.burst_scale,
                            requests=a.burst_requests, conns=BURST_CONNS,
                            period_s=a.burst_period, settle_s=a.burst_settle,
                            trickle_rps=a.burst_trickle, sample_s=SAMPLE_S,
                            arena_used_kb=arena["used"] // 1024 if arena else "",
                            arena_returned_kb=arena["returned"] // 1024 if arena else ""))
        f = figures(series(samples)[arm.name])
        log(f"burst {arm.name}: baseline {f['baseline'] / 1024:.1f} MiB, peak "
            f"{f['peak'] / 1024:.1f} MiB at {f['peak_t']:.2f} s, settled "
            f"{f['settled'] / 1024:.1f} MiB")
        write_csv(os.path.join(out, "footprint.csv"), rows, FOOTPRINT_FIELDS)
        write_csv(os.path.join(out, "burst.csv"), summary, BURST_FIELDS)


def scaling_arms(arms):
    """The scaling series compares allocators: the arms without flags of
    their own (the +region arms are a /heavy handler's choice, not one)."""
    return [arm for arm in arms.values() if arm.arm.plain]


def scaling_plan_s(a, n):
    """Seconds the scaling pass lasts with n arms, about 3 s a server for
    start-up, pinning and stop."""
    return sum(n * (burst_plan_s(a, w, SETTLED_S[-1]) + 3) for w in a.scale_workers)


def scaling_pass(a, arms, tmpdir, out):
    """The skewed burst at each of a.scale_workers worker counts on every
    allocator arm, one server at a time: scaling.csv (per arm and worker
    count the idle, peak and settled footprints) and scaling-series.csv (the
    whole server's samples, for a second look at a figure)."""
    rows, samples = [], []
    for workers in a.scale_workers:
        for arm in scaling_arms(arms):
            log(f"scaling {arm.name}: {workers} workers, {a.burst_requests} x "
                f"/heavy?n={a.burst_scale} each, every {a.burst_period} s, then "
                f"{SETTLED_S[-1]} s quiet")
            got, _ = scenario(a, arm, workers, SETTLED_S[-1], tmpdir,
                              f"scaling-{workers}-{arm.name}")
            points = series(got)[arm.name]
            f = figures(points)
            row = dict(arm=arm.name, workers=workers, idle_kib=round(f["baseline"]),
                       peak_kib=f["peak"])
            for q in SETTLED_S:
                row[f"settled{q}_kib"] = settled_after(points, workers, q)
            rows.append(row)
            samples += [dict(arm=arm.name, workers=workers, t_s=f"{p[0]:.2f}", phase=p[1],
                             pss_kb=p[3], lazyfree_kb=p[4]) for p in points]
            log(f"scaling {arm.name} at {workers}: idle {f['baseline'] / 1024:.1f} MiB, peak "
                f"{f['peak'] / 1024:.1f}, " + ", ".join(
                    f"{q} s after {row[f'settled{q}_kib'] / 1024:.1f}" for q in SETTLED_S))
            write_csv(os.path.join(out, "scaling.csv"), rows, SCALING_FIELDS)
            write_csv(os.path.join(out, "scaling-series.csv"), samples, SCALING_SERIES_FIELDS)


def series(rows):
    """Per arm, in the rows' order: the whole server's samples, each
    (t_s, phase, worker, Pss, LazyFree), kB summed over its processes."""
    acc = {}
    for r in rows:
        e = acc.setdefault((r["arm"], int(r["sample"])),
                           [float(r["t_s"]), r["phase"], str(r["worker"]), 0, 0])
        e[3] += int(r["pss_kb"])
        e[4] += int(r["lazyfree_kb"])
    out = {}
    for (arm, _), e in acc.items():
        out.setdefault(arm, []).append(tuple(e))
    return out


def figures(points):
    """What the report says of one arm's samples (kB): the median before
    the first burst, the peak and when, the last sample and its LazyFree,
    and per worker the last sample before the next burst (what that
    worker's burst left)."""
    base = [p[3] for p in points if p[1] == "baseline"]
    peak = max(points, key=lambda p: p[3])
    left = {}
    for _, phase, worker, kb, _ in points:
        if phase in ("burst", "quiet"):
            left[worker] = kb
    return dict(baseline=statistics.median(base) if base else float("nan"),
                peak=peak[3], peak_t=peak[0], settled=points[-1][3],
                settled_lazyfree=points[-1][4], left=left)


def settled_after(points, workers, q):
    """The whole server's Pss (kB) q seconds after the last burst ended: the
    last sample at most q seconds after the first one that followed it
    (the last worker's quiet, or the settle time if its burst overran)."""
    last = str(workers - 1)
    t0 = next(p[0] for p in points if p[1] == "settle" or (p[1] == "quiet" and p[2] == last))
    return [p[3] for p in points if p[0] <= t0 + q][-1]
