# SPDX-License-Identifier: BSD-2-Clause
"""The contention ladder: where contention between processes and
contention between threads part, in the server itself.

A ladder cell is one workload (/plaintext or /heavy) with N workers (each
N of --ladder-workers) at --ladder-conc connections.  Its arms, started
cold side by side and measured interleaved as every cell is, are glibc's
(B) with N worker processes and with N worker threads, and for each lock
build (--ladder-locks: the robust mutex A, the spinlock A-spin) and each
thread-cache size (--ladder-tcache, SHMPOOL_TCACHE in the arm's
environment) the pool's, N processes against N threads.  Processes are
`-w N`; threads `-w 1 --threads N`, the same worker code in one process.

The ladder runs the same three passes as the A/B (passes.py) over its own
cells, into ladder-*.csv: the timed runs and fixed counts (RPS, p99, CPU
per request over all the workers' threads), callgrind (instructions per
request summed over the worker processes, each file holding all its
threads) and the stats build of each pool arm (S or S-spin with the same
flags and environment: hit rate, lock acquisitions, contended ones and
their wait and how long each lock was held, per size class).
--ladder-passes runs some of the three only.
"""

import dataclasses

from .arms import STATS_VARIANT, Arm, Resolved, binary
from .cells import Cell
from .passes import ir_pass, stats_pass, timed_pass

# The ladder's files are the passes' under this prefix: ladder-runs.csv ...
PREFIX = "ladder-"

WORKLOADS = ("plaintext", "heavy")
LOCKS = {"mutex": "A", "spin": "A-spin"}
MODES = ("procs", "threads")
# From nearly every allocation through a central lock to the default:
# measured on /heavy with two workers, 0,1 keeps 70 % of allocations in
# the thread cache, 0,8 94 %, 0,16 98.0 % (the seed's 97.8 %), the
# default 100.000 %.
DEFAULT_TCACHE = "0,1:0,8:0,16:default"
DEFAULT_WORKERS = "2,4"
DEFAULT_CONC = 50
DEFAULT_DURATION = 10
DEFAULT_IR_REQUESTS = "1000,5000"
DEFAULT_STATS_REQUESTS = 50000
# What callgrind costs here: seconds to start and stop a server under
# valgrind, and per request (/heavy with SHMPOOL_TCACHE=0,1, four threads:
# 1,000 requests in 1.0 s, /plaintext's in 0.08 s).
IR_START_S = 1.5
IR_REQUEST_S = {"plaintext": 0.0001, "heavy": 0.0012}


def mode_flags(mode, n):
    return ("-w", str(n)) if mode == "procs" else ("-w", "1", "--threads", str(n))


def arm_table(a):
    """Every ladder arm by name: its variant, mode, lock and thread-cache
    setting ("" for glibc's), in the order the cells run them."""
    table = {f"B/{mode}": dict(variant="B", mode=mode, lock="glibc", tcache="")
             for mode in MODES}
    for lock in a.ladder_locks:
        for tcache in a.ladder_tcache:
            for mode in MODES:
                table[f"{LOCKS[lock]}/{mode}/{tcache}"] = dict(
                    variant=LOCKS[lock], mode=mode, lock=lock, tcache=tcache)
    return table


def arm_of(name, coords, n):
    """The arms.Arm of a ladder arm with n workers."""
    env = () if coords["tcache"] in ("", "default") else (("SHMPOOL_TCACHE", coords["tcache"]),)
    return Arm(name, coords["variant"], flags=mode_flags(coords["mode"], n), env=env)


def workloads(a):
    return [w for w in a.workloads if w in WORKLOADS]


def cells(a):
    """The ladder's cells, each with all its arms (arms.Resolved)."""
    table = arm_table(a)
    out = []
    for workload in workloads(a):
        for n in a.ladder_workers:
            arms = tuple(Resolved(arm_of(name, c, n), binary(a, c["variant"]))
                         for name, c in table.items())
            out.append(Cell(workload, a.ladder_conc, arms, workers=n))
    return out


def stats_plan(a):
    """The stats pass's items for the ladder: each pool arm of each cell on
    its stats build, the same flags and environment."""
    plan = []
    for cell in cells(a):
        for x in cell.arms:
            if x.arm.variant in STATS_VARIANT:
                s = STATS_VARIANT[x.arm.variant]
                arm = dataclasses.replace(x.arm, variant=s)
                plan.append((dict(cell.key, arm=x.name), cell.workload,
                             Resolved(arm, binary(a, s))))
    return plan


def variants(a):
    """The builds the ladder's passes need (B also for bench/ab/nreq)."""
    timed = {"timed", "ir"} & set(a.ladder_passes)
    return ({"B"} | ({LOCKS[x] for x in a.ladder_locks} if timed else set())
            | ({STATS_VARIANT[LOCKS[x]] for x in a.ladder_locks}
               if "stats" in a.ladder_passes else set()))


def arm_cells(a):
    """Arm-cells of the ladder: an arm counts once per cell it runs in."""
    return len(cells(a)) * len(arm_table(a))


def fixed_s(a):
    """Seconds of the ladder that do not depend on its durations: callgrind
    and the stats pass (a server start and its counts, about 3 s each)."""
    n = sum(a.ladder_ir_requests)
    ir = sum(2 * IR_START_S + n * IR_REQUEST_S[c.workload] for c in cells(a) for _ in c.arms)
    stats = len(stats_plan(a)) * 3
    return ir * ("ir" in a.ladder_passes) + stats * ("stats" in a.ladder_passes)


def ladder_pass(a, nreq_bin, tmpdir, out):
    """The ladder's timed cells, callgrind and stats (those of
    a.ladder_passes), into ladder-*.csv."""
    cs = cells(a)
    if "timed" in a.ladder_passes:
        timed_pass(a, cs, nreq_bin, tmpdir, out, a.ladder_warmup, a.ladder_duration, PREFIX)
    if "ir" in a.ladder_passes:
        ir_pass(a, cs, nreq_bin, tmpdir, out, a.ladder_ir_requests, PREFIX)
    if "stats" in a.ladder_passes:
        stats_pass(a, stats_plan(a), nreq_bin, tmpdir, out, a.ladder_stats_requests, PREFIX)


def settings(a):
    return {"workers": a.ladder_workers, "conc": a.ladder_conc, "locks": a.ladder_locks,
            "tcache": a.ladder_tcache, "warmup_s": a.ladder_warmup,
            "duration_s": a.ladder_duration, "ir_requests": a.ladder_ir_requests,
            "stats_requests": a.ladder_stats_requests, "passes": a.ladder_passes,
            "arms": arm_table(a)}
