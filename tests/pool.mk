# ---------------------------------------------------------------------------
# libshmpool unit tests: tests/check_pool, linked with the tiers only (no
# override), so Check's own allocations never run through the pool.
# ---------------------------------------------------------------------------
check_PROGRAMS += tests/check_pool
TESTS += tests/check_pool
tests_check_pool_SOURCES = \
	tests/check_pool_main.c tests/pool_fixtures.c tests/check_pool.h tests/spawn.c tests/spawn.h \
	tests/check_sizeclass.c tests/check_pagemap.c tests/check_pageheap.c \
	tests/check_central.c tests/check_tcache.c tests/check_journal.c tests/check_lock.c \
	tests/check_libc.c
tests_check_pool_CFLAGS = $(TEST_CFLAGS)
tests_check_pool_LDADD = shm/libshmpool_core.la $(CHECK_LIBS)
# --- end of the libshmpool unit tests ---------------------------------------

# ---------------------------------------------------------------------------
# The pool's contract, stress, fork and preload tests:
#   tests/check_override  malloc & co. with the override linked (malloc IS
#                         the pool), private and attached
#   check_stress.c, check_fork.c
#                         suites of tests/check_pool, calling pool_* directly
#   tests/preload.sh      ordinary programs under LD_PRELOAD=libshmpool.so,
#                         and tests/prefork under SHMPOOL_MODE=children
#   tests/reapretry.sh    a wait's reap left pending by a stuck lock holder,
#                         retried until done (tests/reapretry)
#   tests/isolation.sh    a double free, an interior free and forged links
#                         abort the culprit, another process's blocks intact
#                         (tests/isolation)
#   tests/waitstopped.sh  waits that return while a child sleeps stopped in
#                         the page-heap lock (tests/waitstopped)
#   tests/foreign.sh      programs linked to jemalloc, mimalloc, tcmalloc
#                         (tests/foreign_*, built where configure found the
#                         library) under the preload, in every mode
# ---------------------------------------------------------------------------
check_PROGRAMS += tests/check_override tests/prefork tests/reapretry tests/isolation \
	tests/waitstopped
TESTS += tests/check_override tests/preload.sh tests/stat.sh tests/reapretry.sh \
	tests/isolation.sh tests/waitstopped.sh
EXTRA_DIST += tests/preload.sh tests/stat.sh tests/reapretry.sh tests/isolation.sh \
	tests/waitstopped.sh
tests_check_pool_SOURCES += tests/check_stress.c tests/check_fork.c tests/pattern.h
tests_check_pool_SOURCES += tests/check_lifecycle.c
tests_check_override_SOURCES = tests/check_override.c tests/pattern.h
# -fno-builtin: the compiler must neither fold impossible requests nor drop
# malloc/free pairs it can see.
tests_check_override_CFLAGS = $(TEST_CFLAGS) -fno-builtin
tests_check_override_LDADD = shm/libshmpool_override.la shm/libshmpool_core.la $(CHECK_LIBS)
tests_prefork_SOURCES = tests/prefork.c tests/pattern.h tests/preloaded.h
TESTS += tests/foreign.sh
EXTRA_DIST += tests/foreign.sh
if HAVE_JEMALLOC
check_PROGRAMS += tests/foreign_jemalloc
endif
if HAVE_MIMALLOC
check_PROGRAMS += tests/foreign_mimalloc
endif
if HAVE_TCMALLOC
check_PROGRAMS += tests/foreign_tcmalloc
endif
# -fno-builtin: the compiler must not drop the malloc/free pairs it sees.
tests_foreign_jemalloc_SOURCES = tests/foreign.c
tests_foreign_jemalloc_CFLAGS = $(AM_CFLAGS) -fno-builtin -DFOREIGN_JEMALLOC
tests_foreign_jemalloc_LDADD = -ljemalloc -ldl
tests_foreign_mimalloc_SOURCES = tests/foreign.c
tests_foreign_mimalloc_CFLAGS = $(AM_CFLAGS) -fno-builtin -DFOREIGN_MIMALLOC
tests_foreign_mimalloc_LDADD = -lmimalloc -ldl
tests_foreign_tcmalloc_SOURCES = tests/foreign.c
tests_foreign_tcmalloc_CFLAGS = $(AM_CFLAGS) -fno-builtin -DFOREIGN_TCMALLOC
tests_foreign_tcmalloc_LDADD = -ltcmalloc_minimal -ldl
tests_reapretry_SOURCES = tests/reapretry.c tests/preloaded.h
tests_isolation_SOURCES = tests/isolation.c tests/pattern.h tests/preloaded.h
tests_isolation_CFLAGS = $(TEST_CFLAGS) -fno-builtin
tests_waitstopped_SOURCES = tests/waitstopped.c tests/preloaded.h
# --- end of the contract, stress, fork and preload tests --------------------

# Crash safety, in a program of its own: processes killed anywhere or at
# crash points (debug builds), then reaped, and lock holders dead in their
# operations.  A build with spin locks has no recovery and reports a skip
# (exit 77) rather than nothing.
check_PROGRAMS += tests/check_crashpoints
TESTS += tests/check_crashpoints
tests_check_crashpoints_SOURCES = tests/check_crashpoints_main.c tests/pool_fixtures.c \
	tests/spawn.c tests/spawn.h \
	tests/check_pool.h tests/check_crash.c tests/check_recovery.c tests/pattern.h
tests_check_crashpoints_CFLAGS = $(TEST_CFLAGS)
tests_check_crashpoints_LDADD = shm/libshmpool_core.la $(CHECK_LIBS)

# The crash fuzzer: every crash point on heaps of real shapes (debug builds;
# it reports itself skipped elsewhere).  make check runs its bounded pass.
check_PROGRAMS += tests/crashfuzz
TESTS += tests/crashfuzz tests/crashpoints.sh
EXTRA_DIST += tests/crashpoints.sh
tests_crashfuzz_SOURCES = tests/crashfuzz.c tests/pattern.h tests/spawn.c tests/spawn.h
tests_crashfuzz_CFLAGS = $(AM_CFLAGS)
tests_crashfuzz_LDADD = shm/libshmpool_core.la
