# SPDX-License-Identifier: BSD-2-Clause
# ---------------------------------------------------------------------------
# libshmpool unit tests: tests/check_pool, linked with the tiers only (no
# override), so Check's own allocations never run through the pool.
# ---------------------------------------------------------------------------
check_PROGRAMS += tests/check_pool
TESTS += tests/check_pool
tests_check_pool_SOURCES = \
	tests/pool/check_pool_main.c tests/pool/pool_fixtures.c tests/pool/check_pool.h \
	tests/pool/spawn.c tests/pool/spawn.h tests/pool/check_sizeclass.c \
	tests/pool/check_pagemap.c tests/pool/check_pageheap.c tests/pool/check_central.c \
	tests/pool/check_tcache.c tests/pool/check_journal.c tests/pool/check_lock.c \
	tests/pool/check_libc.c
tests_check_pool_CFLAGS = $(TEST_CFLAGS)
tests_check_pool_LDADD = shm/libshmpool_core.la $(CHECK_LIBS)
# --- end of the libshmpool unit tests ---------------------------------------

# ---------------------------------------------------------------------------
# The pool's contract, stress, fork and preload tests:
#   tests/check_override  malloc & co. with the override linked (malloc IS
#                         the pool), private and attached
#   check_stress.c, check_fork.c
#                         suites of tests/check_pool, calling pool_* directly
#   preload.sh            ordinary programs under LD_PRELOAD=libshmpool.so,
#                         and tests/prefork under SHMPOOL_MODE=children
#   reapretry.sh          a wait's reap left pending by a stuck lock holder,
#                         retried until done (tests/reapretry)
#   isolation.sh          a double free, an interior free and forged links
#                         abort the culprit, another process's blocks intact
#                         (tests/isolation)
#   waitstopped.sh        waits, and an attached child's poll, that return
#                         while a child sleeps stopped in the page-heap
#                         lock (tests/waitstopped)
#   giveback.sh           a quiet preloaded worker gives back what a burst
#                         left, without a call of its own (tests/giveback)
#   givesleep.sh          so does one asleep in epoll_wait (tests/givesleep)
#   giveaccept.sh         and one blocked in accept, which then still takes
#                         a connection (tests/giveaccept)
#   sleeps.sh             the sleeps the library cuts into slices keep their
#                         meaning (tests/sleeps)
#   sleepsignal.sh        and a signal between two slices still ends one
#                         with EINTR (tests/sleepsignal, debug builds)
#   reapempty.sh          a reaped child's blocks leave the classes' budgets
#                         of empty spans (tests/reapempty)
#   libdata.sh            a forked child copies no page of the library's
#                         file data, only of its .bss (tests/libdata)
#   children.sh           the body of waitstopped.sh, giveback.sh,
#                         givesleep.sh, giveaccept.sh, reapempty.sh and
#                         libdata.sh: a
#                         program under SHMPOOL_MODE=children, its verdict
#   foreign.sh            programs linked to jemalloc, mimalloc, tcmalloc
#                         (tests/foreign_*, built where configure found the
#                         library) under the preload, in every mode
# Sources and scripts in tests/pool/, the programs they preload in
# tests/programs/; every program is built as tests/NAME.
# ---------------------------------------------------------------------------
check_PROGRAMS += tests/check_override tests/prefork tests/reapretry tests/isolation \
	tests/waitstopped tests/giveback tests/givesleep tests/giveaccept tests/sleeps \
	tests/sleepsignal tests/reapempty tests/libdata
TESTS += tests/check_override tests/pool/preload.sh tests/pool/stat.sh tests/pool/statread.sh \
	tests/pool/reapretry.sh \
	tests/pool/isolation.sh tests/pool/waitstopped.sh tests/pool/giveback.sh \
	tests/pool/givesleep.sh tests/pool/giveaccept.sh tests/pool/sleeps.sh \
	tests/pool/sleepsignal.sh tests/pool/reapempty.sh tests/pool/libdata.sh
EXTRA_DIST += tests/pool/preload.sh tests/pool/stat.sh tests/pool/statread.sh \
	tests/pool/reapretry.sh \
	tests/pool/isolation.sh tests/pool/waitstopped.sh tests/pool/giveback.sh \
	tests/pool/givesleep.sh tests/pool/giveaccept.sh tests/pool/sleeps.sh \
	tests/pool/sleepsignal.sh tests/pool/reapempty.sh tests/pool/libdata.sh tests/pool/children.sh
tests_check_pool_SOURCES += tests/pool/check_stress.c tests/pool/check_fork.c tests/programs/pattern.h
tests_check_pool_SOURCES += tests/pool/check_lifecycle.c
tests_check_override_SOURCES = tests/pool/check_override.c tests/programs/pattern.h
# -fno-builtin: the compiler must neither fold impossible requests nor drop
# malloc/free pairs it can see.
tests_check_override_CFLAGS = $(TEST_CFLAGS) -fno-builtin
tests_check_override_LDADD = shm/libshmpool_override.la shm/libshmpool_core.la $(CHECK_LIBS)
tests_prefork_SOURCES = tests/programs/prefork.c tests/programs/pattern.h tests/programs/preloaded.h
TESTS += tests/pool/foreign.sh
EXTRA_DIST += tests/pool/foreign.sh
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
tests_foreign_jemalloc_SOURCES = tests/pool/foreign.c
tests_foreign_jemalloc_CFLAGS = $(AM_CFLAGS) -fno-builtin -DFOREIGN_JEMALLOC
tests_foreign_jemalloc_LDADD = -ljemalloc -ldl
tests_foreign_mimalloc_SOURCES = tests/pool/foreign.c
tests_foreign_mimalloc_CFLAGS = $(AM_CFLAGS) -fno-builtin -DFOREIGN_MIMALLOC
tests_foreign_mimalloc_LDADD = -lmimalloc -ldl
tests_foreign_tcmalloc_SOURCES = tests/pool/foreign.c
tests_foreign_tcmalloc_CFLAGS = $(AM_CFLAGS) -fno-builtin -DFOREIGN_TCMALLOC
tests_foreign_tcmalloc_LDADD = -ltcmalloc_minimal -ldl
tests_reapretry_SOURCES = tests/pool/reapretry.c tests/programs/preloaded.h
tests_isolation_SOURCES = tests/pool/isolation.c tests/programs/pattern.h \
	tests/programs/preloaded.h
tests_isolation_CFLAGS = $(TEST_CFLAGS) -fno-builtin
tests_waitstopped_SOURCES = tests/pool/waitstopped.c tests/programs/preloaded.h
tests_reapempty_SOURCES = tests/pool/reapempty.c tests/programs/preloaded.h
tests_libdata_SOURCES = tests/pool/libdata.c tests/programs/preloaded.h
# -fno-builtin: the compiler must not drop the children's malloc/free pairs.
tests_libdata_CFLAGS = $(TEST_CFLAGS) -fno-builtin
tests_giveback_SOURCES = tests/programs/giveback.c tests/programs/preloaded.h
# -fno-builtin: the compiler must not drop the quiet ticks' malloc/free pairs.
tests_giveback_CFLAGS = $(TEST_CFLAGS) -fno-builtin
tests_givesleep_SOURCES = $(tests_giveback_SOURCES)
tests_givesleep_CFLAGS = $(tests_giveback_CFLAGS) -DGIVEBACK_SLEEP
tests_giveaccept_SOURCES = $(tests_giveback_SOURCES)
tests_giveaccept_CFLAGS = $(tests_giveback_CFLAGS) -DGIVEBACK_ACCEPT
tests_sleeps_SOURCES = tests/programs/sleeps.c tests/programs/preloaded.h
# -fno-builtin: the compiler must not drop the cache's malloc/free pairs.
tests_sleeps_CFLAGS = $(TEST_CFLAGS) -fno-builtin
tests_sleepsignal_SOURCES = tests/pool/sleepsignal.c tests/programs/preloaded.h
# -fno-builtin: the compiler must not drop the cache's malloc/free pairs.
tests_sleepsignal_CFLAGS = $(TEST_CFLAGS) -fno-builtin
# --- end of the contract, stress, fork and preload tests --------------------

# Crash safety, in a program of its own: processes killed anywhere or at
# crash points (debug builds), then reaped, and lock holders dead in their
# operations.  A build with spin locks has no recovery and reports a skip
# (exit 77) rather than nothing.
check_PROGRAMS += tests/check_crashpoints
TESTS += tests/check_crashpoints
tests_check_crashpoints_SOURCES = tests/pool/check_crashpoints_main.c tests/pool/pool_fixtures.c \
	tests/pool/spawn.c tests/pool/spawn.h \
	tests/pool/check_pool.h tests/pool/check_crash.c tests/pool/check_recovery.c tests/programs/pattern.h
tests_check_crashpoints_CFLAGS = $(TEST_CFLAGS)
tests_check_crashpoints_LDADD = shm/libshmpool_core.la $(CHECK_LIBS)

# The crash fuzzer: every crash point on heaps of real shapes (debug builds;
# it reports itself skipped elsewhere).  make check runs its bounded pass.
check_PROGRAMS += tests/crashfuzz
TESTS += tests/crashfuzz tests/pool/crashpoints.sh
EXTRA_DIST += tests/pool/crashpoints.sh
tests_crashfuzz_SOURCES = tests/pool/crashfuzz.c tests/programs/pattern.h tests/pool/spawn.c \
	tests/pool/spawn.h
tests_crashfuzz_CFLAGS = $(AM_CFLAGS)
tests_crashfuzz_LDADD = shm/libshmpool_core.la
