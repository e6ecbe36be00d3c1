# SPDX-License-Identifier: BSD-2-Clause
"""Callgrind's output: a worker's total instructions, its self cost per
function, and which functions belong to the allocator or to the region."""

import re

from .common import AbError, run

ANNOTATE_LINE = re.compile(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(\S.*?)(?:\s+\[(.*)\])?$")
MALLOC_API = {"malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign",
              "aligned_alloc", "memalign", "valloc", "pvalloc", "malloc_usable_size",
              "cfree", "operator new", "operator delete"}


def allocator_code(fn):
    """True when a row of ir-functions.csv belongs to a malloc
    implementation: glibc's malloc sources, the pool's sources, a preloaded
    allocator's object, or a malloc entry point whose object valgrind could
    not name (tcmalloc's, here)."""
    path, obj = fn["file"], fn["object"]
    # Source paths are relative to where the build ran: "../../../shm/x.c"
    # in bench/build/A, "shm/x.c" in a build directory outside the tree.
    path = "/" + path
    if "/malloc/malloc.c" in path or "/malloc/arena.c" in path or "/shm/" in path:
        return True
    if any(x in path + obj for x in ("jemalloc", "tcmalloc", "mimalloc")):
        return True
    return obj == "???" and fn["function"] in MALLOC_API


def region_code(fn):
    """True when a row of ir-functions.csv is the region's own out-of-line
    code (its bump is inlined into the handler and counted there)."""
    return fn["file"].endswith("src/region.c") or fn["function"].startswith("pd_region_")


def ir_split(fn_rows, key=lambda r: (r["workload"], r["arm"])):
    """Per cell and arm (key of a row, by default (workload, arm)):
    instructions per request in the allocator and in the region's
    out-of-line code."""
    alloc_ir, region_ir = {}, {}
    for r in fn_rows:
        k = key(r)
        if allocator_code(r):
            alloc_ir[k] = alloc_ir.get(k, 0.0) + float(r["ir_per_req"])
        elif region_code(r):
            region_ir[k] = region_ir.get(k, 0.0) + float(r["ir_per_req"])
    return alloc_ir, region_ir


def callgrind_functions(path):
    """Self cost per (file, function, object) of one callgrind output."""
    r = run(["callgrind_annotate", "--threshold=100", "--inclusive=no", "--auto=no", path],
            capture_output=True, text=True)
    if r.returncode != 0:
        raise AbError(f"callgrind_annotate {path} failed: {r.stderr.strip()}")
    out, body = {}, False
    for line in r.stdout.splitlines():
        if "file:function" in line:
            body = True
            continue
        if body and out and not line.strip():
            break
        m = ANNOTATE_LINE.match(line) if body else None
        if not m:
            continue
        where, fn = m.group(2).split(":", 1) if ":" in m.group(2) else ("???", m.group(2))
        key = (where, fn, m.group(3) or "")
        out[key] = out.get(key, 0) + int(m.group(1).replace(",", ""))
    return out


def callgrind_total(path):
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise AbError(f"no instruction total in {path}")
