# SPDX-License-Identifier: BSD-2-Clause
# libshmpool.  The tiers are a noinst convenience library so that unit tests
# can link them without override.c (Check's own mallocs must not run through
# the code under test).  override.c is a second convenience library; the two
# together are libshmpool.so, installed for LD_PRELOAD, and poold
# --enable-pool links the same two archives statically.

POOL_CFLAGS = $(AM_CFLAGS) -ftls-model=initial-exec -fno-builtin-malloc -fvisibility=hidden

noinst_LTLIBRARIES += shm/libshmpool_core.la shm/libshmpool_override.la
shm_libshmpool_core_la_SOURCES = \
	shm/shmpool.h shm/pool-types.h shm/pool-internal.h \
	shm/prim/prim.h shm/prim/linux.c \
	shm/sizeclass.c shm/pagemap.c shm/pageheap.c shm/central.c \
	shm/alloc.h shm/alloc.c shm/tcache.c shm/arena.c shm/proc.c \
	shm/lock.c shm/lockset.c shm/journal.c shm/crashpoint.c shm/reap.c shm/owner.c \
	shm/stats.c shm/heapcheck.c \
	shm/libc.c
shm_libshmpool_core_la_CFLAGS = $(POOL_CFLAGS)

shm_libshmpool_override_la_SOURCES = shm/override.c
shm_libshmpool_override_la_CFLAGS = $(POOL_CFLAGS)

# The same two, compiled for linking into a program (poold, poolbench):
# there the thread-locals can be local-exec, which takes an instruction off
# each of malloc's and free's fast paths.  Tests link the library's own
# build, so they check the code that goes into libshmpool.so.
POOL_EXEC_CFLAGS = $(AM_CFLAGS) -DPOOL_TLS_EXEC -ftls-model=local-exec \
	-fno-builtin-malloc -fvisibility=hidden
noinst_LTLIBRARIES += shm/libshmpool_core_exec.la shm/libshmpool_override_exec.la
shm_libshmpool_core_exec_la_SOURCES = $(shm_libshmpool_core_la_SOURCES)
shm_libshmpool_core_exec_la_CFLAGS = $(POOL_EXEC_CFLAGS)
shm_libshmpool_override_exec_la_SOURCES = $(shm_libshmpool_override_la_SOURCES)
shm_libshmpool_override_exec_la_CFLAGS = $(POOL_EXEC_CFLAGS)

# preload.c (SHMPOOL_MODE and friends), waithook.c (a master that waits for
# a child reaps it) and sleephook.c (a thread that goes idle gives back what
# it holds) are linked only into the .so: poold creates its own
# arena, must not react to those variables, and reaps in its own master.
lib_LTLIBRARIES += shm/libshmpool.la
include_HEADERS = shm/shmpool.h
# `pkg-config --cflags --libs shmpool` for programs that link the library
# (configure writes shm/shmpool.pc from shm/shmpool.pc.in).
pkgconfigdir = $(libdir)/pkgconfig
pkgconfig_DATA = shm/shmpool.pc
shm_libshmpool_la_SOURCES = shm/preload.c shm/waithook.c shm/sleephook.c
shm_libshmpool_la_CFLAGS = $(POOL_CFLAGS)
shm_libshmpool_la_LIBADD = shm/libshmpool_override.la shm/libshmpool_core.la
shm_libshmpool_la_LDFLAGS = -avoid-version -pthread -Wl,-z,now $(POOL_LD_SCRIPT)
EXTRA_shm_libshmpool_la_DEPENDENCIES = shm/libshmpool.ld
EXTRA_DIST += shm/libshmpool.ld

# shmpool-stat: a running program's arena seen from outside, installed with
# the library.  It reads the arena's structures, so it links the tiers.
bin_PROGRAMS += shm/shmpool-stat
shm_shmpool_stat_SOURCES = shm/shmpool-stat.c
shm_shmpool_stat_CFLAGS = $(AM_CFLAGS)
shm_shmpool_stat_LDADD = shm/libshmpool_core.la

# How the allocator works inside (libshmpool(7) keeps the contracts).
EXTRA_DIST += shm/DESIGN.md
