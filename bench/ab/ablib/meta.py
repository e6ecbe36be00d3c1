# SPDX-License-Identifier: BSD-2-Clause
"""machine.json and settings.json: where the run was made, with what, and
how, so that a report can be regenerated from its directory alone."""

import os
import platform
import socket
import sys

from . import ladder
from .cells import cpu_requests
from .common import TOP, run
from .footprint import SETTLED_S

PACKAGES = ["libc6", "libevent-2.1-7", "libhttp-parser2.9", "libjemalloc2",
            "libtcmalloc-minimal4", "libmimalloc2.0", "wrk", "valgrind", "gnuplot-nox"]


def machine(a):
    def first_line(cmd):
        r = run(cmd, capture_output=True, text=True)
        return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else "?"
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    versions = {}
    for pkg in PACKAGES:
        r = run(["dpkg-query", "-W", "-f", "${Version}", pkg], capture_output=True, text=True)
        versions[pkg] = r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else "not installed"
    commit = first_line(["git", "-C", TOP, "rev-parse", "--short", "HEAD"])
    dirty = run(["git", "-C", TOP, "diff", "--quiet", "HEAD", "--", "src", "shm"]).returncode != 0
    return {
        "host": socket.gethostname(),
        "cores": os.cpu_count(),
        "cpu": model,
        "memory_gib": round(mem_kb / 1048576, 1),
        "kernel": platform.release(),
        "glibc": os.confstr("CS_GNU_LIBC_VERSION"),
        "packages": versions,
        "commit": commit + (" (src/ or shm/ modified)" if dirty else ""),
    }


def settings(a, arms, missing, started, finished):
    return {
        "arms": {k: {"binary": os.path.relpath(v.binary, TOP), "preload": v.preload,
                     "flags": list(v.arm.flags), "env": dict(v.arm.env)}
                 for k, v in arms.items()},
        "missing": missing,
        "workloads": a.workloads, "conc": a.conc,
        "server_cpus": a.server_cpus, "client_cpus": a.client_cpus,
        "workers": a.workers, "wrk_threads": a.wrk_threads,
        "warmup_s": a.warmup, "duration_s": a.duration, "runs": a.runs,
        "cpu_requests": {w: cpu_requests(a, w) for w in a.workloads},
        "ir_requests": a.ir_requests, "ir_conc": a.ir_conc,
        "stats_requests": a.stats_requests, "arm_order": "rotated",
        "burst": {"workers": a.burst_workers, "scale": a.burst_scale,
                  "requests": a.burst_requests, "period_s": a.burst_period,
                  "settle_s": a.burst_settle, "trickle_rps": a.burst_trickle},
        "scaling": None if "scaling" in a.skip else {
            "workers": a.scale_workers, "settled_s": list(SETTLED_S)},
        "ladder": None if "ladder" in a.skip else ladder.settings(a),
        "budget_min": a.budget, "skip": a.skip,
        "started": started, "finished": finished,
        "command": "bench/ab/ab " + " ".join(sys.argv[1:]),
    }
