# SPDX-License-Identifier: BSD-2-Clause
# Benchmarks are built by `make` but never run by `make check`; one folder
# per harness, each described in bench/README.md and its own --help.
include bench/poolbench/local.mk

# ab: the server A/B harness.  nreq sends an exact number of requests, so
# that server-side CPU time, instructions and page faults can be divided by it.
noinst_PROGRAMS += bench/ab/nreq
bench_ab_nreq_SOURCES = bench/ab/nreq.c
EXTRA_DIST += bench/ab/ab bench/ab/ab-wrk.lua bench/ab/ab-plot.gp
EXTRA_DIST += bench/ab/ablib/__init__.py bench/ab/ablib/arms.py bench/ab/ablib/callgrind.py \
	bench/ab/ablib/cells.py bench/ab/ablib/common.py bench/ab/ablib/footprint.py \
	bench/ab/ablib/ladder.py bench/ab/ablib/meta.py bench/ab/ablib/passes.py \
	bench/ab/ablib/plots.py bench/ab/ablib/report.py bench/ab/ablib/servers.py

# prefork: nginx, PostgreSQL, Apache, gunicorn (on its WSGI app) and Redis on every allocator.
EXTRA_DIST += bench/prefork/prefork bench/prefork/wsgiapp.py

# kill-soak: SIGKILLs workers under wrk load and reports what recovery costs.
EXTRA_DIST += bench/kill-soak/kill-soak bench/kill-soak/kill-soak.lua

# admit: whether a fresh client gets in while poold (or nginx) is at its
# connection cap under wrk or idle connections.
EXTRA_DIST += bench/admit/admit

# probes: one cost each, for the report's model of what this machine cannot
# run.  faultcost: a minor page fault, private against shared memory.
noinst_PROGRAMS += bench/probes/faultcost
bench_probes_faultcost_SOURCES = bench/probes/faultcost.c bench/probes/probe.h

# linetrip: a cache line's round trip between two CPUs, which on a virtual
# machine moves as the host moves its CPUs (bench/poolbench/rounds.sh prints it).
noinst_PROGRAMS += bench/probes/linetrip
bench_probes_linetrip_SOURCES = bench/probes/linetrip.c bench/probes/probe.h

# futexwake: a lock handoff between processes on a process-shared futex and
# robust mutex, against threads on a private one (the report's model).
noinst_PROGRAMS += bench/probes/futexwake
bench_probes_futexwake_SOURCES = bench/probes/futexwake.c bench/probes/probe.h

# forkcost: what fork() costs an attached process per MiB of arena in use
# (the child's private copy), against glibc's copy-on-write.
noinst_PROGRAMS += bench/probes/forkcost
bench_probes_forkcost_SOURCES = bench/probes/forkcost.c bench/probes/probe.h
bench_probes_forkcost_LDADD = shm/libshmpool_core.la

EXTRA_DIST += bench/README.md

# bench/REPORT.md is generated from bench/report.in.md and bench/results/ by
# bench/report; `make report` regenerates it and its plots, and `make check`
# fails when the committed page is not what the command makes.
EXTRA_DIST += bench/report bench/report.in.md bench/REPORT.md bench/results \
	bench/poolbench/median-of-passes
TESTS += tests/report.sh
EXTRA_DIST += tests/report.sh

report:
	$(top_srcdir)/bench/report
.PHONY: report
