# Benchmarks are built by `make` but never run by `make check`.
include bench/pool.mk

# kill-soak: SIGKILLs workers under wrk load and reports what recovery costs.
EXTRA_DIST += bench/kill-soak bench/kill-soak.lua

# prefork: nginx, PostgreSQL and Apache on every allocator (bench/README.md).
EXTRA_DIST += bench/prefork

# http-edges.py: what a hostile client gets from a running poold, and when.
EXTRA_DIST += bench/http-edges.py

# faultcost: what a minor page fault costs here, for the report's account
# of a shared heap's first touches.
noinst_PROGRAMS += bench/faultcost
bench_faultcost_SOURCES = bench/faultcost.c

# linetrip: a cache line's round trip between two CPUs, which on a virtual
# machine moves as the host moves its CPUs (bench/rounds.sh prints it).
noinst_PROGRAMS += bench/linetrip
bench_linetrip_SOURCES = bench/linetrip.c

# --- bench/ab: the server A/B harness (bench/README.md, section bench/ab) ---
# nreq sends an exact number of requests, so that server-side CPU time,
# instructions and page faults can be divided by it.
noinst_PROGRAMS += bench/nreq
bench_nreq_SOURCES = bench/nreq.c
EXTRA_DIST += bench/ab bench/ab-wrk.lua bench/ab-plot.gp
EXTRA_DIST += bench/ablib/__init__.py bench/ablib/arms.py bench/ablib/callgrind.py \
	bench/ablib/cells.py bench/ablib/common.py bench/ablib/footprint.py bench/ablib/ladder.py \
	bench/ablib/meta.py bench/ablib/passes.py bench/ablib/plots.py \
	bench/ablib/report.py bench/ablib/servers.py
# --- end bench/ab ---

# forkcost: what fork() costs an attached process per MiB of arena in use
# (the child's private copy), against glibc's copy-on-write.
noinst_PROGRAMS += bench/forkcost
bench_forkcost_SOURCES = bench/forkcost.c
bench_forkcost_LDADD = shm/libshmpool_core.la
