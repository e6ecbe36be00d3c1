# SPDX-License-Identifier: BSD-2-Clause
"""ablib: the parts of bench/ab, the server A/B harness of poold.

bench/ab is the command line; what it runs lives here, one concern a module:

  common.py    paths, errors, logging, subprocess and CSV helpers
  arms.py      build variants, arms (variant + preload + poold flags +
               environment) and the builds themselves
  cells.py     workloads and cells: what one side-by-side comparison is
  servers.py   starting and stopping poold, /stats and /proc, the wrk and
               nreq clients
  callgrind.py reading callgrind's output and attributing instructions to
               the allocator or the region
  passes.py    the timed pass with its fixed counts, the callgrind pass,
               the stats pass
  ladder.py    the contention ladder: N workers as processes against N as
               threads, thread-cache sizes, mutex against spin builds; its
               arms and cells, run by the passes above
  footprint.py the whole server's PSS: after each cell, over time in the
               skewed-burst pass, and against the workers in the scaling pass
  meta.py      machine.json and settings.json: what ran, where, how
  plots.py     the gnuplot PNGs
  report.py    report.md from a results directory
"""
