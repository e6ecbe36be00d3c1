# SPDX-License-Identifier: BSD-2-Clause
"""Build variants and arms, and the builds.

A *variant* is one configure line, built once out of tree.  An *arm* is what
one server of a cell is: a variant, an optional LD_PRELOAD, poold's extra
flags and extra environment.  Every dimension the A/B compares is one of
those four -- the allocator is a variant or a preload, request regions a
flag -- so a new dimension (a spin-lock variant, `--threads N` against
`-w N`, a thread-cache size in the environment) is new arms, not new
harness code.  An arm's flags come after the harness's own, and poold takes
the last of a repeated option, so an arm may set its own `-w` (the ladder's
thread arms say `-w 1 --threads N`).
"""

import dataclasses
import os
import subprocess

from .common import TOP, AbError, log, run

VARIANTS = {
    "A": ["--enable-pool"],
    "B": [],
    "S": ["--enable-pool", "--enable-pool-stats"],
    # The contention ladder's spin-lock builds: timed, and for its stats pass.
    "A-spin": ["--enable-pool", "--enable-pool-lock=spin"],
    "S-spin": ["--enable-pool", "--enable-pool-stats", "--enable-pool-lock=spin"],
}

# The stats build of each pool variant: the same pool with its counters.
STATS_VARIANT = {"A": "S", "A-spin": "S-spin"}

# --request-region changes nothing but /heavy: the other routes allocate no
# objects of their own per request, so the region arms run only there.
REGION_WORKLOADS = {"heavy"}


@dataclasses.dataclass(frozen=True)
class Arm:
    name: str
    variant: str                # a key of VARIANTS
    preload: tuple = None       # (Debian package, shared object) for LD_PRELOAD
    flags: tuple = ()           # poold's extra flags
    env: tuple = ()             # (NAME, value) pairs added to poold's environment

    def derive(self, name, flags=(), env=()):
        """This arm with more flags and environment, under another name."""
        return dataclasses.replace(self, name=name, flags=self.flags + tuple(flags),
                                   env=self.env + tuple(env))

    @property
    def threads(self):
        """N of the arm's --threads N, or None: its workers are processes."""
        f = self.flags
        given = [f[i + 1] for i in range(len(f) - 1) if f[i] == "--threads"]
        return int(given[-1]) if given else None     # poold takes the last

    @property
    def plain(self):
        """Whether the arm is an allocator and nothing else: no flags of its own."""
        return not self.flags

    @property
    def region(self):
        return "--request-region" in self.flags

    def runs_on(self, workload):
        """Whether the arm has anything to measure on a workload."""
        return not self.region or workload in REGION_WORKLOADS


_A = Arm("A", "A")
_B = Arm("B", "B")
ARMS = {x.name: x for x in (
    _A, _B,
    Arm("B+jemalloc", "B", ("libjemalloc2", "libjemalloc.so.2")),
    Arm("B+tcmalloc", "B", ("libtcmalloc-minimal4", "libtcmalloc_minimal.so.4")),
    Arm("B+mimalloc", "B", ("libmimalloc2.0", "libmimalloc.so.2")),
    _A.derive("A+region", ["--request-region"]),
    _B.derive("B+region", ["--request-region"]),
)}
DEFAULT_ARMS = "A,B,B+jemalloc,B+tcmalloc,B+mimalloc,A+region,B+region"


@dataclasses.dataclass(frozen=True)
class Resolved:
    """An arm as it runs here: its poold binary and the preload's path."""
    arm: Arm
    binary: str
    preload: str = None

    @property
    def name(self):
        return self.arm.name


def build(a, variants):
    if not os.path.exists(os.path.join(TOP, "configure")):
        raise AbError(f"{TOP}/configure is missing: run autoreconf -fi in {TOP}")
    for v in variants:
        d = os.path.join(a.build_dir, v)
        os.makedirs(d, exist_ok=True)
        logf = os.path.join(d, "ab-build.log")
        with open(logf, "w") as out:
            if not os.path.exists(os.path.join(d, "Makefile")):
                log(f"configuring {v} ({' '.join(VARIANTS[v]) or 'default'}) in {d}")
                r = run([os.path.join(TOP, "configure")] + VARIANTS[v], cwd=d,
                        stdout=out, stderr=subprocess.STDOUT)
                if r.returncode != 0:
                    raise AbError(f"configure of {v} failed, see {logf}")
            targets = ["src/poold"] + (["bench/ab/nreq"] if v == "B" else [])
            r = run(["make", "-j2"] + targets, cwd=d, stdout=out, stderr=subprocess.STDOUT)
            if r.returncode != 0:
                raise AbError(f"make of {v} failed, see {logf}")
    log(f"built {', '.join(variants)} in {a.build_dir}")


def binary(a, variant, program="src/poold"):
    """Path of a program of a variant's build."""
    return os.path.join(a.build_dir, variant, program)


def deb_so(package, name):
    r = run(["dpkg", "-L", package], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    for line in r.stdout.splitlines():
        if line.endswith("/" + name) and os.path.exists(line):
            return line
    return None


def resolve_arms(a):
    """Map each arm of a.arms to its Resolved form, or to a reason it is
    missing."""
    arms, missing = {}, {}
    for name in a.arms:
        arm = ARMS[name]
        if arm.preload is None:
            arms[name] = Resolved(arm, binary(a, arm.variant))
            continue
        pkg, so = arm.preload
        path = deb_so(pkg, so)
        if path is None:
            missing[name] = f"{so} not found (install the Debian package {pkg})"
        else:
            arms[name] = Resolved(arm, binary(a, arm.variant), path)
    return arms, missing


def region_stats(a):
    """Whether the stats pass also counts /heavy with --request-region."""
    return int("heavy" in a.workloads and any(ARMS[x].region for x in a.arms))
