/* SPDX-License-Identifier: BSD-2-Clause */
/* The arena and its page map: layout, attach checks, and the class and span
 * entries that free() reads. */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_pool.h"
#include "spawn.h"
#include "pool-internal.h"
#include "prim/prim.h"

START_TEST(test_small_object_pages)
{
    pool_arena_t *a = &pool_arena_;
    test_own_classes();
    void *p = pool_malloc(100);
    ck_assert_ptr_nonnull(p);
    ck_assert(pool_owns(p));
    ck_assert_uint_eq((uintptr_t)p % 16, 0);
    uint32_t page = pool_pagemap_page_(a, p);
    ck_assert_uint_ne(page, POOL_NIL);
    ck_assert_uint_eq(a->pm_class[page], pool_sizeclass_of(100));
    pool_span_sh_t *s = pool_pagemap_span_(a, p);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(s->state, POOL_SPAN_SMALL);
    ck_assert_uint_eq(s->cls, pool_sizeclass_of(100));
    ck_assert((char *)p >= (char *)pool_span_addr(a, s));
    ck_assert((char *)p < (char *)pool_span_addr(a, s) + ((size_t)s->npages << POOL_PAGE_SHIFT));
    ck_assert_uint_eq(pool_usable_size(p), 112);
    pool_free(p);
    pool_test_assert_consistent();
}
END_TEST

START_TEST(test_big_span_pages)
{
    pool_arena_t *a = &pool_arena_;
    size_t size = (1u << 20) + 1;
    char *p = pool_malloc(size);
    ck_assert_ptr_nonnull(p);
    ck_assert(pool_owns(p));
    uint32_t first = pool_pagemap_page_(a, p), n = (uint32_t)(size / POOL_PAGE_SIZE + 1);
    for (uint32_t i = 0; i < n; i++) {
        ck_assert_uint_eq(a->pm_class[first + i], 0);
        ck_assert_uint_eq(a->pm_span[first + i], first);
    }
    ck_assert_uint_eq(a->spans[first].state, POOL_SPAN_BIG);
    ck_assert_uint_eq(a->spans[first].npages, n);
    ck_assert_uint_eq(pool_usable_size(p), (size_t)n * POOL_PAGE_SIZE);
    memset(p, 0xab, size);
    pool_test_assert_consistent();
    pool_free(p);
    ck_assert_uint_eq(a->spans[first].state, POOL_SPAN_FREE);
    pool_test_assert_consistent();
}
END_TEST

START_TEST(test_outside_pointers)
{
    pool_arena_t *a = &pool_arena_;
    int local = 0;
    ck_assert(!pool_owns(&local));
    ck_assert(!pool_owns(NULL));
    ck_assert_uint_eq(pool_pagemap_page_(a, &local), POOL_NIL);
    ck_assert_ptr_null(pool_pagemap_span_(a, &local));
    /* The last data page is inside, one byte past it is not. */
    ck_assert(pool_owns((void *)(a->data + a->data_size - 1)));
    ck_assert(!pool_owns((void *)(a->data + a->data_size)));
}
END_TEST

START_TEST(test_layout)
{
    pool_arena_t *a = &pool_arena_;
    pool_header_sh_t *h = a->hdr;
    ck_assert_uint_eq(h->magic, POOL_MAGIC);
    ck_assert_uint_eq(h->base, (uintptr_t)h);
    ck_assert_uint_eq(h->page_shift, POOL_PAGE_SHIFT);
    ck_assert_uint_ge(h->size, POOL_TEST_HEAP);
    ck_assert_uint_eq(a->data % POOL_PAGE_SIZE, 0);
    ck_assert_uint_le(a->data + a->data_size, (uintptr_t)h + h->size);
    ck_assert_uint_eq((uintptr_t)a->central % 64, 0);
    ck_assert_uint_eq(sizeof(pool_central_sh_t), 64);
    /* Data pages are most of the arena: each 8 KiB page costs a span
     * descriptor (larger in debug builds), its page-map entries and a row
     * in every tier of owner tags (960 bytes), about 12 %, on top of the
     * fixed header.  Only the rows of pages in use are ever touched. */
    ck_assert_uint_ge(a->data_size, h->size / 100 * 80);
}
END_TEST

START_TEST(test_create_errors)
{
    ck_assert_int_eq(pool_create(POOL_TEST_HEAP), EEXIST);
    pool_destroy_();
    ck_assert_int_eq(pool_attach(), ENOENT);
    ck_assert_int_eq(pool_create(pool_min_heap_size() - 1), EINVAL);
    /* poold --heap-size's range (src/config.c): 4M to 16384G. */
    ck_assert_uint_le(pool_min_heap_size(), (size_t)4 << 20);
    ck_assert_int_eq(pool_create(((size_t)1 << 44) + POOL_PAGE_SIZE), EINVAL);
    ck_assert_int_eq(pool_create(pool_min_heap_size()), 0);
    ck_assert_int_eq(pool_attach(), 0);
    ck_assert_int_eq(pool_attach(), EALREADY);
    ck_assert(pool_attached());
    ck_assert_int_ge(pool_slot(), 0);
    ck_assert_str_eq(pool_name(), "shmpool");
}
END_TEST

/* Free huge pages of 2 MiB, from /proc/meminfo. */
static long free_huge_pages(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    long n = 0;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "HugePages_Free: %ld", &n) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return n;
}

/* Fork a child whose standard error goes to a pipe; in the parent, *rd is
 * the pipe's read end. */
static pid_t fork_to_pipe(int *rd)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        return 0;
    }
    close(fds[1]);
    *rd = fds[0];
    return pid;
}

/* What the child said on the pipe, NUL-terminated; its length (< 1 when
 * nothing). */
static ssize_t read_said(int rd, char *buf, size_t cap)
{
    ssize_t n = read(rd, buf, cap - 1);
    close(rd);
    buf[n > 0 ? n : 0] = '\0';
    return n;
}

/* Whether the mapping that holds p asked for transparent huge pages (the
 * "hg" of its VmFlags), whatever the system then gives: 1 or 0, and -1
 * when smaps cannot be read, which no caller takes for either. */
static int asks_huge(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "re");
    char line[512];
    bool in = false, hg = false;
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long lo, hi;
        /* A mapping's line starts with its range in lowercase hex, a
         * field's with its capitalised name. */
        if (line[strspn(line, "0123456789abcdef")] == '-' &&
            sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (in && strncmp(line, "VmFlags:", 8) == 0)
            hg = strstr(line, " hg") != NULL;
    }
    fclose(f);
    return hg;
}

/* Huge pages are asked for from POOL_THP_FROM bytes of data on, from a huge
 * page's boundary, and not at all in an arena that ends before. */
START_TEST(test_huge_from)
{
    for (size_t mib = 4; mib <= 1024; mib *= 2) {
        pool_layout_sh_t l;
        uint64_t size = (uint64_t)mib << 20;
        memset(&l, 0, sizeof l);
        l.off_data = size / 16;
        uint64_t from = pool_arena_huge_from_(&l, size);
        if (l.off_data + POOL_THP_FROM + POOL_HUGE_PAGE <= size) {
            ck_assert_uint_eq(from % POOL_HUGE_PAGE, 0);
            ck_assert_uint_ge(from, l.off_data + POOL_THP_FROM);
            ck_assert_uint_lt(from, l.off_data + POOL_THP_FROM + POOL_HUGE_PAGE);
        } else {
            ck_assert(from == size ||
                      (from % POOL_HUGE_PAGE == 0 && from >= l.off_data + POOL_THP_FROM));
        }
    }
    pool_layout_sh_t l = { .off_data = 1 << 20 };
    ck_assert_uint_eq(pool_arena_huge_from_(&l, 8 << 20), 8 << 20);
}
END_TEST

/* SHMPOOL_HUGEPAGES gives the arena what the system can give, and says on
 * one line when it cannot: each setting in a child of its own, whose
 * arena must then work.  With thp, the first POOL_THP_FROM bytes of data
 * and the metadata before them do not ask, and what follows does. */
static void arena_made_of(const char *setting, uint32_t want, bool says)
{
    int rd;
    pid_t pid = fork_to_pipe(&rd);
    if (pid == 0) {
        pool_destroy_();
        setenv("SHMPOOL_HUGEPAGES", setting, 1);
        if (pool_create((size_t)64 << 20) != 0 || pool_attach() != 0)
            _exit(1);
        if (pool_arena_.hdr->backing != want)
            _exit(2);
        uint64_t from = pool_arena_huge_from_(&pool_arena_.hdr->layout, pool_arena_.hdr->size);
        int thp = want == POOL_BACKING_THP;
        if (asks_huge((void *)pool_arena_.data) != 0 ||
            asks_huge((char *)pool_arena_.hdr + from) != thp)
            _exit(4);
        void *p = pool_malloc(3 << 20);
        memset(p, 1, 3 << 20);
        pool_free(p);
        char msg[256];
        _exit(pool_check(msg, sizeof msg) == 0 ? 0 : 3);
    }
    char buf[512];
    read_said(rd, buf, sizeof buf);
    int status = pool_test_wait(pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "SHMPOOL_HUGEPAGES=%s: status %#x (2: made of %u expected; 4: huge pages "
                  "asked for where they should not be, or not where they should)",
                  setting, status, want);
    ck_assert_msg(says == (strstr(buf, "SHMPOOL_HUGEPAGES") != NULL),
                  "SHMPOOL_HUGEPAGES=%s: said '%s'", setting, buf);
}

START_TEST(test_arena_backing)
{
    arena_made_of("off", POOL_BACKING_PAGES, false);
    arena_made_of("lots", POOL_BACKING_PAGES, true);
    bool thp = pool_prim_thp_(true);
    arena_made_of("thp", thp ? POOL_BACKING_THP : POOL_BACKING_PAGES, !thp);
    bool huge = free_huge_pages() >= 32;
    arena_made_of("hugetlb", huge ? POOL_BACKING_HUGETLB : POOL_BACKING_PAGES, !huge);
}
END_TEST

/* Attach with a damaged header field; expect EPROTO and a message.  The
 * header is shared with the child, so the parent puts the field back. */
static void attach_with(uint64_t *field, uint64_t value)
{
    uint64_t saved = *field;
    int rd;
    pid_t pid = fork_to_pipe(&rd);
    if (pid == 0) {
        *field = value;
        _exit(pool_attach() == EPROTO ? 0 : 1);
    }
    char buf[512];
    ssize_t n = read_said(rd, buf, sizeof buf);
    int status;
    waitpid(pid, &status, 0);
    *field = saved;
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "attach did not fail with EPROTO");
    ck_assert_int_gt(n, 0);
    ck_assert_msg(strstr(buf, "cannot attach") && strstr(buf, "version"), "message: %s", buf);
}

START_TEST(test_attach_rejects_bad_header)
{
    pool_header_sh_t *h = pool_arena_.hdr;
    attach_with((uint64_t *)&h->version, h->version + 1); /* version and page shift word */
    attach_with(&h->magic, 12345);
    attach_with((uint64_t *)&h->base, h->base + POOL_PAGE_SIZE);
    /* The header itself is intact: attach works here. */
    ck_assert_int_eq(pool_attach(), 0);
}
END_TEST

START_TEST(test_children_attach_own_slots)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (pool_attach() != 0 || pool_slot() < 0)
            _exit(1);
        void *p = pool_malloc(64);
        _exit(pool_owns(p) ? 0 : 2);
    }
    int status;
    waitpid(pid, &status, 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    /* The master stays private. */
    void *q = pool_malloc(64);
    ck_assert(!pool_owns(q));
    pool_free(q);
    ck_assert(!pool_attached());
    ck_assert_int_eq(pool_slot(), -1);
}
END_TEST

Suite *make_pagemap_suite(void)
{
    Suite *s = suite_create("pagemap");
    TCase *tc = tcase_create("map");
    tcase_add_checked_fixture(tc, pool_test_create_attach, pool_test_destroy);
    tcase_add_test(tc, test_small_object_pages);
    tcase_add_test(tc, test_big_span_pages);
    tcase_add_test(tc, test_outside_pointers);
    tcase_add_test(tc, test_layout);
    tcase_add_test(tc, test_create_errors);
    suite_add_tcase(s, tc);

    tc = tcase_create("attach");
    tcase_add_checked_fixture(tc, pool_test_create, pool_test_destroy);
    tcase_add_test(tc, test_attach_rejects_bad_header);
    tcase_add_test(tc, test_arena_backing);
    tcase_add_test(tc, test_huge_from);
    tcase_add_test(tc, test_children_attach_own_slots);
    tcase_set_timeout(tc, 20);
    suite_add_tcase(s, tc);
    return s;
}
