"""Workloads and cells: what one side-by-side comparison is.

A cell is one workload at one concurrency with the arms that run in it: all
started cold side by side, measured interleaved run by run.  `key` is the
cell's coordinates, the columns that name it in every CSV row it produces;
a new dimension of the ladder is a new coordinate here and a new column
there.
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

    @property
    def key(self):
        return dict(workload=self.workload, conc=self.conc)

    def __str__(self):
        return f"{self.workload} c={self.conc}"


def timed_cells(a, arms):
    """The timed pass's cells: every workload at every concurrency, with the
    arms that have something to measure on it."""
    for workload in a.workloads:
        cell_arms = tuple(x for x in arms.values() if x.arm.runs_on(workload))
        for conc in a.conc:
            yield Cell(workload, conc, cell_arms)
