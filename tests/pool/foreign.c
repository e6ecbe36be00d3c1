/* SPDX-License-Identifier: BSD-2-Clause */
/* A program that brings its own allocator: linked to jemalloc, mimalloc or
 * tcmalloc (FOREIGN_JEMALLOC, FOREIGN_MIMALLOC or FOREIGN_TCMALLOC), it
 * hands blocks from that allocator's own entry points to the standard
 * ones and back, for sizes from a byte to past the pool's classes, writing
 * every byte each block is said to hold; then it forks, and the child does
 * it all again and frees blocks its parent allocated.  tests/pool/foreign.sh
 * runs it with and without LD_PRELOAD=libshmpool.so, in every mode.
 *
 * Prints where a fresh malloc landed in the parent and in the child
 * ("arena" when libshmpool owns it, else "private"), so that the test
 * knows whether the pool took the heap over.  Exits 1, naming the call,
 * on any wrong answer; a mixed-up heap crashes it instead.
 */
#include <dlfcn.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(FOREIGN_JEMALLOC)
#include <jemalloc/jemalloc.h>
#elif defined(FOREIGN_MIMALLOC)
#include <mimalloc.h>
#elif defined(FOREIGN_TCMALLOC)
#include <gperftools/nallocx.h>
#include <gperftools/tcmalloc.h>
#else
#error "build with one of FOREIGN_JEMALLOC, FOREIGN_MIMALLOC, FOREIGN_TCMALLOC"
#endif

static const size_t sizes[] = { 1, 24, 100, 1000, 5000, 70000, 300000, (size_t)2 << 20 };
#define NSIZES (sizeof sizes / sizeof sizes[0])

static const char *who = "parent";

static void check(bool ok, const char *what, size_t n)
{
    if (!ok) {
        fprintf(stderr, "foreign (%s): %s wrong for %zu bytes\n", who, what, n);
        exit(1);
    }
}

/* Write n bytes of a pattern that depends on the block's address. */
static void fill(void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ((unsigned char *)p)[i] = (unsigned char)((uintptr_t)p + i);
}

/* The first n bytes still hold the pattern fill() wrote at `was`. */
static bool kept(const void *p, const void *was, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (((const unsigned char *)p)[i] != (unsigned char)((uintptr_t)was + i))
            return false;
    return true;
}

static bool zero(const void *p, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (((const unsigned char *)p)[i] != 0)
            return false;
    return true;
}

/* A block from the standard entry points, filled to its usable size. */
static void *standard_block(size_t n)
{
    void *p = malloc(n);
    check(p != NULL, "malloc", n);
    size_t usable = malloc_usable_size(p);
    check(usable >= n, "malloc_usable_size of malloc's block", n);
    fill(p, usable);
    return p;
}

/* Grow p (filled from its start, n bytes at least) with realloc fn. */
#define GROW(fn, p, n)                                                        \
    do {                                                                      \
        void *was_ = (p);                                                     \
        (p) = fn((p), 2 * (n));                                               \
        check((p) != NULL && kept((p), was_, (n)), #fn, (n));                 \
    } while (0)

#if defined(FOREIGN_JEMALLOC)
static void mix(size_t n)
{
    /* The standard family's blocks, through jemalloc's names. */
    void *p = standard_block(n);
    check(sallocx(p, 0) == malloc_usable_size(p), "sallocx of malloc's block", n);
    check(xallocx(p, n, 0, 0) >= n, "xallocx of malloc's block", n);
    void *was = p;
    p = rallocx(p, 2 * n, 0);
    check(p != NULL && kept(p, was, n), "rallocx of malloc's block", n);
    sdallocx(p, 2 * n, 0);
    void *c = calloc(1, n);
    check(c != NULL && zero(c, 0, n), "calloc", n);
    dallocx(c, 0);
    void *m = NULL;
    check(posix_memalign(&m, 64, n) == 0 && (uintptr_t)m % 64 == 0, "posix_memalign", n);
    fill(m, n);
    dallocx(m, 0);

    /* jemalloc's blocks, through the standard names. */
    size_t promised = nallocx(n, 0);
    void *x = mallocx(n, MALLOCX_ZERO);
    check(x != NULL && promised >= n && zero(x, 0, promised), "mallocx(MALLOCX_ZERO)", n);
    check(malloc_usable_size(x) >= promised, "malloc_usable_size of mallocx's block", n);
    fill(x, promised);
    GROW(realloc, x, n);
    free(x);
    void *a = mallocx(n, MALLOCX_ALIGN(4096));
    check(a != NULL && (uintptr_t)a % 4096 == 0, "mallocx(MALLOCX_ALIGN(4096))", n);
    fill(a, malloc_usable_size(a));
    free(a);
    void *r = standard_block(n);
    size_t old = malloc_usable_size(r);
    r = rallocx(r, 3 * n, MALLOCX_ZERO);
    check(r != NULL && zero(r, old, 3 * n > old ? 3 * n : old), "rallocx(MALLOCX_ZERO)", n);
    free(r);
}

static void *own_alloc(size_t n)
{
    return mallocx(n, 0);
}

static void own_free(void *p)
{
    dallocx(p, 0);
}
#elif defined(FOREIGN_MIMALLOC)
static void mix(size_t n)
{
    void *p = standard_block(n);
    check(mi_usable_size(p) >= n, "mi_usable_size of malloc's block", n);
    GROW(mi_realloc, p, n);
    mi_free(p);
    char *s = strdup("a string");
    check(s != NULL, "strdup", n);
    mi_free(s);

    void *q = mi_malloc(n);
    check(q != NULL && malloc_usable_size(q) >= n, "malloc_usable_size of mi_malloc's block", n);
    fill(q, malloc_usable_size(q));
    GROW(realloc, q, n);
    free(q);
    void *a = mi_malloc_aligned(n, 4096);
    check(a != NULL && (uintptr_t)a % 4096 == 0, "mi_malloc_aligned", n);
    fill(a, n);
    free(a);
    void *z = mi_zalloc(n);
    check(z != NULL && zero(z, 0, n), "mi_zalloc", n);
    free(z);
    s = mi_strdup("another string");
    check(s != NULL, "mi_strdup", n);
    free(s);
}

static void *own_alloc(size_t n)
{
    return mi_malloc(n);
}

static void own_free(void *p)
{
    mi_free(p);
}
#else
static void mix(size_t n)
{
    void *p = standard_block(n);
    check(tc_malloc_size(p) >= n, "tc_malloc_size of malloc's block", n);
    GROW(tc_realloc, p, n);
    tc_free(p);
    void *f = standard_block(n);
    tc_free_sized(f, n);

    void *q = tc_malloc(n);
    check(q != NULL && malloc_usable_size(q) >= n, "malloc_usable_size of tc_malloc's block", n);
    fill(q, malloc_usable_size(q));
    GROW(realloc, q, n);
    free(q);
    void *a = tc_memalign(4096, n);
    check(a != NULL && (uintptr_t)a % 4096 == 0, "tc_memalign", n);
    fill(a, n);
    free(a);
    void *c = tc_calloc(1, n);
    check(c != NULL && zero(c, 0, n), "tc_calloc", n);
    free(c);
    void *t = tc_malloc(n);
    check(t != NULL && nallocx(n, 0) <= malloc_usable_size(t), "nallocx", n);
    free(t);
}

static void *own_alloc(size_t n)
{
    return tc_malloc(n);
}

static void own_free(void *p)
{
    tc_free(p);
}
#endif

/* Where a fresh block lands: in libshmpool's arena, or not. */
static const char *landing(void)
{
    bool (*owns)(const void *) = (bool (*)(const void *))dlsym(RTLD_DEFAULT, "pool_owns");
    void *p = malloc(64);
    const char *where = owns != NULL && owns(p) ? "arena" : "private";
    free(p);
    return where;
}

int main(void)
{
    void *mine[NSIZES], *theirs[NSIZES];
    for (size_t i = 0; i < NSIZES; i++) {
        mix(sizes[i]);
        mine[i] = standard_block(sizes[i]);
        theirs[i] = own_alloc(sizes[i]);
        check(theirs[i] != NULL, "the allocator's own allocation", sizes[i]);
        fill(theirs[i], sizes[i]);
    }
    printf("parent: %s\n", landing());
    fflush(stdout);

    pid_t pid = fork();
    if (pid < 0) {
        perror("foreign: fork");
        return 1;
    }
    if (pid == 0) {
        who = "child";
        for (size_t i = 0; i < NSIZES; i++) {
            mix(sizes[i]);
            /* The parent's blocks, freed the other way round. */
            check(kept(mine[i], mine[i], sizes[i]) && kept(theirs[i], theirs[i], sizes[i]),
                  "the parent's blocks, seen from the child", sizes[i]);
            own_free(mine[i]);
            free(theirs[i]);
        }
        printf("child: %s\n", landing());
        fflush(stdout);
        _exit(0);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "foreign: the child ended with status %#x\n", (unsigned)status);
        return 1;
    }
    for (size_t i = 0; i < NSIZES; i++) {
        check(kept(mine[i], mine[i], sizes[i]) && kept(theirs[i], theirs[i], sizes[i]),
              "the parent's blocks after the child freed its copies", sizes[i]);
        free(mine[i]);
        own_free(theirs[i]);
    }
    return 0;
}
