# SPDX-License-Identifier: BSD-2-Clause
"""The passes: timed cells with their fixed counts (CPU time and faults per
request), instructions per request under callgrind, and the stats build's
allocator counters.  Each writes its CSV after every cell, so an
interrupted run keeps what it measured.  Each runs over the cells it is
given and writes its files under a prefix: the A/B's cells with none, the
contention ladder's (ladder.py) with "ladder-"; a CSV's first columns are
its cells' coordinates (cells.fields)."""

import os
import shutil
import tempfile

from .arms import Arm, Resolved, binary, region_stats
from .callgrind import callgrind_functions, callgrind_total, ir_split
from .cells import cpu_requests, fields
from .common import AbError, log, write_csv
from .footprint import MEMORY_FIELDS, memory_row
from .servers import Server, busy_share, cpu_jiffies, nreq, wrk

# Each file's own columns, after its cells' coordinates.
RUN_FIELDS = ["arm", "run", "rps", "requests", "p50_us", "p99_us",
              "p999_us", "mean_us", "non2xx", "socket_errors", "status", "valid",
              "cpu_us_per_req", "server_busy", "client_busy"]
CPU_FIELDS = ["arm", "sample", "requests", "served", "cpu_ticks",
              "cpu_us_per_req", "sched_us_per_req", "minflt", "minflt_per_req"]
IR_FIELDS = ["arm", "n1", "n2", "ir1", "ir2", "ir_per_req"]
FN_FIELDS = ["arm", "function", "file", "object", "ir_per_req"]
STATS_FIELDS = ["requests", "allocs", "allocs_per_req", "tcache_hit_rate",
                "central_fetches", "central_fetches_per_kreq", "lock_acquired", "lock_contended",
                "lock_wait_ns", "lock_held_ns", "pageheap_allocs", "pageheap_acquired",
                "pageheap_contended", "pageheap_held_ns", "big_allocs", "minflt", "minflt_per_req"]
CLASS_FIELDS = ["class", "size", "allocs", "allocs_per_req",
                "tcache_hits", "tcache_misses", "central_fetches", "central_fetched",
                "central_releases", "spans_in", "acquired", "acquired_per_req", "contended",
                "wait_ns", "held_ns", "held_ns_per_acq"]


def rotated(servers, k):
    """The arms of a cell for round k, each round starting one arm later:
    with a fixed order the first arm of every round took the machine's
    drift alone (pipeline c=1000 read 1.099 for A measured first, and
    1.022 with the order reversed)."""
    items = list(servers.items())
    shift = (k - 1) % len(items) if items else 0
    return items[shift:] + items[:shift]


def tag(cell, arm):
    """A server's name in its log file: the cell's coordinates and the arm
    (whose name may hold a slash)."""
    return "-".join(str(v) for v in cell.key.values()) + "-" + arm.replace("/", "_")


def timed_pass(a, cells, nreq_bin, tmpdir, out, warmup, duration, prefix=""):
    """Every cell: all arms cold, warm-up, runs interleaved (the order
    rotated each round), then the fixed counts likewise, then each arm's
    footprint."""
    runs, cpus, memory = [], [], []
    tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
    for cell in cells:
        workload, conc = cell.workload, cell.conc
        log(f"cell {cell}: {len(cell.arms)} arms, warm-up {warmup} s, "
            f"{a.runs} x {duration} s")
        servers = {}
        try:
            for arm in cell.arms:
                servers[arm.name] = Server(a, arm, tmpdir, tag(cell, arm.name))
            for arm, s in servers.items():
                wrk(a, s, workload, conc, warmup)
            for k in range(1, a.runs + 1):
                for arm, s in rotated(servers, k):
                    t0, _, _ = s.proc_sample()
                    sj0, cj0 = cpu_jiffies(a.server_cpus), cpu_jiffies(a.client_cpus)
                    r = wrk(a, s, workload, conc, duration)
                    sj1, cj1 = cpu_jiffies(a.server_cpus), cpu_jiffies(a.client_cpus)
                    t1, _, _ = s.proc_sample()
                    r.update(cell.key, arm=arm, run=k,
                             cpu_us_per_req=f"{(t1 - t0) * tick_us / r['requests']:.3f}"
                             if r["requests"] else "",
                             server_busy=busy_share(sj0, sj1),
                             client_busy=busy_share(cj0, cj1))
                    runs.append(r)
            # As many fixed counts as timed runs, interleaved arm by arm: a
            # single count per arm put /heavy c=1000 A at 27.3 us against
            # mimalloc's 23.3, and three interleaved pairs rerun by hand
            # gave 30.6/30.8, 19.8/20.0 and 20.2/20.1: the machine's
            # drift between two arms' counts, not the arms.
            n = cpu_requests(a, workload)
            for k in range(1, a.runs + 1):
                for arm, s in rotated(servers, k):
                    q0 = s.requests()
                    t0, ns0, f0 = s.proc_sample()
                    nreq(a, s, workload, conc, n, nreq_bin)
                    t1, ns1, f1 = s.proc_sample()
                    served = s.requests() - q0 - 1  # less the /stats call itself
                    cpus.append(dict(cell.key, arm=arm, sample=k,
                                     requests=n, served=served, cpu_ticks=t1 - t0,
                                     cpu_us_per_req=f"{(t1 - t0) * tick_us / n:.3f}",
                                     sched_us_per_req=f"{(ns1 - ns0) / 1e3 / n:.3f}",
                                     minflt=f1 - f0, minflt_per_req=f"{(f1 - f0) / n:.5f}"))
            memory += [memory_row(cell, arm, s) for arm, s in servers.items()]
        finally:
            for s in servers.values():
                s.stop()
        write_csv(os.path.join(out, prefix + "runs.csv"), runs, fields(cells, RUN_FIELDS))
        write_csv(os.path.join(out, prefix + "cpu.csv"), cpus, fields(cells, CPU_FIELDS))
        write_csv(os.path.join(out, prefix + "memory.csv"), memory,
                  fields(cells, MEMORY_FIELDS))


def ir_pass(a, cells, nreq_bin, tmpdir, out, requests, prefix=""):
    """Instructions per request of the workers, per arm and cell, at
    requests = (N1, N2) over the cell's connections (pipelined requests
    arrive in batches of the workload's depth, as in the timed runs).  A
    worker process's callgrind file holds all its threads: the sum over
    the worker processes is every worker's, threads or processes."""
    rows, fn_rows = [], []
    n1, n2 = requests
    for cell in cells:
        workload = cell.workload
        for arm in cell.arms:
            irs, fns = [], []
            for n in (n1, n2):
                cgdir = tempfile.mkdtemp(dir=tmpdir)
                s = Server(a, arm, tmpdir, f"ir-{tag(cell, arm.name)}-{n}",
                           valgrind_out=os.path.join(cgdir, "callgrind.out.%p"))
                try:
                    nreq(a, s, workload, cell.conc, n, nreq_bin)
                finally:
                    s.stop()
                files = [os.path.join(cgdir, f"callgrind.out.{pid}") for pid in s.pids]
                irs.append(sum(callgrind_total(f) for f in files))
                merged = {}
                for f in files:
                    for key, ir in callgrind_functions(f).items():
                        merged[key] = merged.get(key, 0) + ir
                fns.append(merged)
                shutil.rmtree(cgdir)
            # The same difference that gives the total, per function: what
            # each costs per request, start-up cancelled.
            arm_rows = []
            for key in sorted(set(fns[0]) | set(fns[1])):
                d = (fns[1].get(key, 0) - fns[0].get(key, 0)) / (n2 - n1)
                if abs(d) >= 0.5:
                    arm_rows.append(dict(cell.key, arm=arm.name, file=key[0], function=key[1],
                                         object=key[2], ir_per_req=f"{d:.1f}"))
            fn_rows += arm_rows
            rows.append(dict(cell.key, arm=arm.name, n1=n1, n2=n2, ir1=irs[0], ir2=irs[1],
                             ir_per_req=f"{(irs[1] - irs[0]) / (n2 - n1):.1f}"))
            alloc_ir = sum(ir_split(arm_rows)[0].values())
            log(f"instructions per request {cell} {arm.name}: {rows[-1]['ir_per_req']} "
                f"({alloc_ir:.1f} in the allocator)")
            write_csv(os.path.join(out, prefix + "ir.csv"), rows, fields(cells, IR_FIELDS))
            write_csv(os.path.join(out, prefix + "ir-functions.csv"), fn_rows,
                      fields(cells, FN_FIELDS))


def class_counters(st):
    """Per class: the counters of the allocator section, as plain numbers."""
    out = {}
    for c in st["allocator"].get("classes", []):
        out[c["class"]] = dict(size=c["size"], allocs=c["allocs"], tcache_hits=c["tcache_hits"],
                               tcache_misses=c["tcache_misses"],
                               central_fetches=c["central_fetches"],
                               central_fetched=c["central_fetched"],
                               central_releases=c["central_releases"], spans_in=c["spans_in"],
                               acquired=c["lock"]["acquired"], contended=c["lock"]["contended"],
                               wait_ns=c["lock"]["wait_ns"], held_ns=c["lock"]["held_ns"])
    big = sum(s["big_allocs"] for s in st["allocator"].get("slots", []))
    ph = st["allocator"]["pageheap"]
    return out, dict(big_allocs=big, pageheap_allocs=ph["allocs"],
                     pageheap_acquired=ph["lock"]["acquired"],
                     pageheap_contended=ph["lock"]["contended"],
                     pageheap_held_ns=ph["lock"]["held_ns"])


def counter_delta(s0, s1, s2):
    """(s2 - s1) - (s1 - s0): the load between two /stats calls, less what
    one /stats call itself costs (measured as two back-to-back calls)."""
    c0, g0 = class_counters(s0)
    c1, g1 = class_counters(s1)
    c2, g2 = class_counters(s2)
    classes = {}
    for cls in set(c0) | set(c1) | set(c2):
        ref = c2.get(cls) or c1.get(cls) or c0.get(cls)
        zero = {k: 0 for k in ref}
        x0, x1, x2 = c0.get(cls, zero), c1.get(cls, zero), c2.get(cls, zero)
        d = {k: max(0, (x2[k] - x1[k]) - (x1[k] - x0[k])) for k in ref if k != "size"}
        d["size"] = ref["size"]
        classes[cls] = d
    glob = {k: max(0, (g2[k] - g1[k]) - (g1[k] - g0[k])) for k in g0}
    return classes, glob


STATS_ARM = Arm("S", "S")


def stats_plan(a):
    """(row's coordinates, workload, arm) of the stats pass: the S build on
    every workload and concurrency, and /heavy once more with
    --request-region ("heavy+region") when a region arm runs, to count what
    the region still takes from the pool."""
    s = Resolved(STATS_ARM, binary(a, "S"))
    plan = [(w, w, s) for w in a.workloads]
    if region_stats(a):
        region = STATS_ARM.derive("S+region", ["--request-region"])
        plan.append(("heavy+region", "heavy", Resolved(region, s.binary)))
    return [(dict(workload=name, conc=conc), route, arm) for name, route, arm in plan
            for conc in a.conc]


def stats_pass(a, plan, nreq_bin, tmpdir, out, requests, prefix=""):
    """A stats build, never timed: allocator counters over `requests`
    requests per item of the plan, (row's coordinates with its conc,
    workload, arms.Resolved)."""
    rows, class_rows = [], []
    for key, route, arm in plan:
        conc = key["conc"]
        name = "-".join(str(v) for v in key.values()).replace("/", "_")
        s = Server(a, arm, tmpdir, f"stats-{name}")
        try:
            # Warm the caches first so the counters describe steady state.
            nreq(a, s, route, conc, max(1000, requests // 10), nreq_bin)
            s0 = s.stats()
            s1 = s.stats()
            _, _, f0 = s.proc_sample()
            nreq(a, s, route, conc, requests, nreq_bin)
            _, _, f1 = s.proc_sample()
            s2 = s.stats()
        finally:
            s.stop()
        if not s2["allocator"].get("stats"):
            raise AbError("the S build reports no per-class counters "
                          "(is it configured with --enable-pool-stats?)")
        classes, glob = counter_delta(s0, s1, s2)
        n = requests
        allocs = sum(c["allocs"] for c in classes.values()) + glob["big_allocs"]
        hits = sum(c["tcache_hits"] for c in classes.values())
        small = sum(c["allocs"] for c in classes.values())
        fetches = sum(c["central_fetches"] for c in classes.values())
        rows.append(dict(
            key, requests=n, allocs=allocs,
            allocs_per_req=f"{allocs / n:.2f}",
            tcache_hit_rate=f"{hits / small:.5f}" if small else "",
            central_fetches=fetches,
            central_fetches_per_kreq=f"{fetches * 1000 / n:.3f}",
            lock_acquired=sum(c["acquired"] for c in classes.values()),
            lock_contended=sum(c["contended"] for c in classes.values()),
            lock_wait_ns=sum(c["wait_ns"] for c in classes.values()),
            lock_held_ns=sum(c["held_ns"] for c in classes.values()),
            pageheap_allocs=glob["pageheap_allocs"],
            pageheap_acquired=glob["pageheap_acquired"],
            pageheap_contended=glob["pageheap_contended"],
            pageheap_held_ns=glob["pageheap_held_ns"], big_allocs=glob["big_allocs"],
            minflt=f1 - f0, minflt_per_req=f"{(f1 - f0) / n:.5f}"))
        for cls in sorted(classes):
            c = classes[cls]
            if c["allocs"] == 0 and c["central_fetches"] == 0 and c["acquired"] == 0:
                continue
            class_rows.append(dict(c, **key, **{"class": cls},
                                   allocs_per_req=f"{c['allocs'] / n:.3f}",
                                   acquired_per_req=f"{c['acquired'] / n:.3f}",
                                   held_ns_per_acq=f"{c['held_ns'] / c['acquired']:.1f}"
                                   if c["acquired"] else ""))
        log(f"stats {' '.join(str(v) for v in key.values())}: {rows[-1]['allocs_per_req']} "
            f"allocations/request, {fetches} central fetches, {rows[-1]['lock_contended']} "
            "contended")
        write_csv(os.path.join(out, prefix + "stats.csv"), rows, list(key) + STATS_FIELDS)
        write_csv(os.path.join(out, prefix + "classes.csv"), class_rows,
                  list(key) + CLASS_FIELDS)
