# SPDX-License-Identifier: BSD-2-Clause
# poolbench, the allocator micro-benchmark.  Built by `make`, run by hand,
# never by `make check`.  It links the pool's tiers without the override:
# its `malloc` is whatever the process has (glibc, or an allocator under
# LD_PRELOAD) and its `pool` is called directly.

noinst_PROGRAMS += bench/poolbench/poolbench
# src/region.c, the server's per-request region, is compiled in as the region
# arm, and src/heavy.c, /heavy's map, as the heavy workload's source of
# sizes: they need nothing but the C library.
bench_poolbench_poolbench_SOURCES = bench/poolbench/poolbench.c \
	bench/poolbench/pb-workloads.c bench/poolbench/poolbench.h \
	src/region.c src/region.h src/heavy.c src/heavy.h
bench_poolbench_poolbench_LDADD = shm/libshmpool_core_exec.la
EXTRA_DIST += bench/poolbench/callgrind.sh bench/poolbench/poolbench-all.sh \
	bench/poolbench/peers.sh bench/poolbench/rounds.sh
