# SPDX-License-Identifier: BSD-2-Clause
# Tests, in a folder per subject, all run by `make check`:
#   tests/pool/      the pool: its Check suites (tests/check_pool,
#                    tests/check_crashpoints, tests/check_override), the
#                    crash fuzzer and the preload's shell tests
#   tests/poold/     the server: tests/check_poold (unit suites and
#                    end-to-end over sockets) and tests/check_region
#   tests/programs/  programs the tests run under the preload
#   tests/servers/   real servers under the preload (debug builds)
# and here the installed library, the man pages and bench's report.
# Every program is built as tests/NAME, whatever its folder.
# The end-to-end tests find the binaries through the environment below.

AM_TESTS_ENVIRONMENT = \
	POOLD='$(abs_top_builddir)/src/poold'; export POOLD; \
	SHMPOOL_LIB='$(abs_top_builddir)/shm/.libs/libshmpool.so'; export SHMPOOL_LIB; \
	SHMPOOL_STAT='$(abs_top_builddir)/shm/shmpool-stat'; export SHMPOOL_STAT; \
	TESTS_BUILDDIR='$(abs_top_builddir)/tests'; export TESTS_BUILDDIR; \
	top_srcdir='$(abs_top_srcdir)'; export top_srcdir; \
	MANDOC='$(MANDOC)'; export MANDOC; \
	VALGRIND='$(VALGRIND)'; export VALGRIND; \
	CK_DEFAULT_TIMEOUT=60; export CK_DEFAULT_TIMEOUT;

TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(LIBEVENT_CFLAGS)

# make check-unit: the unit suites of this build, in well under a minute --
# the pool's tiers, the server's parsers and the region, without the
# stress, crash and fork suites, the end-to-end tests and the servers.
check-unit: tests/check_pool tests/check_poold tests/check_region
	tests/check_pool --unit
	tests/check_poold --unit
	tests/check_region
.PHONY: check-unit

include tests/poold/local.mk
include tests/pool/local.mk
include tests/servers/local.mk
include tests/install.mk

# http-edges.py: what a hostile client gets from a running poold, and when;
# run by hand (it waits out poold's timeouts, about 25 s).
EXTRA_DIST += tests/poold/http-edges.py
