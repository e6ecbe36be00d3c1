# SPDX-License-Identifier: BSD-2-Clause
# poold.  Everything but main.c is the noinst library libpd so that the Check
# suites can link it.  The two variants differ only in what is linked: with
# --enable-pool, the pool's override and tiers; without, nothing (glibc).

noinst_LTLIBRARIES += src/libpd.la
src_libpd_la_SOURCES = \
	src/poold.h src/config.c src/log.c src/alloc.c src/master.c \
	src/worker.c src/conn.c src/http.c src/response.c src/routes.c \
	src/heavy.h src/heavy.c src/srvstats.c src/region.h src/region.c
src_libpd_la_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS)
src_libpd_la_LIBADD = $(LIBEVENT_LIBS) $(HTTP_PARSER_LIBS)

bin_PROGRAMS += src/poold
src_poold_SOURCES = src/main.c
src_poold_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS)
src_poold_LDADD = src/libpd.la
# -z now: the master resolves every symbol before it forks, so that no
# worker writes its own copy of the GOT (and of what lazy binding touches
# in the dynamic linker) at its first call of each function; in both
# variants, so that they differ only in the allocator.
src_poold_LDFLAGS = $(AM_LDFLAGS) -Wl,-z,now
if ENABLE_POOL
# The weak references in src/alloc.c do not pull archive members by
# themselves; --undefined makes the linker take every pool entry point the
# server calls, whichever archive member defines it.  The pool's script
# gives its tables pages of their own (shm/libshmpool.ld).
src_poold_LDADD += shm/libshmpool_override_exec.la shm/libshmpool_core_exec.la
src_poold_LDFLAGS += -Wl,--undefined=malloc,--undefined=pool_create,--undefined=pool_attach,--undefined=pool_name,--undefined=pool_stats_json \
	$(POOL_LD_SCRIPT)
EXTRA_src_poold_DEPENDENCIES = shm/libshmpool.ld
endif
