# ---------------------------------------------------------------------------
# libshmpool unit tests: tests/check_pool, linked with the tiers only (no
# override), so Check's own allocations never run through the pool.
# ---------------------------------------------------------------------------
check_PROGRAMS += tests/check_pool
TESTS += tests/check_pool
tests_check_pool_SOURCES = \
	tests/check_pool_main.c tests/check_pool.h \
	tests/check_sizeclass.c tests/check_pagemap.c tests/check_pageheap.c \
	tests/check_central.c tests/check_tcache.c
tests_check_pool_CFLAGS = $(TEST_CFLAGS)
tests_check_pool_LDADD = shm/libshmpool_core.la $(CHECK_LIBS)
# --- end of the libshmpool unit tests ---------------------------------------
