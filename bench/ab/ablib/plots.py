# SPDX-License-Identifier: BSD-2-Clause
"""The gnuplot PNGs of a report: requests/s and p99 against concurrency per
workload, the stats pass's central fetches and contention per size class,
the skewed burst's footprint against time, and the scaling series' peak
and settled footprints against the number of workers.  bench/ab-plot.gp draws them
from whitespace tables (plot-*.dat)."""

import os
import shutil

from .arms import ARMS
from .common import HERE, log, read_csv, run
from .footprint import SCALING_FIELDS, SETTLED_S


def plot(gp, data_path, png, title, ylabel, kind):
    r = run(["gnuplot", "-e", f"data='{data_path}'; out='{png}'; ttl='{title}'; "
             f"ylab='{ylabel}'; kind='{kind}'", gp], capture_output=True, text=True)
    if r.returncode != 0:
        log(f"gnuplot failed for {png}: {r.stderr.strip()}")
        return False
    return True


def make_plots(d, cells, arms, workloads, concs, class_rows, footprint, title, scaling):
    """footprint: footprint.series() of the burst pass, drawn under title;
    scaling: the rows of scaling.csv."""
    gp = os.path.join(HERE, "ab-plot.gp")
    if shutil.which("gnuplot") is None:
        log("gnuplot not found (Debian package gnuplot-nox): report without plots")
        return []
    pngs = []
    for w in workloads if cells else []:
        w_arms = [arm for arm in arms if arm not in ARMS or ARMS[arm].runs_on(w)]
        for metric, ylabel in (("rps", "requests/s (median)"), ("p99", "p99 latency, ms")):
            dat = os.path.join(d, f"plot-{metric}-{w}.dat")
            with open(dat, "w") as f:
                f.write("conc " + " ".join(f'"{arm}"' for arm in w_arms) + "\n")
                for c in concs:
                    vals = []
                    for arm in w_arms:
                        cell = cells.get((w, c, arm))
                        v = "NaN" if cell is None else (cell["rps"] if metric == "rps"
                                                         else cell["p99"] / 1000)
                        vals.append(str(v))
                    f.write(f"{c} " + " ".join(vals) + "\n")
            png = f"{metric}-{w}.png"
            if all(cells.get((w, c, arm)) is None or (cells[(w, c, arm)][metric]
                                                      != cells[(w, c, arm)][metric])
                   for c in concs for arm in w_arms):
                continue  # nothing to draw: wrk gave no such percentile
            if plot(gp, dat, os.path.join(d, png), f"{w}: {ylabel} against concurrency",
                    ylabel, "lines"):
                pngs.append((w, metric, png))
    if class_rows:
        # One bar group per size class (the busiest), one bar per workload,
        # at the lowest concurrency of the pass.
        c0 = min(int(r["conc"]) for r in class_rows)
        rows = [r for r in class_rows if int(r["conc"]) == c0]
        ws = [w for w in workloads if any(r["workload"] == w for r in rows)]
        for metric, ylabel, key in (
                ("fetches", "central fetches per 1000 requests", "central_fetches"),
                ("contended", "contended central-lock acquisitions per 1000 requests",
                 "contended")):
            dat = os.path.join(d, f"plot-class-{metric}.dat")
            per = {}
            reqs = {}
            for r in rows:
                per.setdefault(int(r["size"]), {})[r["workload"]] = int(r[key])
            for r in read_csv(os.path.join(d, "stats.csv")):
                if int(r["conc"]) == c0:
                    reqs[r["workload"]] = int(r["requests"])
            with open(dat, "w") as f:
                f.write("size " + " ".join(f'"{w}"' for w in ws) + "\n")
                for size in sorted(per):
                    f.write(f"{size} " + " ".join(
                        str(per[size].get(w, 0) * 1000 / reqs.get(w, 1)) for w in ws) + "\n")
            png = f"class-{metric}.png"
            if plot(gp, dat, os.path.join(d, png),
                    f"stats pass, c={c0}: {ylabel} by size class", ylabel, "bars"):
                pngs.append(("classes", metric, png))
    if footprint:
        # One line per arm on the samples' common time grid.
        times = sorted({p[0] for pts in footprint.values() for p in pts})
        at = {arm: {p[0]: p[3] for p in pts} for arm, pts in footprint.items()}
        dat = os.path.join(d, "plot-footprint.dat")
        with open(dat, "w") as f:
            f.write("seconds " + " ".join(f'"{arm}"' for arm in footprint) + "\n")
            for t in times:
                f.write(f"{t:.2f} " + " ".join(
                    f"{at[arm][t] / 1024:.3f}" if t in at[arm] else "NaN"
                    for arm in footprint) + "\n")
        if plot(gp, dat, os.path.join(d, "footprint.png"), title,
                "whole server, sum of PSS, MiB", "time"):
            pngs.append(("burst", "footprint", "footprint.png"))
    if scaling:
        # Two columns per arm, its peak and its footprint the longest after the
        # last burst: ab-plot.gp draws them in the arm's colour, solid and dashed.
        last = SCALING_FIELDS[-1]
        s_arms = list(dict.fromkeys(r["arm"] for r in scaling))
        at = {(r["arm"], int(r["workers"])): r for r in scaling}
        dat = os.path.join(d, "plot-scaling.dat")
        with open(dat, "w") as f:
            f.write("workers " + " ".join(f'"{arm} peak" "{arm} {SETTLED_S[-1]} s after"'
                                          for arm in s_arms) + "\n")
            for w in sorted({int(r["workers"]) for r in scaling}):
                f.write(f"{w} " + " ".join(
                    f"{int(at[(arm, w)][k]) / 1024:.3f}" if (arm, w) in at else "NaN"
                    for arm in s_arms for k in ("peak_kib", last)) + "\n")
        if plot(gp, dat, os.path.join(d, "scaling.png"),
                "skewed burst against the number of workers: peak (solid), "
                f"{SETTLED_S[-1]} s after the last burst (dashed)",
                "whole server, sum of PSS, MiB", "workers"):
            pngs.append(("scaling", "scaling", "scaling.png"))
    return pngs
