# SPDX-License-Identifier: BSD-2-Clause
"""Paths, errors, logging and the subprocess and CSV helpers every part of
bench/ab shares."""

import csv
import os
import subprocess
import sys

PROG = "ab"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # bench/ab/
BENCH = os.path.dirname(HERE)
TOP = os.path.dirname(BENCH)


class AbError(Exception):
    """A failure that ends the run with one line on stderr."""


def log(msg):
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, check=False, **kw)


def write_csv(path, rows, fields):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))
