/* SPDX-License-Identifier: BSD-2-Clause */
/* Size classes: the lookup tables against the class table, for every
 * request size up to POOL_MAX_SMALL. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_pool.h"
#include "pool-internal.h"

static void init(void)
{
    pool_sizeclass_init_();
}

/* Plain tests rather than ck_assert in the 256 Ki-iteration loop: each
 * Check assertion records a mark point, which would dominate the run. */
#define require(cond, ...)                                                    \
    do {                                                                      \
        if (!(cond))                                                          \
            ck_abort_msg(__VA_ARGS__);                                        \
    } while (0)

START_TEST(test_every_size_round_trips)
{
    unsigned prev = 1;
    for (size_t size = 1; size <= POOL_MAX_SMALL; size++) {
        unsigned cls = pool_sizeclass_of(size);
        require(cls >= 1 && cls < POOL_NCLASSES, "size %zu: class %u", size, cls);
        size_t csize = pool_classes_[cls].size;
        require(csize >= size, "size %zu: class %u holds only %zu", size, cls, csize);
        require(cls == 1 || pool_classes_[cls - 1].size < size,
                "size %zu: class %u is not the smallest that fits", size, cls);
        require(cls >= prev, "size %zu: class %u after class %u", size, cls, prev);
        if (size <= 128)
            require(csize - size < 16, "size %zu wastes %zu", size, csize - size);
        else
            require((csize - size) * 8 <= csize, "size %zu wastes %zu of %zu", size,
                    csize - size, csize);
        prev = cls;
    }
    ck_assert_uint_eq(prev, POOL_NCLASSES - 1);
    ck_assert_uint_eq(pool_sizeclass_of(POOL_MAX_SMALL + 1), 0);
    ck_assert_uint_eq(pool_sizeclass_of(SIZE_MAX), 0);
    ck_assert_uint_eq(pool_sizeclass_of(0), 1);
}
END_TEST

START_TEST(test_class_geometry)
{
    ck_assert_uint_eq(pool_classes_[0].size, 0);
    ck_assert_uint_eq(pool_classes_[1].size, 16);
    ck_assert_uint_eq(pool_classes_[POOL_NCLASSES - 1].size, POOL_MAX_SMALL);
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++) {
        const pool_class_t *c = &pool_classes_[cls];
        size_t span = (size_t)c->pages * POOL_PAGE_SIZE;
        ck_assert_msg(c->size % 16 == 0, "class %u size %u", cls, c->size);
        ck_assert_msg(cls == 1 || c->size > pool_classes_[cls - 1].size, "class %u", cls);
        ck_assert_msg(c->count >= 1 && c->count <= POOL_MAX_OBJECTS, "class %u count %u", cls,
                      c->count);
        ck_assert_msg((size_t)c->count * c->size <= span, "class %u overflows its span", cls);
        ck_assert_msg((span - (size_t)c->count * c->size) * 16 <= span,
                      "class %u: tail %zu of a %zu-byte span", cls,
                      span - (size_t)c->count * c->size, span);
        ck_assert_msg(c->max_batch >= 1 && c->max_batch <= 128, "class %u batch", cls);
        ck_assert_msg((size_t)c->max_batch * c->size <= (64u << 10) || c->max_batch == 1,
                      "class %u: batch of %u objects exceeds 64 KiB", cls, c->max_batch);
        /* A bin holds 256 KiB of objects, but at least two batches; none
         * of a class over 64 KiB, which keeps no empty span either. */
        uint32_t bin = (256u << 10) / c->size;
        if (c->size > (64u << 10)) {
            ck_assert_msg(c->watermark == 0 && c->watermark_max == 0 && c->keep_empty == 0,
                          "class %u (%u bytes) is kept", cls, c->size);
            continue;
        }
        ck_assert_msg(c->watermark == (bin > 2u * c->max_batch ? bin : 2u * c->max_batch),
                      "class %u: watermark %u for batches of %u", cls, c->watermark,
                      c->max_batch);
        /* A class under 256 bytes borrows 4 KiB of the 256-byte class, one
         * between 256 bytes and 1 KiB 4 KiB of the 1 KiB class; neither
         * lender borrows. */
        const pool_class_t *l = &pool_classes_[c->light_class];
        if (c->size < 1024 && c->size != 256) {
            ck_assert_msg(l->size == (c->size < 256 ? 256u : 1024u),
                          "class %u borrows from %u bytes", cls, l->size);
            ck_assert_msg((size_t)c->light_max * l->size == 4096 && l->light_max == 0,
                          "class %u borrows %u", cls, c->light_max);
        } else {
            ck_assert_msg(c->light_class == cls && c->light_max == 0, "class %u borrows", cls);
        }
        /* A class keeps 512 KiB of wholly free spans, at least one. */
        ck_assert_msg(c->keep_empty >= 1 &&
                          (c->keep_empty == 1 || (size_t)c->keep_empty * span <= (512u << 10)),
                      "class %u keeps %u empty spans", cls, c->keep_empty);
    }
}
END_TEST

START_TEST(test_aligned_classes)
{
    for (size_t align = 16; align <= POOL_PAGE_SIZE; align *= 2) {
        for (size_t size = 1; size <= 3 * POOL_PAGE_SIZE; size = size * 3 + 1) {
            unsigned cls = pool_sizeclass_aligned_(size, align);
            ck_assert_msg(cls != 0, "size %zu align %zu: no class", size, align);
            ck_assert_msg(pool_classes_[cls].size >= size &&
                              pool_classes_[cls].size % align == 0,
                          "size %zu align %zu: class %u (%u bytes)", size, align, cls,
                          pool_classes_[cls].size);
        }
    }
    /* Nothing above the largest class. */
    ck_assert_uint_eq(pool_sizeclass_aligned_(POOL_MAX_SMALL + 1, 16), 0);
}
END_TEST

/* SHMPOOL_TCACHE shrinks the bins and the batches, read when the table is
 * made, and keeps a bin at its size, where by default a churning bin may
 * grow to four times it; a bad value costs a line and leaves the
 * defaults.  The checked
 * fixture has already made the table in this process, so each setting is
 * read in a child of its own. */
static int table_with(const char *knob)
{
    pid_t pid = fork();
    if (pid == 0) {
        memset(pool_classes_, 0, sizeof pool_classes_);
        setenv("SHMPOOL_TCACHE", knob, 1);
        /* The message of a bad value is not this test's output. */
        if (freopen("/dev/null", "w", stderr) == NULL)
            _exit(9);
        pool_sizeclass_init_();
        const pool_class_t *c16 = &pool_classes_[1], *c8k = &pool_classes_[56];
        bool fixed = c16->watermark_max == c16->watermark && c8k->watermark_max == c8k->watermark;
        if (strcmp(knob, "0,1") == 0)
            _exit(c16->max_batch == 1 && c16->watermark == 2 && c8k->watermark == 2 && fixed
                      ? 0 : 1);
        if (strcmp(knob, "64K,8") == 0)
            _exit(c16->max_batch == 8 && c16->watermark == 4096 && c8k->max_batch == 8 &&
                          c8k->watermark == 16 && fixed ? 0 : 2);
        /* The documented most: a bin of 16-byte objects holds 16 bytes
         * less (its watermark is 16 bits), the others all of it. */
        if (strcmp(knob, "1M") == 0)
            _exit(c16->watermark == UINT16_MAX && pool_classes_[2].watermark == 32768 && fixed
                      ? 0 : 4);
        /* Bad: the defaults, growth included. */
        _exit(c16->max_batch == 128 && c16->watermark == 16384 &&
                      c16->watermark_max == UINT16_MAX && c8k->watermark_max == 4 * c8k->watermark
                  ? 0 : 3);
    }
    return pool_test_wait(pid);
}

START_TEST(test_tcache_knob)
{
    static const char *const knobs[] = { "0,1", "64K,8", "1M", "lots", "64K,0", "64K,200",
                                         "2M", "1025K", "64K,8x" };
    for (unsigned i = 0; i < sizeof knobs / sizeof knobs[0]; i++) {
        int status = table_with(knobs[i]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "SHMPOOL_TCACHE=%s: status %#x", knobs[i], status);
    }
}
END_TEST

Suite *make_sizeclass_suite(void)
{
    Suite *s = suite_create("sizeclass");
    TCase *tc = tcase_create("tables");
    tcase_add_checked_fixture(tc, init, NULL);
    tcase_add_test(tc, test_every_size_round_trips);
    tcase_add_test(tc, test_class_geometry);
    tcase_add_test(tc, test_aligned_classes);
    tcase_add_test(tc, test_tcache_knob);
    suite_add_tcase(s, tc);
    return s;
}
