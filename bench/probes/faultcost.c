/* SPDX-License-Identifier: BSD-2-Clause */
/* faultcost: what a minor page fault costs on this machine.
 *
 * A heap shared by processes pays one fault per page per process that
 * touches it: a page another process freed is in memory but not in this
 * process's page tables.  Whether that matters depends on what a fault
 * costs, which varies by an order of magnitude between bare metal and a
 * virtual machine, so the report measures it rather than assume it.
 *
 * Figures over 64 MiB touched at a 4 KiB stride, in ns per page: a first
 * touch of private anonymous memory (the page is allocated and zeroed),
 * with huge pages refused and then as the system gives it, which is what a
 * private heap pays (a kernel that maps anonymous memory in folios of
 * several pages, mTHP, faults once per folio; it may not do so for shared
 * memory); a first touch of shared memory (allocated and zeroed: the
 * shared heap's fresh pages), and the same with MADV_HUGEPAGE (what the
 * arena's SHMPOOL_HUGEPAGES=thp gets where shmem_enabled allows it); a
 * first touch in a child of shared memory
 * its parent already touched (the page exists and only needs mapping: the
 * shared heap's case); and a second touch (the loop itself, no fault).
 * Then two remedies: the pool's, a read of one byte a 64 KiB window before
 * the writes (a read fault maps the window's pages that are in memory, the
 * kernel's fault-around; a write fault maps one page), the read and the
 * touch together; and MADV_POPULATE_WRITE: what mapping the pages in one
 * call costs a child, what its first touch costs after that, and what the
 * call costs again over pages already mapped (the price of not knowing
 * which pages a process maps).  Median of five.
 * Usage: faultcost [MiB]
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

#define STRIDE 4096
#define ROUNDS 5
#define AROUND 65536 /* the kernel's fault-around window, unless tuned */

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* ns per page to write one byte of every page; *faults gets the faults. */
static double touch(volatile char *p, size_t len, long *faults)
{
    long f0 = minor_faults();
    double t0 = probe_now_ns();
    for (size_t off = 0; off < len; off += STRIDE)
        p[off] = 1;
    double t1 = probe_now_ns();
    *faults = minor_faults() - f0;
    return (t1 - t0) / (double)(len / STRIDE);
}

static double median(double *v)
{
    qsort(v, ROUNDS, sizeof *v, probe_cmp_double);
    return v[ROUNDS / 2];
}

static void *map(size_t len, int flags)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "faultcost: mmap of %zu bytes: %s\n", len, strerror(errno));
        exit(1);
    }
    return p;
}

/* What the child measured, in memory it shares with the parent; the
 * populate figures are negative when the call is not supported. */
typedef struct child_result_s {
    double parent_ns;      /* the parent's first touch, which allocates */
    long parent_faults;
    double ns;             /* first touch (with the reads before it, for AROUND) */
    long faults;
    double populate_ns;    /* MADV_POPULATE_WRITE before the touch */
    double repopulate_ns;  /* the same call again, after it */
} child_result_t;

/* ns per page of MADV_POPULATE_WRITE over [p, p+len), or -1 when this
 * kernel or libc lacks it (Linux 5.14). */
static double populate(char *p, size_t len)
{
#ifdef MADV_POPULATE_WRITE
    double t0 = probe_now_ns();
    if (madvise(p, len, MADV_POPULATE_WRITE) == 0)
        return (probe_now_ns() - t0) / (double)(len / STRIDE);
#else
    (void)p;
    (void)len;
#endif
    return -1;
}

/* How a child comes to its first touch: plainly, after a read of a byte a
 * window, or after MADV_POPULATE_WRITE. */
enum { PLAIN, READ_AROUND, POPULATED };

/* The reads, then the touch: ns per page of the two, and their faults. */
static double touch_around(volatile char *p, size_t len, long *faults)
{
    long f0 = minor_faults(), touch_faults;
    double t0 = probe_now_ns();
    for (size_t off = 0; off < len; off += AROUND)
        (void)p[off];
    double read_ns = probe_now_ns() - t0;
    double ns = touch(p, len, &touch_faults);
    *faults = minor_faults() - f0;
    return read_ns / (double)(len / STRIDE) + ns;
}

/* A child's first touch of shared pages the parent has touched, the way
 * `how` says: the child writes its figures into the shared result. */
static child_result_t shared_in_child(size_t len, int how)
{
    bool populated = how == POPULATED;
    char *p = map(len, MAP_SHARED);
    child_result_t *out = map(sizeof *out, MAP_SHARED);
    long parent_faults;
    double parent_ns = touch(p, len, &parent_faults);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "faultcost: fork: %s\n", strerror(errno));
        exit(1);
    }
    if (pid == 0) {
        out->populate_ns = populated ? populate(p, len) : -1;
        out->ns = how == READ_AROUND ? touch_around(p, len, &out->faults)
                                     : touch(p, len, &out->faults);
        out->repopulate_ns = populated ? populate(p, len) : -1;
        _exit(0);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "faultcost: the child failed\n");
        exit(1);
    }
    child_result_t r = *out;
    r.parent_ns = parent_ns;
    r.parent_faults = parent_faults;
    munmap(p, len);
    munmap(out, sizeof *out);
    return r;
}

/* One output line: a median, and the faults of the last round.  A figure
 * that needs an madvise advice names it in `missing` (else NULL): its
 * median is negative when the kernel refused it. */
static void line(const char *what, double *v, long faults, const char *missing)
{
    double m = median(v);
    if (m < 0 && missing != NULL)
        printf("  %-44s       n/a (no %s)\n", what, missing);
    else if (faults < 0)
        printf("  %-44s %9.0f\n", what, m);
    else
        printf("  %-44s %9.0f  (%ld faults)\n", what, m, faults);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: faultcost [MiB]   (1 to 4096, default 64)\n"
               "What a first touch costs, in ns per 4 KiB page over MiB touched: private\n"
               "memory (base pages, then as the system maps it), shared memory (fresh, with\n"
               "MADV_HUGEPAGE, in a second process), a page touched again, and in a\n"
               "second process after a read of a byte a 64 KiB window or after\n"
               "MADV_POPULATE_WRITE.  Median of five.\n");
}

int main(int argc, char **argv)
{
    size_t mib = 64;
    if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc > 2 || (argc == 2 && (sscanf(argv[1], "%zu", &mib) != 1 || mib == 0 ||
                                   mib > 4096))) {
        usage(stderr);
        return 2;
    }
    size_t len = mib << 20, pages = len / STRIDE;
    double first[ROUNDS], given[ROUNDS], fresh[ROUNDS], huge[ROUNDS], shared[ROUNDS], again[ROUNDS];
    double pop[ROUNDS], after[ROUNDS], repop[ROUNDS], around[ROUNDS];
    long f_first = 0, f_given = 0, f_huge = 0, f_again = 0;
    child_result_t plain = { 0 }, read_around = { 0 }, populated = { 0 };
    for (int r = 0; r < ROUNDS; r++) {
        char *p = map(len, MAP_PRIVATE);
        madvise(p, len, MADV_NOHUGEPAGE);
        first[r] = touch(p, len, &f_first);
        again[r] = touch(p, len, &f_again);
        munmap(p, len);
        p = map(len, MAP_PRIVATE);
        given[r] = touch(p, len, &f_given);
        munmap(p, len);
        p = map(len, MAP_SHARED);
        huge[r] = madvise(p, len, MADV_HUGEPAGE) == 0 ? touch(p, len, &f_huge) : -1;
        munmap(p, len);
        plain = shared_in_child(len, PLAIN);
        fresh[r] = plain.parent_ns;
        shared[r] = plain.ns;
        read_around = shared_in_child(len, READ_AROUND);
        around[r] = read_around.ns;
        populated = shared_in_child(len, POPULATED);
        pop[r] = populated.populate_ns;
        after[r] = populated.ns;
        repop[r] = populated.repopulate_ns;
    }
    printf("faultcost: %zu MiB, %zu pages of %d bytes, median of %d, ns per page\n", mib, pages,
           STRIDE, ROUNDS);
    line("private, first touch (allocate)", first, f_first, NULL);
    line("  the same, as the system maps it", given, f_given, NULL);
    line("shared, first touch (allocate)", fresh, plain.parent_faults, NULL);
    line("  the same, MADV_HUGEPAGE", huge, f_huge, "MADV_HUGEPAGE");
    line("shared, first touch in a second process", shared, plain.faults, NULL);
    line("touched again (no fault)", again, f_again, NULL);
    line("shared, second process, read a byte a 64 KiB", around, read_around.faults, NULL);
    line("shared, MADV_POPULATE_WRITE in a second one", pop, -1, "MADV_POPULATE_WRITE");
    line("  then its first touch", after, populated.faults, "MADV_POPULATE_WRITE");
    line("  then MADV_POPULATE_WRITE again (mapped)", repop, -1, "MADV_POPULATE_WRITE");
    return 0;
}
