/* first-touch: ns per 4 KiB page of a first write to 256 MiB of fresh
 * shared memory with MADV_HUGEPAGE, and its fault count, once (not a
 * median: the point is what one first use costs right after some other
 * process gave memory back).  cc -O2 -o first-touch first-touch.c */
#include <stdio.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

static long faults(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_minflt;
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(void)
{
    size_t len = (size_t)256 << 20;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || madvise(p, len, MADV_HUGEPAGE) != 0) {
        perror("first-touch");
        return 1;
    }
    long f0 = faults();
    double t0 = now_ns();
    for (size_t off = 0; off < len; off += 4096)
        p[off] = 1;
    double t1 = now_ns();
    printf("shared, MADV_HUGEPAGE, first touch: %.0f ns a 4 KiB page, %ld faults\n",
           (t1 - t0) / (double)(len / 4096), faults() - f0);
    return 0;
}
