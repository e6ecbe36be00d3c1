# SPDX-License-Identifier: BSD-2-Clause
"""Workloads and cells: what one side-by-side comparison is.

A cell is one workload at one concurrency with the arms that run in it: all
started cold side by side, measured interleaved run by run.  `key` is the
cell's coordinates, the columns that name it in every CSV row it produces:
the contention ladder's cells (ladder.py) add the number of workers, which
its arms start as processes or as threads.
"""

import dataclasses

# Workload name -> (path, pipelining depth).
WORKLOADS = {
    "plaintext": ("/plaintext", 1),
    "heavy": ("/heavy", 1),
    "pipeline": ("/plaintext", 16),
}

# Requests per cell for the fixed-count CPU figures, full run; --budget
# scales them down.  Chosen so that each takes about a second here, which
# keeps the 10 ms tick of utime+stime below 1 %.
CPU_REQUESTS = {"plaintext": 200000, "heavy": 40000, "pipeline": 1000000}

# Seconds the two callgrind runs of one arm take here at --budget's counts
# (1,000 and 5,000 requests): server start-up under valgrind, then
# /heavy's hundred thousand instructions per request.
IR_ARM_S = {"plaintext": 12, "heavy": 20, "pipeline": 12}


def cpu_requests(a, workload):
    """Requests per fixed count of a workload, --budget's scale applied."""
    return max(1000, int(CPU_REQUESTS[workload] * getattr(a, "cpu_scale", 1.0)))


@dataclasses.dataclass(frozen=True)
class Cell:
    workload: str
    conc: int
    arms: tuple                 # arms.Resolved, in the cell's base order
    workers: int = None         # ladder cells: the N their arms start

    @property
    def key(self):
        key = dict(workload=self.workload, conc=self.conc)
        if self.workers is not None:
            key["workers"] = self.workers
        return key

    def __str__(self):
        return f"{self.workload} c={self.conc}" + (
            f" N={self.workers}" if self.workers is not None else "")


def fields(cells, rest):
    """A CSV's columns: the cells' coordinates, then the pass's own."""
    return list(cells[0].key) + rest if cells else rest


def cell_arms(arms, workload):
    """The arms (arms.Resolved) that have something to measure on a
    workload."""
    return tuple(x for x in arms.values() if x.arm.runs_on(workload))


def timed_cells(a, arms):
    """The timed pass's cells: every workload at every concurrency, with the
    arms that have something to measure on it."""
    return [Cell(workload, conc, cell_arms(arms, workload))
            for workload in a.workloads for conc in a.conc]


def ir_cells(a, arms):
    """The callgrind pass's cells: every workload at --ir-conc."""
    return [Cell(workload, a.ir_conc, cell_arms(arms, workload)) for workload in a.workloads]
