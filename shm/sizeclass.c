/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — size classes.
 *
 * 96 classes: 16-byte steps up to 128 bytes, then 8 classes per doubling
 * (a step of an eighth of the lower power of two, so a request wastes at most
 * 1/9 of its object above 128 bytes) up to 256 KiB.  Class 0 is "not a small
 * object".  Pages per span: the fewest pages (starting from the object size)
 * whose tail after the last whole object is at most 1/16 of the span; a span
 * holds at most 512 objects.  The batch between a thread cache and the
 * central cache is at most 64 KiB of objects (1..128); a bin releases a
 * batch once it holds 256 KiB of objects, but at least two batches.  A
 * class keeps up to 512 KiB of wholly free spans (at least one) before it
 * gives them to the page heap.  Objects over 64 KiB are kept by neither
 * (POOL_CACHE_MAX_SIZE): each goes back at its free.  A thread's first 4 KiB of objects of a
 * class up to 1 KiB come from the 256-byte or the 1 KiB class (its light
 * class, POOL_LIGHT_BYTES).
 *
 *   class  size  pages objs | class  size  pages objs | class   size pages objs
 *       1    16    1  512   |    33  1152    1    7   |    65   18432   7   3
 *       2    32    1  256   |    34  1280    1    6   |    66   20480   5   2
 *       3    48    1  170   |    35  1408    2   11   |    67   22528  11   4
 *       4    64    1  128   |    36  1536    1    5   |    68   24576   3   1
 *       5    80    1  102   |    37  1664    3   14   |    69   26624  10   3
 *       6    96    1   85   |    38  1792    2    9   |    70   28672   7   2
 *       7   112    1   73   |    39  1920    1    4   |    71   30720   4   1
 *       8   128    1   64   |    40  2048    1    4   |    72   32768   4   1
 *       9   144    1   56   |    41  2304    2    7   |    73   36864   9   2
 *      10   160    1   51   |    42  2560    1    3   |    74   40960   5   1
 *      11   176    1   46   |    43  2816    4   11   |    75   45056  11   2
 *      12   192    1   42   |    44  3072    2    5   |    76   49152   6   1
 *      13   208    1   39   |    45  3328    3    7   |    77   53248  13   2
 *      14   224    1   36   |    46  3584    4    9   |    78   57344   7   1
 *      15   240    1   34   |    47  3840    1    2   |    79   61440   8   1
 *      16   256    1   32   |    48  4096    1    2   |    80   65536   8   1
 *      17   288    1   28   |    49  4608    3    5   |    81   73728   9   1
 *      18   320    1   25   |    50  5120    2    3   |    82   81920  10   1
 *      19   352    1   23   |    51  5632    5    7   |    83   90112  11   1
 *      20   384    1   21   |    52  6144    3    4   |    84   98304  12   1
 *      21   416    1   19   |    53  6656    5    6   |    85  106496  13   1
 *      22   448    1   18   |    54  7168    7    8   |    86  114688  14   1
 *      23   480    1   17   |    55  7680    1    1   |    87  122880  15   1
 *      24   512    1   16   |    56  8192    1    1   |    88  131072  16   1
 *      25   576    1   14   |    57  9216    6    5   |    89  147456  18   1
 *      26   640    1   12   |    58 10240    4    3   |    90  163840  20   1
 *      27   704    1   11   |    59 11264    7    5   |    91  180224  22   1
 *      28   768    1   10   |    60 12288    3    2   |    92  196608  24   1
 *      29   832    2   19   |    61 13312    5    3   |    93  212992  26   1
 *      30   896    1    9   |    62 14336    7    4   |    94  229376  28   1
 *      31   960    1    8   |    63 15360    2    1   |    95  245760  30   1
 *      32  1024    1    8   |    64 16384    2    1   |    96  262144  32   1
 *
 * Entry points: pool_sizeclass_init_() and the inline pool_sizeclass_of().
 */
#include "pool-internal.h"

#include "prim/prim.h"

POOL_READ_MOSTLY uint8_t pool_class_small_[POOL_SMALL_LOOKUP_MAX + 1];
POOL_READ_MOSTLY uint8_t pool_class_large_[(POOL_MAX_SMALL >> 7) + 1];
POOL_READ_MOSTLY pool_class_t pool_classes_[POOL_NCLASSES];

/* Bytes of objects per batch between a thread cache and the central cache. */
#define POOL_BATCH_BYTES (64u << 10)
/* A bin may hold this many bytes of objects (at least two batches): a
 * limit in bytes rather than batches lets a thread keep a working set of
 * small objects (10,000 of 16 B) in its cache instead of sending it
 * through the class lock and back on every cycle, and a bin of two 8 KiB
 * batches (16 objects), whose class count drifts by a few objects either
 * way, crossed its bounds every few dozen frees. */
#define POOL_BIN_BYTES (256u << 10)
/* SHMPOOL_TCACHE's largest: a bin's watermark is 16 bits, so a bin of
 * 16-byte objects stops 16 bytes short of it. */
#define POOL_BIN_BYTES_MAX ((size_t)1 << 20)
/* A bin whose objects go to the central cache and come back (it released,
 * then ran dry) grows by a batch at each such refill, up to this many
 * times its watermark (tcache.c): random sizes up to 8 KiB at four
 * processes went through the class locks every thousand pairs or so with
 * bins of 256 KiB, and nearly never with bins of 1 MiB, while a steady
 * load keeps the default.  Not under SHMPOOL_TCACHE, which sets a bin's
 * size for an experiment. */
#define POOL_BIN_GROWTH 4u
/* Wholly free spans a class keeps rather than give them to the page heap:
 * a batch allocated and freed again, or a class whose count swings by a
 * few spans, then never carves and frees the same spans through the page
 * heap (and its lock and journal) over and over.  At least one. */
#define POOL_KEEP_EMPTY_BYTES (512u << 10)
/* Objects over this size are kept in no thread cache and their classes
 * keep no empty span: a free sends the object's span to the page heap at
 * once, where its pages join their free neighbours and serve the next
 * request of any size.  A process that frees big blocks of many sizes
 * once each (CPython reads every module into a buffer of the file's size)
 * otherwise kept one of each, in a class of its own: 1.2 MiB of
 * CPython's start in fifteen classes from 36 to 160 KiB, its whole
 * excess over glibc's heap, which reuses what is freed across sizes.  At
 * 32 KiB, the page heap's reuse of pages another process had mapped cost
 * faults at every such block, and frag at 2 processes took 2.5 times as
 * long; at 64 KiB it took 1.08 times as long at 2 processes and 0.86 at
 * 4, in 10-15 % less memory. */
#define POOL_CACHE_MAX_SIZE (64u << 10)

/* A thread's first objects of a class up to 1 KiB come from a larger class,
 * its light class, as many as fill 4 KiB of it: the 256-byte class lends
 * to the classes below it (16 objects each), the 1 KiB class to those
 * between (4 each); 256 bytes and 1 KiB lend nothing.  A span is owned by
 * one thread, so every class a thread touches costs it a page of its own,
 * and an idle poold worker with four keep-alive connections held objects
 * of nine classes, nine 4 KiB pages at least, where glibc's heap packs
 * them into two or three (8 workers: 707 KiB of arena against 491 with
 * lenders).  Two lenders rather than every power of two: an Apache child
 * keeps a few objects of 96, 128 and 256 bytes, and of 512 and 1024, for
 * good, which take two pages so and four with a lender per power of two
 * (32 children: 140 KiB less arena).  The objects lent never take more
 * pages than the classes would have on their own (4 KiB, an OS page,
 * each), though each takes up to 16 times its size; a class used beyond
 * them takes spans of its own. */
#define POOL_LIGHT_BYTES (4u << 10)
#define POOL_LIGHT_MAX_SIZE 1024u

/* SHMPOOL_TCACHE=BYTES[,BATCH]: an experiment setting that shrinks the
 * thread caches to reach the contended regime (bench/ab's ladder): a bin
 * releases once it holds BYTES of objects (but always at two batches),
 * and a batch carries at most BATCH objects (1..POOL_BATCH_MAX, never more
 * than the class's own).  Read once, when the class table is made: the
 * fast paths see only each bin's watermark, as always.  The defaults are
 * set here rather than at load, which keeps the two out of .data. */
static uint32_t knob_bin_bytes;
static uint32_t knob_batch;
static uint32_t knob_growth;

static void read_knob(void)
{
    knob_bin_bytes = POOL_BIN_BYTES;
    knob_batch = POOL_BATCH_MAX;
    knob_growth = POOL_BIN_GROWTH;
    const char *v = pool_prim_getenv_("SHMPOOL_TCACHE");
    if (v == NULL || *v == '\0')
        return;
    size_t bytes, batch = POOL_BATCH_MAX;
    const char *end;
    bool ok = pool_parse_size_(v, &bytes, &end) && bytes <= POOL_BIN_BYTES_MAX;
    if (ok && *end == ',')
        ok = pool_parse_size_(end + 1, &batch, NULL) && batch >= 1 && batch <= POOL_BATCH_MAX;
    else if (ok)
        ok = *end == '\0';
    if (!ok) {
        pool_error_(0, "SHMPOOL_TCACHE='%s' is not BYTES[,BATCH] (BYTES up to 1M, BATCH 1..%u); "
                       "thread caches keep their default size", v, POOL_BATCH_MAX);
        return;
    }
    knob_bin_bytes = (uint32_t)bytes;
    knob_batch = (uint32_t)batch;
    knob_growth = 1;
}

static void class_geometry(pool_class_t *c, uint32_t size)
{
    uint32_t pmin = (uint32_t)((size + POOL_PAGE_SIZE - 1) / POOL_PAGE_SIZE);
    uint32_t best_p = pmin, best_count = 0;
    size_t best_waste = SIZE_MAX;
    for (uint32_t p = pmin; p < pmin + 16; p++) {
        size_t bytes = (size_t)p * POOL_PAGE_SIZE;
        size_t count = bytes / size;
        if (count > POOL_MAX_OBJECTS)
            count = POOL_MAX_OBJECTS;
        size_t waste = bytes - count * size;
        /* Compare waste as a fraction of the span: waste/bytes. */
        if (best_waste == SIZE_MAX ||
            waste * ((size_t)best_p * POOL_PAGE_SIZE) < best_waste * bytes) {
            best_p = p;
            best_count = (uint32_t)count;
            best_waste = waste;
        }
        if (waste * 16 <= bytes)
            break;
    }
    uint32_t batch = POOL_BATCH_BYTES / size;
    if (batch < 1)
        batch = 1;
    if (batch > knob_batch)
        batch = knob_batch;
    c->size = size;
    c->pages = (uint16_t)best_p;
    c->count = (uint16_t)best_count;
    uint32_t bin = knob_bin_bytes / size;
    uint32_t keep = POOL_KEEP_EMPTY_BYTES / (best_p * (uint32_t)POOL_PAGE_SIZE);
    c->max_batch = (uint16_t)batch;
    if (bin > UINT16_MAX)
        bin = UINT16_MAX;
    c->watermark = (uint16_t)(bin > 2 * batch ? bin : 2 * batch);
    uint32_t grown = knob_growth * c->watermark;
    c->watermark_max = (uint16_t)(grown < UINT16_MAX ? grown : UINT16_MAX);
    c->keep_empty = (uint16_t)(keep > 1 ? keep : 1);
    if (size > POOL_CACHE_MAX_SIZE)
        c->watermark = c->watermark_max = c->keep_empty = 0;
}

/* Class cls's light class and how many objects it lends (POOL_LIGHT_BYTES);
 * needs the lookup tables. */
static void class_light(unsigned cls)
{
    pool_class_t *c = &pool_classes_[cls];
    uint32_t to = 256;
    while (to < c->size)
        to *= 4;
    c->light_class = (uint8_t)cls;
    c->light_max = 0;
    if (to == c->size || to > POOL_LIGHT_MAX_SIZE)
        return;
    c->light_class = (uint8_t)pool_sizeclass_of(to);
    c->light_max = (uint8_t)(POOL_LIGHT_BYTES / to);
}

void pool_sizeclass_init_(void)
{
    if (pool_classes_[1].size != 0)
        return;
    read_knob();
    unsigned cls = 1;
    for (uint32_t s = 16; s <= 128; s += 16)
        class_geometry(&pool_classes_[cls++], s);
    for (uint32_t base = 128; base < POOL_MAX_SMALL; base *= 2)
        for (uint32_t i = 1; i <= 8; i++)
            class_geometry(&pool_classes_[cls++], base + i * (base / 8));
    pool_assert(cls == POOL_NCLASSES);

    /* Both tables map a size to the first class that holds it: the first
     * byte by byte, so that malloc's fast path indexes it with the size
     * itself (1 KiB instead of 65 bytes, two instructions fewer than a
     * rounding to 16-byte steps); the second rounded up to 128. */
    cls = 1;
    for (size_t i = 0; i <= POOL_SMALL_LOOKUP_MAX; i++) {
        size_t size = i == 0 ? 1 : i;
        while (pool_classes_[cls].size < size)
            cls++;
        pool_class_small_[i] = (uint8_t)cls;
    }
    cls = 1;
    for (size_t i = 0; i <= (POOL_MAX_SMALL >> 7); i++) {
        size_t size = i == 0 ? 1 : i * 128;
        while (pool_classes_[cls].size < size)
            cls++;
        pool_class_large_[i] = (uint8_t)cls;
    }
    for (cls = 1; cls < POOL_NCLASSES; cls++)
        class_light(cls);
}

unsigned pool_sizeclass_aligned_(size_t size, size_t align)
{
    if (size < align)
        size = align;
    /* A span starts on a page, so object i sits at i * size from a page
     * boundary: aligned for every i exactly when size is a multiple. */
    for (unsigned cls = pool_sizeclass_of(size); cls != 0 && cls < POOL_NCLASSES; cls++)
        if (pool_classes_[cls].size % align == 0)
            return cls;
    return 0;
}
