/* SPDX-License-Identifier: BSD-2-Clause */
/* The page heap: carving, splitting, coalescing, big and aligned spans, and
 * giving pages back with MADV_REMOVE. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_pool.h"
#include "../programs/pattern.h"
#include "pool-internal.h"
#include "prim/prim.h"

static uint32_t take(uint32_t npages)
{
    uint32_t s = pool_pageheap_alloc_(&pool_arena_, npages, 1, 0, POOL_NO_SLOT);
    ck_assert_uint_ne(s, POOL_NIL);
    ck_assert_uint_eq(pool_arena_.spans[s].npages, npages);
    return s;
}

START_TEST(test_carve_and_split)
{
    pool_arena_t *a = &pool_arena_;
    uint32_t s10 = take(10);
    uint32_t guard = take(1); /* keeps the top of the arena apart */
    ck_assert_uint_eq(guard, s10 + 10);
    pool_pageheap_free_(a, s10);
    ck_assert_uint_eq(a->ph->free_pages, 10);
    /* 3 pages come from the 10-page span, which splits. */
    uint32_t s3 = take(3);
    ck_assert_uint_eq(s3, s10);
    ck_assert_uint_eq(a->ph->free_pages, 7);
    ck_assert_uint_eq(a->spans[s10 + 3].state, POOL_SPAN_FREE);
    ck_assert_uint_eq(a->spans[s10 + 3].npages, 7);
    ck_assert_uint_eq(a->ph->heads[7], s10 + 3);
    pool_test_assert_consistent();
    pool_pageheap_free_(a, s3);
    pool_pageheap_free_(a, guard);
    pool_test_assert_consistent();
}
END_TEST

START_TEST(test_coalesce_both_sides)
{
    pool_arena_t *a = &pool_arena_;
    uint32_t x = take(4), y = take(4), z = take(4), guard = take(1);
    pool_pageheap_free_(a, x);
    pool_pageheap_free_(a, z);
    ck_assert_uint_eq(a->ph->free_pages, 8);
    pool_test_assert_consistent();
    pool_pageheap_free_(a, y); /* joins both neighbours */
    ck_assert_uint_eq(a->spans[x].state, POOL_SPAN_FREE);
    ck_assert_uint_eq(a->spans[x].npages, 12);
    ck_assert_uint_eq(a->spans[y].state, POOL_SPAN_NONE);
    ck_assert_uint_eq(a->spans[z].state, POOL_SPAN_NONE);
    ck_assert_uint_eq(a->pm_span[x + 11], x);
    pool_test_assert_consistent();
    /* The whole run is reusable at once. */
    ck_assert_uint_eq(take(12), x);
    pool_pageheap_free_(a, x);
    pool_pageheap_free_(a, guard);
    pool_test_assert_consistent();
}
END_TEST

/* A short request takes the lowest free span that holds it, split from
 * its low end, not the one freed last nor the best fit: small spans
 * gather at the bottom of the heap. */
START_TEST(test_short_requests_take_the_lowest)
{
    pool_arena_t *a = &pool_arena_;
    uint32_t low = take(3), g1 = take(1), one = take(1), g2 = take(1);
    uint32_t longer = take(200), g3 = take(1);
    pool_pageheap_free_(a, low);
    pool_pageheap_free_(a, longer);
    pool_pageheap_free_(a, one); /* freed last, and an exact fit */
    ck_assert_uint_eq(take(1), low);
    ck_assert_uint_eq(take(2), low + 1);
    ck_assert_uint_eq(take(2), longer); /* the lowest that holds two */
    ck_assert_uint_eq(take(1), one);
    pool_test_assert_consistent();
    pool_pageheap_free_(a, low);
    pool_pageheap_free_(a, low + 1);
    pool_pageheap_free_(a, one);
    pool_pageheap_free_(a, longer);
    pool_pageheap_free_(a, g1);
    pool_pageheap_free_(a, g2);
    pool_pageheap_free_(a, g3);
    pool_test_assert_consistent();
}
END_TEST

START_TEST(test_long_spans_best_fit)
{
    pool_arena_t *a = &pool_arena_;
    uint32_t big = take(300), g1 = take(1), mid = take(200), g2 = take(1);
    pool_pageheap_free_(a, big);
    pool_pageheap_free_(a, mid);
    /* Both live on the long list; 150 pages come from the 200-page one. */
    ck_assert_uint_eq(take(150), mid);
    ck_assert_uint_eq(take(250), big);
    pool_pageheap_free_(a, g1);
    pool_pageheap_free_(a, g2);
    pool_test_assert_consistent();
}
END_TEST

/* A long block taken from the top free span sits at its top end, so that
 * what stays free joins the span below it when that is freed: the two make
 * one run that a longer request then takes without carving.  At the bottom
 * end the block would part them, and the request would carve. */
START_TEST(test_long_block_keeps_free_pages_whole)
{
    pool_arena_t *a = &pool_arena_;
    uint32_t below = take(200), top = take(300);
    ck_assert_uint_eq(top, below + 200);
    pool_pageheap_free_(a, top);
    uint32_t block = take(150);
    ck_assert_uint_eq(block, top + 150);
    ck_assert_uint_eq(a->spans[top].state, POOL_SPAN_FREE);
    ck_assert_uint_eq(a->spans[top].npages, 150);
    pool_test_assert_consistent();
    pool_pageheap_free_(a, below);
    ck_assert_uint_eq(a->spans[below].npages, 350);
    uint32_t carved = a->ph->carved;
    ck_assert_uint_eq(take(350), below);
    ck_assert_uint_eq(a->ph->carved, carved);
    /* A short request keeps to the bottom of the span it takes. */
    pool_pageheap_free_(a, block);
    uint32_t small = take(10);
    ck_assert_uint_eq(small, block);
    pool_pageheap_free_(a, small);
    pool_pageheap_free_(a, below);
    pool_test_assert_consistent();
}
END_TEST

/* Long requests of two processes (tags A and B): each takes back its own
 * pages first, extends its own span at the top rather than fault a whole
 * block, and carves fresh pages rather than take a span the other still
 * maps, until the arena has none; then it takes the other's. */
static uint32_t take_as(uint32_t npages, uint16_t tag)
{
    uint32_t s = pool_pageheap_alloc_(&pool_arena_, npages, 1, 0, tag);
    ck_assert_uint_ne(s, POOL_NIL);
    ck_assert_uint_eq(pool_arena_.spans[s].npages, npages);
    return s;
}

START_TEST(test_long_requests_keep_to_their_pages)
{
    enum { A = 200, B = 201, C = 202 };
    pool_arena_t *a = &pool_arena_;
    uint32_t x = take_as(300, A), g1 = take(1), n = take(500), g2 = take(1);
    pool_pageheap_free_(a, x);
    pool_pageheap_free_(a, n);
    /* Pages nobody's page tables are known to map (n: untagged) come
     * before fresh ones. */
    ck_assert_uint_eq(take_as(450, B), n);
    pool_pageheap_free_(a, n);
    /* A takes its own back. */
    ck_assert_uint_eq(take_as(200, A), x);
    pool_pageheap_free_(a, x);
    /* A does not take B's 500 pages: it carves. */
    uint32_t z = a->ph->carved;
    ck_assert_uint_eq(take_as(400, A), z);
    pool_pageheap_free_(a, z);
    /* A's span is on top: A asking for more extends it, carving only what
     * it lacks; B asking for as much carves a block of its own. */
    ck_assert_uint_eq(take_as(600, A), z);
    ck_assert_uint_eq(a->ph->carved, z + 600);
    pool_pageheap_free_(a, z);
    ck_assert_uint_eq(take_as(600, B), z + 600);
    pool_pageheap_free_(a, z + 600);
    ck_assert_uint_eq(a->spans[z].npages, 600);
    pool_test_assert_consistent();
    /* C, with nothing of its own free, carves while the arena has pages,
     * then takes the best fit of the others'. */
    uint32_t c = a->ph->carved;
    ck_assert_uint_eq(take_as(300, C), c);
    uint32_t rest = take(a->npages - a->ph->carved);
    ck_assert_uint_eq(take_as(300, C), x);
    pool_pageheap_free_(a, x);
    pool_pageheap_free_(a, c);
    pool_pageheap_free_(a, rest);
    pool_pageheap_free_(a, g1);
    pool_pageheap_free_(a, g2);
    pool_test_assert_consistent();
}
END_TEST

/* A free long span keeps its taker's tag and stays apart from another
 * taker's; shorter big spans, which no request ranks, coalesce whoever
 * took them (apart, their free spans grew frag's arena at 4 processes). */
START_TEST(test_short_big_spans_coalesce_across_takers)
{
    enum { A = 200, B = 201 };
    pool_arena_t *a = &pool_arena_;
    uint32_t x = take_as(10, A), y = take_as(10, B), g1 = take(1);
    uint32_t lx = take_as(200, A), ly = take_as(200, B), g2 = take(1);
    ck_assert_uint_eq(y, x + 10);
    ck_assert_uint_eq(ly, lx + 200);
    pool_pageheap_free_(a, x);
    pool_pageheap_free_(a, y);
    pool_pageheap_free_(a, lx);
    pool_pageheap_free_(a, ly);
    ck_assert_uint_eq(a->spans[x].state, POOL_SPAN_FREE);
    ck_assert_uint_eq(a->spans[x].npages, 20);
    ck_assert_uint_eq(a->spans[lx].npages, 200);
    ck_assert_uint_eq(a->spans[ly].npages, 200);
    pool_test_assert_consistent();
    pool_pageheap_free_(a, g1);
    pool_pageheap_free_(a, g2);
    pool_test_assert_consistent();
}
END_TEST

START_TEST(test_aligned_spans)
{
    pool_arena_t *a = &pool_arena_;
    take(1);
    uint32_t s = pool_pageheap_alloc_(a, 2, 8, 0, POOL_NO_SLOT);
    ck_assert_uint_ne(s, POOL_NIL);
    ck_assert_uint_eq((uintptr_t)pool_span_addr(a, &a->spans[s]) % (8 * POOL_PAGE_SIZE), 0);
    pool_test_assert_consistent();
    for (size_t align = 16; align <= (1u << 20); align *= 4) {
        void *p = pool_memalign(align, 3000);
        ck_assert_ptr_nonnull(p);
        ck_assert(pool_owns(p));
        ck_assert_msg((uintptr_t)p % align == 0, "%p not aligned to %zu", p, align);
        ck_assert_uint_ge(pool_usable_size(p), 3000);
        memset(p, 1, 3000);
        pool_free(p);
    }
    void *q;
    ck_assert_int_eq(pool_posix_memalign(&q, 24, 10), EINVAL);
    ck_assert_int_eq(pool_posix_memalign(&q, 1u << 16, 10), 0);
    ck_assert_uint_eq((uintptr_t)q % (1u << 16), 0);
    pool_free(q);
    pool_thread_flush();
    pool_test_assert_consistent();
}
END_TEST

START_TEST(test_big_requests)
{
    size_t sizes[] = { POOL_MAX_SMALL + 1, 300 << 10, 5 << 20 };
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *p = pool_malloc(sizes[i]);
        ck_assert_ptr_nonnull(p);
        ck_assert(pool_owns(p));
        pool_span_sh_t *s = pool_pagemap_span_(&pool_arena_, p);
        ck_assert_uint_eq(s->state, POOL_SPAN_BIG);
        ck_assert_uint_eq(s->npages, (sizes[i] + POOL_PAGE_SIZE - 1) / POOL_PAGE_SIZE);
        pattern_fill(p, 0, sizes[i], i);
        char *q = pool_realloc(p, sizes[i] * 2);
        ck_assert(pattern_intact(q, sizes[i], i));
        pool_free(q);
    }
    pool_test_assert_consistent();
}
END_TEST

START_TEST(test_release_to_os)
{
    pool_arena_t *a = &pool_arena_;
    pool_usage_t u;
    /* 2 MiB freed: kept mapped (the next request may take it at once). */
    uint32_t n = (uint32_t)((2u << 20) / POOL_PAGE_SIZE);
    uint32_t s = take(n);
    uint32_t guard = take(1);
    memset(pool_span_addr(a, &a->spans[s]), 0x5a, (size_t)n * POOL_PAGE_SIZE);
    uint64_t madv = a->ph->madvises;
    pool_pageheap_free_(a, s);
    ck_assert_uint_eq(a->ph->madvises, madv);
    ck_assert_uint_eq(a->ph->returned_pages, 0);
    /* Trimmed: given back, and reads back as zeros when reused. */
    pool_pageheap_trim_(a);
    ck_assert_uint_eq(a->ph->madvises, madv + 1);
    ck_assert_uint_ge(a->ph->returned_pages, n);
    pool_usage(&u);
    ck_assert_uint_ge(u.returned, (size_t)n * POOL_PAGE_SIZE);
    ck_assert_uint_le(u.returned, u.free);
    pool_test_assert_consistent();
    uint32_t again = take(n);
    const unsigned char *b = pool_span_addr(a, &a->spans[again]);
    for (size_t i = 0; i < (size_t)n * POOL_PAGE_SIZE; i += 4096)
        ck_assert_msg(b[i] == 0, "byte %zu of a returned span is %u", i, b[i]);
    ck_assert_uint_ge(a->ph->reused_returned, n);
    pool_pageheap_free_(a, again);
    pool_pageheap_free_(a, guard);
    pool_test_assert_consistent();
}
END_TEST

/* The tags of page `page` in tier t's region. */
static uint8_t *tag_row(const pool_arena_t *a, unsigned t, uint32_t page)
{
    return pool_owner_rows(a, t) + (size_t)page * pool_owner_row_size(t);
}

/* Giving a span back gives back the owner tags of its pages too, the OS
 * pages of them that lie wholly in its rows, in every tier's region: a
 * burst of small spans writes them, and they would stay resident after
 * their pages left. */
START_TEST(test_release_gives_back_owner_rows)
{
    pool_arena_t *a = &pool_arena_;
    uint32_t n = 128;
    uint32_t s = take(n);
    uint32_t guard = take(1);
    uint32_t first = a->spans[s].start;
    for (unsigned t = 0; t < POOL_OWNER_TIERS; t++)
        memset(tag_row(a, t, first), 7, n * pool_owner_row_size(t));
    pool_pageheap_free_(a, s);
    pool_pageheap_trim_(a);
    uintptr_t page = pool_prim_os_page_size_();
    for (unsigned t = 0; t < POOL_OWNER_TIERS; t++) {
        uintptr_t row = (uintptr_t)tag_row(a, t, first);
        size_t len = n * pool_owner_row_size(t);
        ck_assert_msg(!pool_test_any_resident(row, row + len),
                      "tier %u: an owner page of a returned span is resident", t);
        const uint8_t *lo = (const uint8_t *)((row + page - 1) & ~(page - 1));
        const uint8_t *hi = (const uint8_t *)((row + len) & ~(page - 1));
        for (const uint8_t *p = lo; p < hi; p++)
            ck_assert_uint_eq(*p, POOL_NO_TAG);
    }
    pool_pageheap_free_(a, guard);
    pool_test_assert_consistent();
}
END_TEST

/* A span's tags are one run in the row of its tier, at its first page:
 * 64 bytes up to 64 objects, else the count rounded up to a power of two;
 * the spans of 4096 / row neighbouring pages of a tier share an OS page
 * of tags, and the tiers' regions follow one another. */
START_TEST(test_owner_tags_one_row_by_count)
{
    pool_arena_t *a = &pool_arena_;
    static const struct {
        uint16_t count;
        unsigned tier;
    } cases[] = { { 1, 0 }, { 64, 0 }, { 65, 1 }, { 128, 1 }, { 129, 2 }, { 170, 2 },
                  { 256, 2 }, { 257, 3 }, { POOL_MAX_OBJECTS, 3 } };
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned t = cases[i].tier;
        ck_assert_uint_eq(pool_owner_tier(cases[i].count), t);
        pool_span_sh_t s = { .start = 3, .count = cases[i].count };
        ck_assert_ptr_eq(pool_owner_of(a, &s, 0), tag_row(a, t, 3));
        ck_assert_ptr_eq(pool_owner_of(a, &s, cases[i].count - 1U),
                         tag_row(a, t, 3) + cases[i].count - 1);
        ck_assert_uint_le(cases[i].count, pool_owner_row_size(t));
        pool_span_sh_t next = { .start = (uint32_t)(4096 / pool_owner_row_size(t)) - 1,
                                .count = cases[i].count };
        ck_assert_uint_eq((uintptr_t)pool_owner_of(a, &next, 0) / 4096,
                          (uintptr_t)pool_owner_of(a, &s, 0) / 4096);
    }
    /* Each tier's region starts an OS page, after the last page's row of
     * the tier before, and the last ends inside the arena's tags. */
    ck_assert_ptr_eq(pool_owner_rows(a, 0), a->owners);
    uint32_t rows = (uint32_t)pool_owner_region_rows(a->npages);
    ck_assert_uint_ge(rows, a->npages);
    for (unsigned t = 1; t < POOL_OWNER_TIERS; t++) {
        ck_assert_ptr_eq(tag_row(a, t - 1, rows), pool_owner_rows(a, t));
        ck_assert_uint_eq((uintptr_t)pool_owner_rows(a, t) % 4096, 0);
    }
    ck_assert_uint_le((uintptr_t)tag_row(a, POOL_OWNER_TIERS - 1, rows), a->data);
}
END_TEST

/* The first class whose spans hold more than lo and at most hi objects. */
static unsigned class_counting(unsigned lo, unsigned hi)
{
    for (unsigned c = 1; c < POOL_NCLASSES; c++)
        if (pool_classes_[c].count > lo && pool_classes_[c].count <= hi)
            return c;
    ck_abort_msg("no class holds %u to %u objects", lo + 1, hi);
    return 0;
}

/* A small span that outlives a burst keeps the tags of its own tier and
 * no others: when the burst's spans go back, the OS pages of every other
 * tier's tags around it go too, though the burst wrote them all (what the
 * pages' earlier spans leave there).  Loop 0 keeps a span of at most 64
 * objects, loop 1 one of 65 to 128. */
START_TEST(test_release_spares_only_live_tag_tiers)
{
    pool_arena_t *a = &pool_arena_;
    unsigned kc = _i == 0 ? class_counting(0, POOL_OWNER_MIN_ROW)
                          : class_counting(POOL_OWNER_MIN_ROW, 2 * POOL_OWNER_MIN_ROW);
    unsigned kt = pool_owner_tier(pool_classes_[kc].count);
    ck_assert_uint_eq(kt, (unsigned)_i);
    /* A big span first, whose pages keep no tags: the keeper's row then
     * starts an OS page in every tier's region. */
    ck_assert_uint_eq(a->ph->carved, 0);
    uint32_t lead = take(2 * POOL_OWNER_MIN_ROW);
    uint32_t keeper = pool_pageheap_alloc_(a, pool_classes_[kc].pages, 1, kc, POOL_NO_SLOT);
    ck_assert_uint_eq(keeper, lead + 2 * POOL_OWNER_MIN_ROW);
    memset(tag_row(a, kt, keeper), 9, pool_owner_row_size(kt));
    enum { NBURST = 8 };
    uint32_t burst[NBURST];
    for (unsigned i = 0; i < NBURST; i++) {
        burst[i] = pool_pageheap_alloc_(a, 1, 1, 1, POOL_NO_SLOT);
        for (unsigned t = 0; t < POOL_OWNER_TIERS; t++)
            memset(tag_row(a, t, burst[i]), 3, pool_owner_row_size(t));
    }
    for (unsigned i = 0; i < NBURST; i++)
        pool_pageheap_free_(a, burst[i]);
    pool_pageheap_trim_(a);
    ck_assert_uint_ge(a->ph->returned_pages, NBURST);
    uintptr_t page = pool_prim_os_page_size_();
    for (unsigned t = 0; t < POOL_OWNER_TIERS; t++) {
        uintptr_t lo = (uintptr_t)tag_row(a, t, keeper);
        ck_assert_uint_eq(lo % page, 0);
        if (t == kt) {
            const uint8_t *row = tag_row(a, t, keeper);
            for (unsigned k = 0; k < pool_owner_row_size(t); k++)
                ck_assert_uint_eq(row[k], 9);
        } else {
            ck_assert_msg(!pool_test_any_resident(lo, lo + page),
                          "class %u of %u objects: tier %u's tags around it are resident", kc,
                          pool_classes_[kc].count, t);
        }
    }
    pool_pageheap_free_(a, keeper);
    pool_pageheap_free_(a, lead);
    pool_test_assert_consistent();
}
END_TEST

/* A burst's metadata goes back with its pages once decay returns them:
 * the descriptors of every page but a free span's first, and the owner
 * tags of every page, also where an OS page of them is shared with a
 * neighbour that went back too (big spans of two processes, which do not
 * coalesce).  What reads as zeros then passes the checker, and the pages
 * are taken again as fresh ones. */
START_TEST(test_release_gives_back_span_metadata)
{
    pool_arena_t *a = &pool_arena_;
    enum { NSMALL = 256, NBIG = 48, BIG_PAGES = 5 };
    uint32_t small[NSMALL], big[NBIG];
    uint32_t below = take(1);
    for (unsigned i = 0; i < NSMALL; i++) {
        small[i] = pool_pageheap_alloc_(a, 1, 1, 1, POOL_NO_SLOT);
        ck_assert_uint_eq(small[i], small[0] + i);
        for (unsigned t = 0; t < POOL_OWNER_TIERS; t++)
            memset(tag_row(a, t, small[i]), 3, pool_owner_row_size(t));
    }
    for (unsigned i = 0; i < NBIG; i++) {
        big[i] = pool_pageheap_alloc_(a, BIG_PAGES, 1, 0, (uint16_t)(1 + i % 2));
        ck_assert_uint_eq(big[i], small[0] + NSMALL + i * BIG_PAGES);
        /* What the small spans these pages held before left there. */
        for (unsigned t = 0; t < POOL_OWNER_TIERS; t++)
            memset(tag_row(a, t, big[i]), 5, BIG_PAGES * pool_owner_row_size(t));
    }
    uint32_t above = take(1);
    uint32_t end = big[NBIG - 1] + BIG_PAGES;
    for (unsigned i = 0; i < NSMALL; i++)
        pool_pageheap_free_(a, small[i]);
    for (unsigned i = 0; i < NBIG; i++)
        pool_pageheap_free_(a, big[i]);
    for (unsigned i = 0; i <= POOL_DECAY_WINDOW + 1; i++) {
        a->ph->decay_start_ns -= 2 * POOL_DECAY_NS;
        pool_decay();
    }
    ck_assert_uint_eq(a->ph->returned_pages, end - small[0]);
    /* The small spans coalesced with the first big one: one span. */
    ck_assert_msg(!pool_test_any_resident((uintptr_t)&a->spans[small[0] + 1],
                                          (uintptr_t)&a->spans[big[1]]),
                  "descriptors inside a returned span are resident");
    for (unsigned t = 0; t < POOL_OWNER_TIERS; t++)
        ck_assert_msg(!pool_test_any_resident((uintptr_t)tag_row(a, t, small[0]),
                                              (uintptr_t)tag_row(a, t, end)),
                      "tier %u: owner tags of returned spans are resident", t);
    pool_test_assert_consistent();
    uint32_t again = take(NSMALL + BIG_PAGES);
    ck_assert_uint_eq(again, small[0]);
    pool_pageheap_free_(a, again);
    /* Away from the span in use below, whose OS page of tier 0's tags (64
     * pages' worth) stays. */
    for (unsigned i = 80; i < NSMALL; i += 7)
        ck_assert_uint_eq(*tag_row(a, 0, small[i]), POOL_NO_TAG);
    pool_pageheap_free_(a, below);
    pool_pageheap_free_(a, above);
    pool_test_assert_consistent();
}
END_TEST

/* Decay: pages freed within a period stay mapped; what stayed free through
 * a whole period, beyond the cushion, goes back at its end.  The periods
 * are ended by moving their start back rather than by waiting. */
START_TEST(test_decay_returns_what_stayed_free)
{
    pool_arena_t *a = &pool_arena_;
    uint32_t n = (uint32_t)((4u << 20) / POOL_PAGE_SIZE);
    uint32_t s = take(n);
    uint32_t guard = take(1);
    pool_pageheap_free_(a, s);
    uint64_t madv = a->ph->madvises;
    /* The period in which the span was freed ends: it was in use for part
     * of it, so nothing is due. */
    a->ph->decay_start_ns -= POOL_DECAY_NS;
    uint32_t one = take(1);
    pool_pageheap_free_(a, one);
    ck_assert_uint_eq(a->ph->madvises, madv);
    ck_assert_uint_eq(a->ph->returned_pages, 0);
    /* A whole period free: given back, all but the cushion at most. */
    a->ph->decay_start_ns -= POOL_DECAY_NS;
    one = take(1);
    ck_assert_uint_gt(a->ph->madvises, madv);
    /* The cushion: the one page taken again in a period. */
    ck_assert_uint_ge(a->ph->returned_pages + 2, n - 1);
    ck_assert_uint_ge(a->ph->decayed_pages, a->ph->returned_pages);
    pool_test_assert_consistent();
    pool_pageheap_free_(a, one);
    pool_pageheap_free_(a, guard);
    pool_test_assert_consistent();
}
END_TEST

/* A period whose due is shorter than every free span left gives back
 * the top of the longest, what is due of it, and leaves the span counted
 * as in memory: a burst's last frees, joined to pages free through the
 * whole period, would otherwise keep all of them a period more. */
START_TEST(test_decay_returns_the_top_of_a_longer_span)
{
    pool_arena_t *a = &pool_arena_;
    uint32_t n = 256, m = 64;
    uint32_t s = take(n), t = take(m), guard = take(1);
    ck_assert_uint_eq(t, s + n);
    char *lo = pool_span_addr(a, &a->spans[s]);
    memset(lo, 1, (size_t)(n + m) << POOL_PAGE_SHIFT);
    pool_pageheap_free_(a, s);
    /* The period in which s was freed ends: nothing is due. */
    a->ph->decay_start_ns -= POOL_DECAY_NS;
    pool_pageheap_free_(a, take(1));
    uint64_t madv = a->ph->madvises;
    /* t joins s in the next period: one span of n + m pages, of which n
     * (less the page taken again) stayed free through it. */
    pool_pageheap_free_(a, t);
    a->ph->decay_start_ns -= POOL_DECAY_NS;
    uint32_t one = take(1);
    ck_assert_uint_eq(a->ph->madvises, madv + 1);
    ck_assert_uint_eq(a->ph->returned_pages, 0);
    uint32_t free_span = a->pm_span[s + n + m - 1];
    ck_assert(!a->spans[free_span].returned);
    char *hi = lo + ((size_t)(n + m) << POOL_PAGE_SHIFT);
    ck_assert(!pool_test_any_resident((uintptr_t)hi - ((uintptr_t)(n - 2) << POOL_PAGE_SHIFT),
                                      (uintptr_t)hi));
    ck_assert(pool_test_any_resident((uintptr_t)lo + ((uintptr_t)1 << POOL_PAGE_SHIFT),
                                     (uintptr_t)lo + ((uintptr_t)m << POOL_PAGE_SHIFT)));
    pool_test_assert_consistent();
    /* The next period gives back the rest, all but the cushion: the
     * page taken again in each period, at the bottom. */
    pool_pageheap_free_(a, one);
    a->ph->decay_start_ns -= POOL_DECAY_NS;
    pool_pageheap_free_(a, take(1));
    ck_assert(!pool_test_any_resident((uintptr_t)lo + ((uintptr_t)2 << POOL_PAGE_SHIFT),
                                      (uintptr_t)hi));
    pool_test_assert_consistent();
    pool_pageheap_free_(a, guard);
    pool_test_assert_consistent();
}
END_TEST

/* The cushion follows reuse: pages freed and taken again while mapped
 * stay mapped, all of them, through the period of the reuse and the
 * POOL_DECAY_WINDOW after it, so that a burst that comes back within them
 * faults nothing in; then the cushion is none and they go back at the next
 * period's end at once, not half at a time; a heap that never took freed
 * pages again keeps none.  Each period is ended by moving its start back.
 * (A cushion halved every period kept part of a burst for twice as many
 * periods, which the whole server paid for at rest.) */
START_TEST(test_cushion_follows_reuse)
{
    pool_arena_t *a = &pool_arena_;
    uint32_t n = (uint32_t)((3u << 20) / POOL_PAGE_SIZE);
    uint32_t guard = take(1);
    pool_pageheap_trim_(a);
    ck_assert_uint_eq(pool_pageheap_cushion_(a->ph), 0);
    uint32_t s = take(n);
    pool_pageheap_free_(a, s);
    s = take(n);
    uint64_t reuse = pool_pageheap_cushion_(a->ph);
    ck_assert_uint_ge(reuse, n);
    pool_pageheap_free_(a, s);
    for (unsigned i = 0; i < POOL_DECAY_WINDOW; i++) {
        a->ph->decay_start_ns -= 2 * POOL_DECAY_NS;
        pool_decay();
        ck_assert_uint_eq(pool_pageheap_cushion_(a->ph), reuse);
        ck_assert_uint_ge(a->ph->free_pages - a->ph->returned_pages, n);
    }
    a->ph->decay_start_ns -= 2 * POOL_DECAY_NS;
    pool_decay();
    ck_assert_uint_eq(pool_pageheap_cushion_(a->ph), 0);
    a->ph->decay_start_ns -= 2 * POOL_DECAY_NS;
    pool_decay();
    ck_assert_uint_eq(a->ph->free_pages, a->ph->returned_pages);
    pool_test_assert_consistent();
    pool_pageheap_free_(a, guard);
    pool_test_assert_consistent();
}
END_TEST

/* A burst of frees stays mapped up to the bound (the test arena is small,
 * so the 32 MiB floor); a span freed beyond it goes back at once. */
/* A freed span is never given back at once, however large: a burst of
 * frees stays mapped until a decay period it stays free through has ended,
 * and pool_decay() ends it for a heap that has gone quiet. */
START_TEST(test_burst_kept_until_decay)
{
    pool_arena_t *a = &pool_arena_;
    uint32_t big = (a->npages - a->ph->carved) / 2;
    uint32_t burst = take(big), guard = take(1);
    uint64_t madv = a->ph->madvises;
    pool_pageheap_free_(a, burst);
    ck_assert_uint_eq(a->ph->madvises, madv);
    ck_assert_uint_eq(a->ph->returned_pages, 0);
    /* Taken and freed again within the period: still nothing returned. */
    pool_pageheap_free_(a, take(big));
    ck_assert_uint_eq(a->ph->returned_pages, 0);
    pool_decay(); /* the period is not over */
    ck_assert_uint_eq(a->ph->returned_pages, 0);
    /* Quiet periods, each run twice its length: the burst stayed free
     * through them, and once the cushion has forgotten its reuse it goes
     * back. */
    for (unsigned i = 0; i <= POOL_DECAY_WINDOW + 1; i++) {
        a->ph->decay_start_ns -= 2 * POOL_DECAY_NS;
        pool_decay();
    }
    ck_assert_uint_ge(a->ph->returned_pages, big);
    ck_assert_uint_gt(a->ph->madvises, madv);
    pool_test_assert_consistent();
    pool_pageheap_free_(a, guard);
    pool_test_assert_consistent();
}
END_TEST

START_TEST(test_exhaustion_falls_back)
{
    pool_arena_t *a = &pool_arena_;
    /* Take every page, then ask for more. */
    uint32_t all = pool_pageheap_alloc_(a, a->npages - a->ph->carved, 1, 0, POOL_NO_SLOT);
    ck_assert_uint_ne(all, POOL_NIL);
    ck_assert_uint_eq(pool_pageheap_alloc_(a, 1, 1, 0, POOL_NO_SLOT), POOL_NIL);
    void *p = pool_malloc(100);
    ck_assert_ptr_nonnull(p);
    ck_assert(!pool_owns(p));
    void *big = pool_malloc(1 << 20);
    ck_assert_ptr_nonnull(big);
    ck_assert(!pool_owns(big));
    pool_usage_t u;
    pool_usage(&u);
    ck_assert_uint_eq(u.fallbacks, 2);
    pool_free(p);
    pool_free(big);
    pool_pageheap_free_(a, all);
    pool_test_assert_consistent();
}
END_TEST

/* A process that takes pages another has used maps them a fault-around
 * window at a time: worker B, taking the big span worker A wrote and freed
 * while A lives on, writes its 480 KiB with a fraction of a fault a page
 * (one a page before: a write fault maps its page only).  A span that was
 * given back is not read ahead: its pages stay without memory until
 * written. */
START_TEST(test_taker_maps_used_pages_around)
{
    pool_arena_t *a = &pool_arena_;
    size_t bytes = 60 * POOL_PAGE_SIZE;
    size_t os_pages = bytes / pool_prim_os_page_size_();
    int freed[2], done[2];
    ck_assert_int_eq(pipe(freed), 0);
    ck_assert_int_eq(pipe(done), 0);
    pid_t wa = pool_test_fork_worker();
    if (wa == 0) {
        close(freed[0]);
        close(done[1]);
        char *p = pool_malloc(bytes);
        if (p == NULL || !pool_owns(p))
            _exit(3);
        memset(p, 1, bytes);
        pool_free(p);
        /* Taken again within the period: the cushion keeps it mapped. */
        if (pool_malloc(bytes) != p)
            _exit(3);
        pool_free(p);
        char c;
        if (write(freed[1], &p, sizeof p) != sizeof p || read(done[0], &c, 1) != 0)
            _exit(4);
        _exit(0);
    }
    close(freed[1]);
    close(done[0]);
    char *p = NULL;
    ck_assert_int_eq(read(freed[0], &p, sizeof p), sizeof p);
    uint64_t reused_returned = a->ph->reused_returned;
    pid_t wb = pool_test_fork_worker();
    if (wb == 0) {
        long f0 = pool_test_minor_faults();
        char *q = pool_malloc(bytes);
        if (q != p || a->ph->reused_returned != reused_returned)
            _exit(3);
        memset(q, 2, bytes);
        long faults = pool_test_minor_faults() - f0;
        _exit(faults < (long)os_pages / 2 ? 0 : 4);
    }
    int status = pool_test_join_worker(wb);
    close(done[1]);
    ck_assert_int_eq(pool_test_join_worker(wa), 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "worker B (2: no attach, 3: not A's kept span, 4: a fault or more every "
                  "other page of %zu): status %#x",
                  os_pages, status);
    close(freed[0]);
    /* Given back, then taken: nothing resident until written. */
    pool_pageheap_trim_(a);
    ck_assert_uint_ge(a->ph->returned_pages, 60);
    char *r = pool_malloc(bytes);
    ck_assert_ptr_eq(r, p);
    ck_assert_msg(!pool_test_any_resident((uintptr_t)r, (uintptr_t)r + bytes),
                  "a given-back span was read ahead");
    pool_free(r);
    pool_test_assert_consistent();
}
END_TEST

/* Stats builds time each hold of a lock: two page-heap operations add two
 * acquisitions and a hold that is more than nothing and less than the
 * time around them.  Other builds count nothing. */
START_TEST(test_lock_hold_counted)
{
    pool_arena_t *a = &pool_arena_;
    pool_lockstats_sh_t before = a->lockstats[0];
    uint64_t t0 = pool_prim_now_ns_();
    uint32_t s = take(3);
    pool_pageheap_free_(a, s);
    uint64_t elapsed = pool_prim_now_ns_() - t0;
    const pool_lockstats_sh_t *after = &a->lockstats[0];
    if (!pool_config_stats) {
        ck_assert_uint_eq(after->acquired, 0);
        ck_assert_uint_eq(after->held_ns, 0);
        return;
    }
    ck_assert_uint_eq(after->acquired, before.acquired + 2);
    ck_assert_uint_gt(after->held_ns, before.held_ns);
    ck_assert_uint_le(after->held_ns - before.held_ns, elapsed);
    char buf[16384];
    ck_assert_uint_lt(pool_stats_json(buf, sizeof buf), sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "\"held_ns\":"));
}
END_TEST

Suite *make_pageheap_suite(void)
{
    Suite *s = suite_create("pageheap");
    TCase *tc = tcase_create("spans");
    tcase_add_checked_fixture(tc, pool_test_create_attach, pool_test_destroy);
    tcase_add_test(tc, test_carve_and_split);
    tcase_add_test(tc, test_coalesce_both_sides);
    tcase_add_test(tc, test_short_requests_take_the_lowest);
    tcase_add_test(tc, test_long_spans_best_fit);
    tcase_add_test(tc, test_long_requests_keep_to_their_pages);
    tcase_add_test(tc, test_long_block_keeps_free_pages_whole);
    tcase_add_test(tc, test_short_big_spans_coalesce_across_takers);
    tcase_add_test(tc, test_aligned_spans);
    tcase_add_test(tc, test_big_requests);
    tcase_add_test(tc, test_release_to_os);
    tcase_add_test(tc, test_release_gives_back_owner_rows);
    tcase_add_test(tc, test_owner_tags_one_row_by_count);
    tcase_add_test(tc, test_release_gives_back_span_metadata);
    tcase_add_loop_test(tc, test_release_spares_only_live_tag_tiers, 0, 2);
    tcase_add_test(tc, test_decay_returns_what_stayed_free);
    tcase_add_test(tc, test_burst_kept_until_decay);
    tcase_add_test(tc, test_decay_returns_the_top_of_a_longer_span);
    tcase_add_test(tc, test_cushion_follows_reuse);
    tcase_add_test(tc, test_exhaustion_falls_back);
    tcase_add_test(tc, test_lock_hold_counted);
    tcase_add_test(tc, test_taker_maps_used_pages_around);
    suite_add_tcase(s, tc);
    return s;
}
