/* libshmpool — Linux primitives (see prim.h for the contracts).
 *
 * Plain system calls only: nothing here may allocate, because these run
 * inside malloc.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "prim/prim.h"

/* The shared memory behind the arena: a memfd named POOL_MEMFD_NAME, so
 * that the mapping reads "/memfd:shmpool (deleted)" in /proc/PID/maps and
 * shmpool-stat can find it from outside.  Sized but not allocated, and
 * created without commit charge, like MAP_NORESERVE.  -1 when memfds are
 * not to be had: the caller maps anonymous shared memory instead. */
static int arena_fd(size_t size, bool hugetlb)
{
#ifdef HAVE_MEMFD_CREATE
    int fd = memfd_create(POOL_MEMFD_NAME, MFD_CLOEXEC | (hugetlb ? MFD_HUGETLB : 0));
    if (fd < 0)
        return -1;
    if (ftruncate(fd, (off_t)size) != 0) {
        close(fd);
        return -1;
    }
    return fd;
#else
    (void)size;
    (void)hugetlb;
    return -1;
#endif
}

int pool_prim_map_shared_(size_t size, size_t align, pool_backing_t backing, void **out)
{
    /* Reserve size + align, then place the arena on an aligned address in
     * it and trim both ends: no MAP_FIXED guessing at a free range. */
    size_t span = size + align;
    if (span < size)
        return EINVAL;
    void *m = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return errno;
    uintptr_t start = (uintptr_t)m;
    uintptr_t aligned = (start + align - 1) & ~(uintptr_t)(align - 1);
    bool hugetlb = backing == POOL_BACKING_HUGETLB;
    int fd = arena_fd(size, hugetlb);
    if (fd < 0 && hugetlb) {
        /* hugetlb memory comes from a memfd here, or not at all */
        munmap(m, span);
        return ENOSYS;
    }
    void *a = fd >= 0 ? mmap((void *)aligned, size, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_FIXED, fd, 0)
                      : mmap((void *)aligned, size, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    int err = errno;
    if (a != MAP_FAILED && backing == POOL_BACKING_THP)
        madvise(a, size, MADV_HUGEPAGE);
    if (fd >= 0)
        close(fd); /* the mapping keeps the memory */
    if (a == MAP_FAILED) {
        munmap(m, span);
        return err;
    }
    if (aligned > start)
        munmap(m, aligned - start);
    uintptr_t end = start + span, want_end = aligned + size;
    if (end > want_end)
        munmap((void *)want_end, end - want_end);
    *out = (void *)aligned;
    return 0;
}

/* The start of a small kernel file (/proc, /sys) into buf, NUL-terminated;
 * false when it cannot be read or is empty. */
static bool read_small_file(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    return true;
}

bool pool_prim_thp_shared_(void)
{
    char buf[128];
    if (!read_small_file("/sys/kernel/mm/transparent_hugepage/shmem_enabled", buf, sizeof buf))
        return false;
    /* The setting in force is the one in brackets; MADV_HUGEPAGE counts
     * under all but these two. */
    return strstr(buf, "[never]") == NULL && strstr(buf, "[deny]") == NULL;
}

int pool_prim_unmap_(void *p, size_t size)
{
    return munmap(p, size) == 0 ? 0 : errno;
}

int pool_prim_remove_(void *p, size_t size)
{
    return madvise(p, size, MADV_REMOVE) == 0 ? 0 : errno;
}

int pool_prim_map_private_(size_t size, void **out)
{
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return errno;
    *out = m;
    return 0;
}

void pool_prim_copy_(void *dst, const void *src, size_t len)
{
#ifdef MADV_POPULATE_WRITE
    /* Before Linux 5.14 these fail with EINVAL, and the copy faults. */
    madvise((void *)src, len, MADV_POPULATE_READ);
    madvise(dst, len, MADV_POPULATE_WRITE);
#endif
    memcpy(dst, src, len);
}

int pool_prim_move_(void *from, void *to, size_t size)
{
    return mremap(from, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, to) == MAP_FAILED ? errno : 0;
}

int pool_prim_gate_open_(int fds[2])
{
    return pipe2(fds, O_CLOEXEC) == 0 ? 0 : errno;
}

void pool_prim_gate_wait_(int fds[2])
{
    char c;
    close(fds[1]);
    /* EOF once the child closed its copy of the write end (or died). */
    while (read(fds[0], &c, 1) < 0 && errno == EINTR)
        ;
    close(fds[0]);
}

void pool_prim_gate_release_(int fds[2])
{
    close(fds[1]);
    close(fds[0]);
}

void pool_prim_write_(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        buf += n;
        len -= (size_t)n;
    }
}

int pool_prim_getpid_(void)
{
    return (int)getpid();
}

int pool_prim_gettid_(void)
{
    return (int)syscall(SYS_gettid);
}

void pool_prim_yield_(void)
{
    sched_yield();
}

int pool_prim_cpu_(void)
{
    return sched_getcpu();
}

uint64_t pool_prim_now_ns_(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t pool_prim_now_coarse_ns_(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool pool_prim_alive_(int pid)
{
    return kill(pid, 0) == 0 || errno == EPERM;
}

int pool_prim_start_time_(int pid, uint64_t *out)
{
    char path[32] = "/proc/", digits[12], buf[1024];
    size_t n = 0, at = 6;
    for (unsigned v = (unsigned)pid; n == 0 || v > 0; v /= 10)
        digits[n++] = (char)('0' + v % 10);
    while (n > 0)
        path[at++] = digits[--n];
    memcpy(path + at, "/stat", 6);
    if (!read_small_file(path, buf, sizeof buf))
        return ESRCH;
    /* The name, in parentheses, may hold anything: count fields after
     * its last ')'.  starttime is the 20th of them (field 22). */
    const char *p = strrchr(buf, ')');
    for (unsigned field = 0; p != NULL && field < 20; field++)
        p = strchr(p + 1, ' ');
    if (p == NULL)
        return ESRCH;
    uint64_t v = 0;
    for (p++; *p >= '0' && *p <= '9'; p++)
        v = v * 10 + (uint64_t)(*p - '0');
    *out = v;
    return 0;
}

void pool_prim_stop_self_(void)
{
    kill(getpid(), SIGSTOP);
}

void pool_prim_kill_self_(void)
{
    for (;;)
        kill(getpid(), SIGKILL);
}

const char *pool_prim_getenv_(const char *name)
{
    return getenv(name);
}

pool_fn_t pool_prim_next_symbol_(const char *name)
{
    /* RTLD_NEXT skips the pool's own definition (override.c, wait.c),
     * which is the one a plain call would reach. */
    void *sym = dlsym(RTLD_NEXT, name);
    pool_fn_t fn;
    memcpy(&fn, &sym, sizeof fn);
    return fn;
}

size_t pool_prim_os_page_size_(void)
{
    long n = sysconf(_SC_PAGESIZE);
    return n > 0 ? (size_t)n : 4096;
}
