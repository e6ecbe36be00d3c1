# The server's Check program: unit suites and end-to-end tests against the
# real binary ($POOLD).  It links libpd only, never the pool, so the same
# tests run unchanged against either build of poold.
check_PROGRAMS += tests/check_poold
TESTS += tests/check_poold
tests_check_poold_SOURCES = \
	tests/check_poold.h tests/check_main.c tests/check_config.c \
	tests/check_http.c tests/check_routes.c tests/check_e2e.c \
	tests/check_crash_e2e.c
tests_check_poold_CFLAGS = $(TEST_CFLAGS)
tests_check_poold_LDADD = src/libpd.la $(CHECK_LIBS)

# The region allocator, alone: src/region.c compiled in without libpd or
# libevent (as the micro-benchmarks use it), under a counting malloc.
check_PROGRAMS += tests/check_region
TESTS += tests/check_region
tests_check_region_SOURCES = tests/check_region.c src/region.h src/region.c
tests_check_region_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_region_LDADD = $(CHECK_LIBS)
TESTS += tests/region-valgrind.sh
EXTRA_DIST += tests/region-valgrind.sh
