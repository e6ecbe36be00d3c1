# SPDX-License-Identifier: BSD-2-Clause
"""report.md from a results directory's CSV and JSON."""

import json
import os
import statistics

from .callgrind import ir_split
from .cells import WORKLOADS
from .common import read_csv
from .footprint import BASELINE_S, SCALING_FIELDS, SETTLED_S, figures, series
from .plots import make_plots



def fnum(x, nd=0):
    return f"{float(x):,.{nd}f}"


def ratio(x, y):
    return x / y if y else float("nan")


def pctl_median(rs, key):
    """Median of one latency percentile over runs, NaN when wrk printed 0
    for it (it does at high connection counts with pipelining: its
    correction of the latency histogram leaves the top ranks unreachable)."""
    vals = [float(r[key]) for r in rs]
    return statistics.median(vals) if all(v > 0 for v in vals) else float("nan")


def busy(server, client):
    """The CPUs' busy shares over the timed runs; a client at 97 % or more
    while the server is not is the bottleneck, and the rate then measures
    the client (plaintext c=200: wrk 99 %, the worker 75-90 %)."""
    if server != server or client != client:
        return "n/a"
    mark = " (client-bound)" if client >= 97 and server < 95 else ""
    return f"{server:.0f} / {client:.0f}{mark}"


def ms(us):
    return f"{us / 1000:.2f}" if us == us else "n/a"


def by_conc(r):
    """The A/B's cell of a row: (workload, conc, arm)."""
    return r["workload"], int(r["conc"]), r["arm"]


def by_workers(r):
    """The ladder's cell of a row: (workload, workers, arm)."""
    return r["workload"], int(r["workers"]), r["arm"]


def cells_from_runs(runs, key=by_conc):
    """Median, CV, medians of the latency percentiles and of the CPUs' busy
    shares per cell and arm (key)."""
    cells = {}
    for r in runs:
        cells.setdefault(key(r), []).append(r)
    out = {}
    for key, rs in cells.items():
        rps = [float(r["rps"]) for r in rs]
        med = statistics.median(rps)
        cv = statistics.pstdev(rps) / statistics.mean(rps) if len(rps) > 1 else 0.0
        cpu = [float(r["cpu_us_per_req"]) for r in rs if r["cpu_us_per_req"]]
        sb = [float(r["server_busy"]) for r in rs if r.get("server_busy")]
        cb = [float(r["client_busy"]) for r in rs if r.get("client_busy")]
        out[key] = dict(
            server_busy=statistics.median(sb) if sb else float("nan"),
            client_busy=statistics.median(cb) if cb else float("nan"),
            rps=med, cv=cv, n=len(rs), valid=all(r["valid"] == "1" for r in rs),
            p50=pctl_median(rs, "p50_us"), p99=pctl_median(rs, "p99_us"),
            p999=pctl_median(rs, "p999_us"),
            cpu=statistics.median(cpu) if cpu else float("nan"),
            errors=sum(int(float(r["non2xx"])) + int(float(r["socket_errors"])) for r in rs))
    return out


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    return "\n".join(out)


def pct(x, y):
    """x against y as a signed percentage, or n/a."""
    return f"{(x / y - 1) * 100:+.1f}%" if y and x == x and y == y else "n/a"


def region_section(d, st, cells, cpus, irs):
    """The /heavy comparison of each build with and without --request-region:
    throughput, CPU, instructions and faults per request side by side, and
    one sentence per build that states the differences."""
    pairs = [(base, base + "+region") for base in ("A", "B")
             if base in st["arms"] and base + "+region" in st["arms"]]
    if not pairs:
        return []
    w = "heavy"
    L = ["## Per-request regions on /heavy", "",
         "`A+region` and `B+region` are the pool and the glibc build run with "
         "`--request-region`: the /heavy handler's bucket array, nodes, keys, values and "
         "render buffer (95 allocations for wrk's request) come from a region the "
         "worker resets after every request, and their frees do nothing; "
         "libevent's buffers stay on malloc. Each region arm is compared with its own "
         "build without the region (÷ own), measured in the same runs.", ""]
    cpu_idx = {(r["workload"], int(r["conc"]), r["arm"]): r for r in cpus}
    rows = []
    for c in st["conc"]:
        for base, reg in pairs:
            for arm in (base, reg):
                x = cells.get((w, c, arm))
                cp = cpu_idx.get((w, c, arm))
                if x is None and cp is None:
                    continue
                own = cells.get((w, c, base))
                own_cp = cpu_idx.get((w, c, base))
                sched = float(cp["sched_us_per_req"]) if cp else float("nan")
                own_sched = float(own_cp["sched_us_per_req"]) if own_cp else float("nan")
                rows.append([c, arm, fnum(x["rps"]) if x else "n/a",
                             f"{ratio(x['rps'], own['rps']):.3f}" if x and own else "n/a",
                             ms(x["p99"]) if x else "n/a",
                             f"{sched:.2f}" if cp else "n/a",
                             f"{ratio(sched, own_sched):.3f}" if cp and own_cp else "n/a",
                             cp["minflt_per_req"] if cp else "n/a",
                             ("yes" if x["valid"] else "**INVALID**") if x else "n/a"])
    if rows:
        L += [md_table(["conc", "arm", "RPS", "÷ own", "p99 ms", "sched µs/req", "÷ own",
                        "minflt/req", "valid"], rows), ""]
    ir_idx = {r["arm"]: r for r in irs if r["workload"] == w}
    alloc_ir, region_ir = ir_split(read_csv(os.path.join(d, "ir-functions.csv")))
    rows = []
    for base, reg in pairs:
        for arm in (base, reg):
            r = ir_idx.get(arm)
            if r is None:
                continue
            own = ir_idx.get(base)
            k = (w, arm)
            total = float(r["ir_per_req"])
            rows.append([arm, fnum(total, 0),
                         f"{total / float(own['ir_per_req']):.3f}" if own else "n/a",
                         fnum(alloc_ir.get(k, 0), 0), fnum(region_ir.get(k, 0), 0),
                         fnum(total - alloc_ir.get(k, 0) - region_ir.get(k, 0), 0)])
    if rows:
        L += ["Instructions per /heavy request (callgrind, worker only; columns as in the "
              "instructions section below):", "",
              md_table(["arm", "Ir/request", "÷ own", "in the allocator", "in the region",
                        "elsewhere"], rows), ""]
    for base, reg in pairs:
        name = "the pool build (A)" if base == "A" else "the glibc build (B)"
        parts = []
        ib, ir_ = ir_idx.get(base), ir_idx.get(reg)
        if ib and ir_:
            parts.append(f"instructions per request {pct(float(ir_['ir_per_req']), float(ib['ir_per_req']))} "
                         f"(in the allocator {fnum(alloc_ir.get((w, base), 0), 0)} → "
                         f"{fnum(alloc_ir.get((w, reg), 0), 0)}, in the region "
                         f"{fnum(region_ir.get((w, reg), 0), 0)})")
        for c in st["conc"]:
            xb, xr = cells.get((w, c, base)), cells.get((w, c, reg))
            cb, cr = cpu_idx.get((w, c, base)), cpu_idx.get((w, c, reg))
            bits = []
            if xb and xr:
                bits.append(f"requests/s {pct(xr['rps'], xb['rps'])}")
            if cb and cr:
                bits.append(f"CPU per request "
                            f"{pct(float(cr['sched_us_per_req']), float(cb['sched_us_per_req']))}")
                bits.append(f"minor faults per request {cb['minflt_per_req']} → "
                            f"{cr['minflt_per_req']}")
            if bits:
                parts.append(f"at c={c} " + ", ".join(bits))
        if parts:
            L += [f"- On {name}, the region changes " + "; ".join(parts) + ".", ""]
    return L


def mib(kb):
    return f"{kb / 1024:.1f}" if kb == kb else "n/a"


def burst_title(b):
    """The footprint plot's title: the scenario in a line."""
    return (f"skewed burst: {b['workers']} workers, each in turn {b['requests']} x "
            f"/heavy?n={b['scale']}, {b['period_s']} s apart from {BASELINE_S:g} s")


def memory_section(memory, footprint, burst, pngs):
    """The footprints: after each cell of the timed pass, and over the
    skewed burst."""
    if not memory and not footprint:
        return []
    L = ["## Memory footprint", "",
         "The whole server's memory: the sum of PSS (`/proc/PID/smaps_rollup`) over the "
         "master and the workers. PSS divides a page among the processes that map it, so "
         "the pool's shared arena counts once; `anon` is private memory (the private "
         "heaps), `shmem` the shared arena, `file` the binaries and libraries.", ""]
    if memory:
        base = {(r["workload"], r["conc"]): float(r["pss_kb"]) for r in memory
                if r["arm"] == "B"}
        rows = [[r["workload"], r["conc"], r["arm"], r["procs"], mib(float(r["pss_kb"])),
                 mib(float(r["pss_anon_kb"])), mib(float(r["pss_shmem_kb"])),
                 mib(float(r["pss_file_kb"])), mib(float(r["lazyfree_kb"])),
                 f"{ratio(float(r['pss_kb']), base[(r['workload'], r['conc'])]):.3f}"
                 if (r["workload"], r["conc"]) in base else "n/a"] for r in memory]
        L += ["After each cell of the timed pass (its timed runs and fixed counts), "
              "MiB:", "",
              md_table(["workload", "conc", "arm", "processes", "PSS", "anon", "shmem", "file",
                        "of it lazy free", "÷ B"], rows), ""]
    if footprint and burst:
        b = burst[0]
        workers = int(b["workers"])
        L += ["### Skewed burst", "",
              f"{workers} workers, each with {b['conns']} keep-alive connections of its own "
              "(pinned by asking `/` which worker accepted). From "
              f"{BASELINE_S:g} s, every {b['period_s']} s the next worker gets "
              f"{b['requests']} requests for `/heavy?n={b['scale']}` over its connections "
              f"and goes quiet; {b['settle_s']} s of quiet follow the last burst. "
              + (f"Throughout, every worker gets plain `/heavy` at {b['trickle_rps']} "
                 "requests/s on a connection of its own, the light load that enters an "
                 "allocator whose decay runs only when it is called. "
                 if int(b.get("trickle_rps") or 0) else "No other load. ")
              + "Sampled "
              f"every {float(b['sample_s']) * 1000:.0f} ms. *after wN* is the last sample "
              "before the next burst (or the settle time) begins; *settled* the last "
              "sample. A private heap keeps each worker's peak; a shared heap can serve "
              "the next worker's burst from the pages the previous one freed.", ""]
        fig = {arm: figures(pts) for arm, pts in footprint.items()}
        arena = {r["arm"]: r for r in burst}
        ref = fig.get("B")
        rows = []
        for arm, f in fig.items():
            ar = arena.get(arm, {})
            rows.append([arm, mib(f["baseline"]), f"{mib(f['peak'])} ({f['peak_t']:.2f} s)"]
                        + [mib(f["left"].get(str(w), float("nan"))) for w in range(workers)]
                        + [mib(f["settled"]), mib(f["settled_lazyfree"]),
                           # + 0.0 turns a rounded -0.0 into 0.0
                           f"{round((f['settled'] - f['baseline']) / 1024, 1) + 0.0:+.1f}",
                           f"{ratio(f['peak'], ref['peak']):.3f}" if ref else "n/a",
                           f"{ratio(f['settled'], ref['settled']):.3f}" if ref else "n/a",
                           (f"{mib(float(ar['arena_used_kb']))} / "
                            f"{mib(float(ar['arena_returned_kb']))}")
                           if ar.get("arena_used_kb") else "—"])
        L += ["MiB:", "",
              md_table(["arm", "baseline", "peak (at)"]
                       + [f"after w{w}" for w in range(workers)]
                       + ["settled", "of it lazy free", "settled − baseline", "peak ÷ B",
                          "settled ÷ B", "arena used / returned"], rows), "",
              "*of it lazy free*: `LazyFree`, memory given back with `MADV_FREE`, which "
              "stays resident (and in PSS) until the kernel needs it. *arena used / "
              "returned*: the pool's own count at the end (`/stats`): pages carved from "
              "the arena, and of those the ones given back with `MADV_REMOVE`.", ""]
        for pw, metric, png in pngs:
            if pw == "burst":
                L += [f"![footprint against time]({png})", ""]
    return L


def scaling_section(st, scaling, pngs):
    """The scaling series: per worker count every allocator's footprint, and
    the pool's against glibc's and against the best peer's (jemalloc,
    tcmalloc, mimalloc: the smallest of the figure)."""
    if not scaling:
        return []
    b = st["burst"]
    keys = SCALING_FIELDS[3:]
    names = ["peak"] + [f"{q} s after" for q in SETTLED_S]
    L = ["## Memory against the number of workers", "",
         f"The skewed burst at each worker count: each worker in turn gets {b['requests']} "
         f"requests for `/heavy?n={b['scale']}`, {b['period_s']} s apart"
         + (f", every worker plain `/heavy` at {b['trickle_rps']} requests/s throughout"
            if b["trickle_rps"] else "")
         + "; one server at a time. *idle* is the median before the first burst, *peak* the "
         f"highest sample, *N s after* the last sample N s after the last burst ended. MiB:",
         ""]
    L += [md_table(["workers", "arm", "idle"] + names,
                   [[r["workers"], r["arm"], mib(float(r["idle_kib"]))]
                    + [mib(float(r[k])) for k in keys] for r in scaling]), ""]
    at = {(r["arm"], r["workers"]): r for r in scaling}
    rows = []
    for w in dict.fromkeys(r["workers"] for r in scaling):
        pool, glibc = at.get(("A", w)), at.get(("B", w))
        peers = [r for r in scaling if r["workers"] == w and r["arm"] not in ("A", "B")]
        if not pool or not (glibc or peers):
            continue
        row = [w]
        for k in keys:
            best = min(peers, key=lambda r: float(r[k]), default=None)
            row += [f"{ratio(float(pool[k]), float(glibc[k])):.3f}" if glibc else "n/a",
                    f"{ratio(float(pool[k]), float(best[k])):.3f} ({best['arm']})" if best
                    else "n/a"]
        rows.append(row)
    if rows:
        L += ["The pool (A) against glibc (B) and against the smallest of jemalloc, tcmalloc "
              "and mimalloc in the same figure (best peer); below 1 the pool is smaller:", "",
              md_table(["workers"] + [f"{n} {x}" for n in names for x in ("÷ B", "÷ best peer")],
                       rows), ""]
    L += [f"![footprint against workers]({png})" for pw, _, png in pngs if pw == "scaling"]
    return L + [""]


def pair(p, t, fmt):
    """Figures for processes and threads, "P / T"; n/a for a missing one."""
    def one(x):
        return fmt(x) if x is not None and x == x else "n/a"
    return f"{one(p)} / {one(t)}"


def per_req(row, field):
    """A stats row's counter per request, or None without the row."""
    return float(row[field]) / float(row["requests"]) if row else None


def ladder_section(d, st):
    """The contention ladder: per workload, N, lock and thread-cache size the
    pool's N worker processes against its N worker threads (and glibc's),
    figure by figure; then the size classes whose locks were contended."""
    lad = st.get("ladder")
    runs = read_csv(os.path.join(d, "ladder-runs.csv"))
    stats = {by_workers(r): r for r in read_csv(os.path.join(d, "ladder-stats.csv"))}
    if not lad or not (runs or stats):
        return []
    cells = cells_from_runs(runs, by_workers)
    cpus = {by_workers(r): float(r["sched_us_per_req"])
            for r in cpu_medians(read_csv(os.path.join(d, "ladder-cpu.csv")), by_workers)}
    irs = {by_workers(r): float(r["ir_per_req"])
           for r in read_csv(os.path.join(d, "ladder-ir.csv"))}
    alloc_ir = ir_split(read_csv(os.path.join(d, "ladder-ir-functions.csv")), by_workers)[0]
    configs = {}
    for name, c in lad["arms"].items():
        configs.setdefault((c["lock"], c["tcache"]), {})[c["mode"]] = name
    found = {(w, n) for w, n, _ in list(cells) + list(stats)}
    order = [(w, n) for w in st["workloads"] for n in lad["workers"] if (w, n) in found]
    ncpu = len(st["server_cpus"])
    L = ["## The contention ladder: processes against threads", "",
         f"Each cell is one workload with N workers at {lad['conc']} connections; its arms "
         "were started cold side by side and measured interleaved, as the A/B's are: "
         "glibc's and the pool's N worker processes (`-w N`, P) against N worker threads of "
         "one process (`--threads N`, T), for each central-lock build (the robust mutex; "
         "the spinlock of `--enable-pool-lock=spin`) and each thread-cache size "
         "(`SHMPOOL_TCACHE=bytes,batch`; `default` is the pool's own). "
         f"The server had {ncpu} CPU{'s' if ncpu > 1 else ''} "
         f"({','.join(map(str, st['server_cpus']))}): "
         + ("every cell has more workers than server CPUs. " if all(n > ncpu for n in lad["workers"])
            else f"N > {ncpu} has more workers than server CPUs. ")
         + f"Per arm {lad['warmup_s']} s of warm-up and {st['runs']} timed runs of "
         f"{lad['duration_s']} s (RPS and p99: medians); CPU µs/req is the scheduler's run "
         "time of every thread of the worker processes over the fixed counts; Ir/req is "
         f"callgrind's, summed over the worker processes, at N1, N2 = "
         f"{', '.join(map(str, lad['ir_requests']))} (valgrind runs a process's threads one at "
         "a time, and counts a spinlock's waiting but not a mutex's, which sleeps in the "
         "kernel); hits, central locks, contended acquisitions and their wait come from the "
         f"stats builds over {lad['stats_requests']} requests per arm. "
         "\"÷ glibc\" is RPS against glibc's arm of the same mode.", ""]
    rows = []
    for w, n in order:
        for (lock, tcache), modes in configs.items():
            keys = [(w, n, modes.get(m)) for m in ("procs", "threads")]
            got = [cells.get(k) for k in keys]
            glibc = [cells.get((w, n, f"B/{m}")) for m in ("procs", "threads")]
            sts = [stats.get(k) for k in keys]
            rps = [x["rps"] if x else None for x in got]
            cpu = [cpus.get(k) for k in keys]
            hits = [float(x["tcache_hit_rate"]) * 100 if x and x["tcache_hit_rate"] else None
                    for x in sts]
            bad = [k[2] for k, x in zip(keys, got) if x and not x["valid"]]
            rows.append([w, n, lock, tcache or "—",
                         pair(*hits, lambda x: f"{x:.2f}%"),
                         pair(*(per_req(x, "lock_acquired") for x in sts), lambda x: f"{x:.2f}"),
                         pair(*(per_req(x, "lock_contended") for x in sts), lambda x: f"{x:.3f}"),
                         pair(*(per_req(x, "lock_wait_ns") for x in sts), lambda x: f"{x:,.0f}"),
                         pair(*(irs.get(k) for k in keys), lambda x: f"{x:,.0f}"),
                         pair(*(alloc_ir.get(k, 0.0) if k in irs else None for k in keys),
                              lambda x: f"{x:,.0f}"),
                         pair(*cpu, lambda x: f"{x:.2f}"),
                         f"{ratio(cpu[1], cpu[0]):.3f}" if None not in cpu else "n/a",
                         pair(*rps, fnum),
                         f"{ratio(rps[1], rps[0]):.3f}" if None not in rps else "n/a",
                         pair(*(ratio(x, g["rps"]) if x is not None and g else None
                                for x, g in zip(rps, glibc)), lambda x: f"{x:.3f}"),
                         pair(*(x["p99"] if x else None for x in got), lambda x: ms(x)),
                         ("**INVALID**: " + ", ".join(bad)) if bad else "yes"])
    L += [md_table(["workload", "N", "lock", "tcache", "hits P / T", "central locks/req",
                    "contended/req", "wait ns/req", "Ir/req", "of it allocator", "CPU µs/req",
                    "CPU T ÷ P", "RPS P / T", "RPS T ÷ P", "÷ glibc", "p99 ms", "valid"], rows),
          ""]
    L += ladder_classes(d, lad, stats, configs, order)
    return L


def ladder_classes(d, lad, stats, configs, order):
    """The ladder's size classes whose central lock was contended, per cell
    and pool configuration: the TOP worst by the longer wait of P and T."""
    top = 4
    per = {}
    for r in read_csv(os.path.join(d, "ladder-classes.csv")):
        per.setdefault(by_workers(r), {})[r["class"]] = r
    rows = []
    for w, n in order:
        for (lock, tcache), modes in configs.items():
            keys = [(w, n, modes.get(m)) for m in ("procs", "threads")]
            sts = [stats.get(k) for k in keys]
            if not any(sts):
                continue
            cls = [per.get(k, {}) for k in keys]
            hot = sorted((c for c in set(cls[0]) | set(cls[1])
                          if any(int(x[c]["contended"]) for x in cls if c in x)),
                         key=lambda c: -max(float(x[c]["wait_ns"]) for x in cls if c in x))
            for c in hot[:top]:
                xs = [x.get(c) for x in cls]
                size = next(x["size"] for x in xs if x)
                rows.append([w, n, lock, tcache, f"{c} ({size} B)",
                             pair(*(float(x["acquired"]) / float(s["requests"]) if x and s
                                    else None for x, s in zip(xs, sts)), lambda v: f"{v:.2f}"),
                             pair(*(float(x["contended"]) / float(s["requests"]) if x and s
                                    else None for x, s in zip(xs, sts)), lambda v: f"{v:.4f}"),
                             pair(*(float(x["wait_ns"]) / float(s["requests"]) if x and s
                                    else None for x, s in zip(xs, sts)), lambda v: f"{v:,.0f}"),
                             pair(*(float(x["wait_ns"]) / int(x["contended"]) / 1000
                                    if x and int(x["contended"]) else None for x in xs),
                                  lambda v: f"{v:.1f}")])
    if not rows:
        return ["No size class's central lock was contended in the ladder's stats pass.", ""]
    return [f"Size classes whose central lock was contended (the {top} with the longest wait "
            "per configuration; all in `ladder-classes.csv`), per request, P / T:", "",
            md_table(["workload", "N", "lock", "tcache", "class", "locks/req", "contended/req",
                      "wait ns/req", "µs per contended"], rows), ""]


def cpu_medians(rows, key=by_conc):
    """One row per cell and arm (key) from cpu.csv's samples: the median of
    each per-request figure, and the spread of the run time (sched_lo,
    sched_hi).  A results directory from before the samples has one row per
    arm, its own median."""
    groups = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    out = []
    for g in groups.values():
        sched = [float(r["sched_us_per_req"]) for r in g]
        m = dict(g[0])
        for k in ("cpu_us_per_req", "sched_us_per_req", "minflt_per_req"):
            m[k] = f"{statistics.median(float(r[k]) for r in g):.5f}"
        m.update(samples=len(g), sched_lo=min(sched), sched_hi=max(sched))
        out.append(m)
    return out


def report(d):
    """Write d/report.md (and the plots) from the CSV and JSON in d."""
    with open(os.path.join(d, "machine.json")) as f:
        mach = json.load(f)
    with open(os.path.join(d, "settings.json")) as f:
        st = json.load(f)
    runs = read_csv(os.path.join(d, "runs.csv"))
    cpus = cpu_medians(read_csv(os.path.join(d, "cpu.csv")))
    irs = read_csv(os.path.join(d, "ir.csv"))
    stats = read_csv(os.path.join(d, "stats.csv"))
    class_rows = read_csv(os.path.join(d, "classes.csv"))
    arms = list(st["arms"])
    cells = cells_from_runs(runs)
    footprint = series(read_csv(os.path.join(d, "footprint.csv")))
    burst = read_csv(os.path.join(d, "burst.csv"))
    scaling = read_csv(os.path.join(d, "scaling.csv"))
    pngs = make_plots(d, cells, arms, st["workloads"], st["conc"], class_rows, footprint,
                      burst_title(burst[0]) if burst else "", scaling)
    name = os.path.basename(d.rstrip("/"))

    L = [f"# poold A/B: {name}", ""]
    L += ["Generated by `bench/ab/ab` from the CSV files in this directory; "
          f"command: `{st['command']}`, {st['started']} to {st['finished']}.", ""]
    L += ["## Machine", ""]
    pk = mach["packages"]
    L += [f"- {mach['cores']} cores ({mach['cpu']}), {mach['memory_gib']} GiB, "
          f"kernel {mach['kernel']}, {mach['glibc']}, host `{mach['host']}`",
          f"- allocators: glibc (libc6 {pk['libc6']}), jemalloc (libjemalloc2 "
          f"{pk['libjemalloc2']}), tcmalloc (libtcmalloc-minimal4 {pk['libtcmalloc-minimal4']}), "
          f"mimalloc (libmimalloc2.0 {pk['libmimalloc2.0']}); the pool from commit "
          f"{mach['commit']}",
          f"- tools: wrk {pk['wrk']}, valgrind {pk['valgrind']}, gnuplot {pk['gnuplot-nox']}, "
          f"libevent {pk['libevent-2.1-7']}, http-parser {pk['libhttp-parser2.9']}", ""]
    L += ["Absolute figures from a 2-core shared VM are not production figures; "
          "the ratios, measured side by side in one run, are the result.", ""]
    L += ["## Settings", ""]
    L += [f"- poold `-w {st['workers']}` on CPU(s) {','.join(map(str, st['server_cpus']))}; "
          f"wrk `-t {st['wrk_threads']}`, nreq and the harness on CPU(s) "
          f"{','.join(map(str, st['client_cpus']))}",
          f"- per cell: every arm started cold, {st['warmup_s']} s warm-up (discarded), "
          f"{st['runs']} timed runs of {st['duration_s']} s, arms interleaved run by run"
          f"{', the order rotated each round' if st.get('arm_order') == 'rotated' else ''}; "
          f"then {st['runs']} times, arms interleaved, exactly "
          f"{', '.join(f'{v} ({k})' for k, v in st['cpu_requests'].items())} "
          "requests per arm from `bench/ab/nreq` for CPU time and minor faults per request "
          "(the median is reported)",
          f"- instructions per request: callgrind, worker totals at N1 = {st['ir_requests'][0]} "
          f"and N2 = {st['ir_requests'][1]} requests over {st['ir_conc']} connections, "
          "(Ir(N2) − Ir(N1)) / (N2 − N1)",
          f"- stats pass: S build (`--enable-pool --enable-pool-stats`), never timed, "
          f"{st['stats_requests']} requests per workload and concurrency after a warm-up",
          f"- budget: {st['budget_min']} min" if st["budget_min"] else "- budget: none (full run)",
          ""]
    L += ["| arm | binary | LD_PRELOAD | flags |", "|---|---|---|---|"]
    for arm, v in st["arms"].items():
        flags = " ".join(v.get("flags", []))
        L.append(f"| {arm} | `{v['binary']}` | "
                 f"{('`' + v['preload'] + '`') if v['preload'] else '—'} | "
                 f"{('`' + flags + '`') if flags else '—'} |")
    for arm, why in st["missing"].items():
        L.append(f"| {arm} | **missing** | {why} | |")
    L.append("")
    if any("--request-region" in v.get("flags", []) for v in st["arms"].values()):
        L += ["The `+region` arms run only on `/heavy`: `--request-region` moves the /heavy "
              "handler's own objects into a per-request region, and no other route "
              "allocates objects of its own per request.", ""]

    L += region_section(d, st, cells, cpus, irs)

    if cells:
        L += ["## A/B ratios (pool ÷ glibc)", "",
              "RPS and p99 are medians of the timed runs; CPU is the workers' "
              "run time per request (schedstat) over the fixed count. Above 1 is better "
              "for RPS, worse for p99 and CPU.", ""]
        cpu_idx = {(r["workload"], int(r["conc"]), r["arm"]): r for r in cpus}
        rows = []
        for w in st["workloads"]:
            for c in st["conc"]:
                ca, cb = cells.get((w, c, "A")), cells.get((w, c, "B"))
                if not ca or not cb:
                    continue
                xa, xb = cpu_idx.get((w, c, "A")), cpu_idx.get((w, c, "B"))
                cpu_r = (ratio(float(xa["sched_us_per_req"]), float(xb["sched_us_per_req"]))
                         if xa and xb else float("nan"))
                flt_r = (f"{float(xa['minflt_per_req']):.4f} / {float(xb['minflt_per_req']):.4f}"
                         if xa and xb else "n/a")
                ok = "yes" if ca["valid"] and cb["valid"] else "**INVALID**"
                p99_r = ratio(ca["p99"], cb["p99"])
                rows.append([w, c, f"{ratio(ca['rps'], cb['rps']):.3f}",
                             f"{ca['cv'] * 100:.1f}% / {cb['cv'] * 100:.1f}%",
                             f"{p99_r:.3f}" if p99_r == p99_r else "n/a", f"{cpu_r:.3f}",
                             flt_r, ok])
        L += [md_table(["workload", "conc", "RPS A/B", "CV A / B", "p99 A/B", "CPU/req A/B",
                        "minflt/req A / B", "valid"], rows), ""]

        L += ["## Throughput and latency per cell", ""]
        for w in st["workloads"]:
            L += [f"### {w} (`{WORKLOADS[w][0]}`"
                  + (f", pipelined depth {WORKLOADS[w][1]})" if WORKLOADS[w][1] > 1 else ")"), ""]
            rows = []
            for c in st["conc"]:
                base = cells.get((w, c, "B"))
                for arm in arms:
                    x = cells.get((w, c, arm))
                    if not x:
                        continue
                    rows.append([c, arm, fnum(x["rps"]), f"{x['cv'] * 100:.1f}%",
                                 f"{ratio(x['rps'], base['rps']):.3f}" if base else "n/a",
                                 ms(x["p50"]), ms(x["p99"]), ms(x["p999"]),
                                 busy(x["server_busy"], x["client_busy"]),
                                 "yes" if x["valid"] else f"**INVALID** ({x['errors']} errors)"])
                for arm in st["missing"]:
                    rows.append([c, arm, "missing", "", "", "", "", "", "", ""])
            L += [md_table(["conc", "arm", "RPS", "CV", "÷ B", "p50 ms", "p99 ms", "p999 ms",
                            "busy % server / client", "valid"], rows), ""]
            for pw, metric, png in pngs:
                if pw == w:
                    L.append(f"![{w} {metric}]({png})")
            L.append("")

    if cpus:
        L += ["## CPU time and minor faults per request (fixed count)", "",
              "`cpu µs/req` is utime+stime of the workers (10 ms ticks) over the count; "
              "`sched µs/req` the scheduler's run time of the same processes "
              "(/proc/PID/schedstat, ns resolution).  Each is the median of the "
              "counts (one per timed run, arms interleaved); the range is the run "
              "time's min-max.", ""]
        rows = []
        base = {(r["workload"], r["conc"]): r for r in cpus if r["arm"] == "B"}
        for r in cpus:
            b = base.get((r["workload"], r["conc"]))
            rows.append([r["workload"], r["conc"], r["arm"], r["requests"], r["samples"],
                         f"{float(r['cpu_us_per_req']):.2f}", f"{float(r['sched_us_per_req']):.2f}",
                         f"{r['sched_lo']:.2f}–{r['sched_hi']:.2f}",
                         f"{ratio(float(r['sched_us_per_req']), float(b['sched_us_per_req'])):.3f}"
                         if b else "n/a", f"{float(r['minflt_per_req']):.5f}"])
        L += [md_table(["workload", "conc", "arm", "requests", "counts", "cpu µs/req",
                        "sched µs/req", "range", "sched ÷ B", "minflt/req"], rows), ""]

    if irs:
        L += ["## Instructions per request (callgrind, worker only)", ""]
        L += ["`in the allocator` sums the per-request self cost of the functions from "
              "glibc's `malloc/malloc.c` and `malloc/arena.c`, the pool's `shm/` sources, "
              "the preloaded library, and malloc entry points whose object valgrind "
              "could not name; `in the region` the region's out-of-line functions "
              "(`src/region.c`: its block refill and reset; the bump itself is inlined "
              "into the handler).", ""]
        fn_rows = read_csv(os.path.join(d, "ir-functions.csv"))
        alloc_ir, region_ir = ir_split(fn_rows)
        rows = []
        base = {r["workload"]: float(r["ir_per_req"]) for r in irs if r["arm"] == "B"}
        for r in irs:
            b = base.get(r["workload"])
            k = (r["workload"], r["arm"])
            rows.append([r["workload"], r["arm"], fnum(r["ir_per_req"], 0),
                         f"{float(r['ir_per_req']) / b:.3f}" if b else "n/a",
                         fnum(alloc_ir.get(k, 0), 0), fnum(region_ir.get(k, 0), 0),
                         fnum(float(r["ir_per_req"]) - alloc_ir.get(k, 0) - region_ir.get(k, 0),
                              0),
                         fnum(r["ir1"]), fnum(r["ir2"])])
        L += [md_table(["workload", "arm", "Ir/request", "÷ B", "in the allocator",
                        "in the region", "elsewhere", "Ir(N1)", "Ir(N2)"], rows), ""]
        for w in dict.fromkeys(r["workload"] for r in irs):
            ir_arms = list(dict.fromkeys(r["arm"] for r in irs if r["workload"] == w))
            per = {}
            for r in fn_rows:
                if r["workload"] == w:
                    e = per.setdefault(r["function"], {})
                    e[r["arm"]] = e.get(r["arm"], 0.0) + float(r["ir_per_req"])
            # The functions that make the arms differ: largest spread first.
            spread = sorted(per, key=lambda f: -(max(per[f].get(x, 0) for x in ir_arms)
                                                 - min(per[f].get(x, 0) for x in ir_arms)))
            rows = [[f"`{f}`"] + [fnum(per[f].get(x, 0), 0) for x in ir_arms]
                    for f in spread[:15]]
            L += [f"Where {w}'s instructions per request differ most between arms "
                  "(self cost per function; full list in `ir-functions.csv`):", "",
                  md_table(["function"] + ir_arms, rows), ""]

    if stats:
        L += ["## Stats pass (S build, untimed)", "",
              "Counters are differences across the counted requests, less the cost of one "
              "`/stats` call (measured back to back).", ""]
        rows = [[r["workload"], r["conc"], r["requests"], r["allocs_per_req"],
                 f"{float(r['tcache_hit_rate']) * 100:.3f}%" if r["tcache_hit_rate"] else "n/a",
                 r["central_fetches"], r["central_fetches_per_kreq"], r["lock_acquired"],
                 r["lock_contended"], r["lock_wait_ns"], r["pageheap_allocs"],
                 r["pageheap_contended"], r["minflt_per_req"]] for r in stats]
        L += [md_table(["workload", "conc", "requests", "allocs/req", "tcache hits",
                        "central fetches", "per 1k req", "central locks", "contended",
                        "wait ns", "page-heap allocs", "page-heap contended",
                        "minflt/req"], rows), ""]
        L += ["Per size class (classes with any activity):", ""]
        rows = [[r["workload"], r["conc"], r["class"], r["size"], r["allocs_per_req"],
                 r["tcache_misses"], r["central_fetches"], r["central_fetched"],
                 r["central_releases"], r["acquired"], r["contended"], r["wait_ns"],
                 r.get("held_ns_per_acq") or "n/a"]
                for r in class_rows]
        L += [md_table(["workload", "conc", "class", "size", "allocs/req", "tcache misses",
                        "central fetches", "objects fetched", "central releases",
                        "lock acquired", "contended", "wait ns", "held ns/acquisition"],
                       rows), ""]
        for pw, metric, png in pngs:
            if pw == "classes":
                L.append(f"![per-class {metric}]({png})")
        L.append("")

    L += ladder_section(d, st)

    memory = read_csv(os.path.join(d, "memory.csv"))
    L += memory_section(memory, footprint, burst, pngs)
    L += scaling_section(st, scaling, pngs)

    L += ["## Files", "",
          "`runs.csv` (every timed wrk run), `cpu.csv` (fixed-count CPU and faults), "
          "`ir.csv` and `ir-functions.csv` (callgrind), `stats.csv` and `classes.csv` (stats pass), "
          + ("`memory.csv` (footprint after each cell), " if memory else "")
          + ("`footprint.csv` and `burst.csv` (skewed burst), " if burst else "")
          + ("`scaling.csv` and `scaling-series.csv` (the scaling series), " if scaling else "")
          + ("`ladder-*.csv` (the contention ladder: the same files for its cells), "
             if st.get("ladder") else "")
          + "`machine.json`, `settings.json`, `plot-*.dat` (plot data).", ""]
    with open(os.path.join(d, "report.md"), "w") as f:
        f.write("\n".join(L))
    return "\n".join(L)

