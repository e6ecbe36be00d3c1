# SPDX-License-Identifier: BSD-2-Clause
# ---------------------------------------------------------------------------
# Real programs on libshmpool.so under LD_PRELOAD and SHMPOOL_MODE=children
# (issue 13): Debian's nginx, PostgreSQL 15 and Apache 2.4 prefork, started
# by the tests on loopback ports or sockets in temporary directories, bash
# and Python, the fork contract (tests/programs/forkcontract.c), and Redis
# 7, which brings jemalloc (issue 25), in process and children modes.
#
# Only in builds configured with --enable-debug: they assert the heap
# checker's verdict, which only those builds have; and the library they
# preload is otherwise the same in the glibc and pool variants, so running
# them there would test one Release library twice for about three more
# minutes each.  Packages: scripts/deps-debian.sh; a test whose package is
# missing exits 77 (SKIP) and says so.
# ---------------------------------------------------------------------------
SERVER_TESTS = tests/servers/fork.sh tests/servers/shells.sh tests/servers/nginx.sh \
	tests/servers/postgres.sh tests/servers/apache.sh tests/servers/redis.sh
EXTRA_DIST += tests/servers/lib.sh $(SERVER_TESTS)
if POOL_DEBUG
check_PROGRAMS += tests/forkcontract
TESTS += $(SERVER_TESTS)
endif
tests_forkcontract_SOURCES = tests/programs/forkcontract.c tests/programs/pattern.h \
	tests/programs/preloaded.h
# --- end of the real-program tests ------------------------------------------
