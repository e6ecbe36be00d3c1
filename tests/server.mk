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
