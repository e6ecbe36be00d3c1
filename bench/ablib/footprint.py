"""Memory footprint: the whole server's PSS, after each cell of the timed
pass.

A server's footprint is the sum of Pss over its master and workers
(/proc/PID/smaps_rollup).  The kernel divides a page among the processes
that map it, so the sum counts the pool's shared arena once; a page that no
living process maps (one only a dead worker had touched) is in no one's Pss
and escapes it (bench/README.md has the experiment).
"""

# LazyFree is memory an allocator gave back with MADV_FREE: still resident,
# and in Pss, until the kernel needs it, so the report shows it apart.
ROLLUP_KEYS = {"Pss": "pss_kb", "Pss_Anon": "pss_anon_kb", "Pss_Shmem": "pss_shmem_kb",
               "Pss_File": "pss_file_kb", "LazyFree": "lazyfree_kb"}
PSS_FIELDS = list(ROLLUP_KEYS.values())
MEMORY_FIELDS = ["workload", "conc", "arm", "procs"] + PSS_FIELDS


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
