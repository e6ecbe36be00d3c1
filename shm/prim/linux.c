/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — Linux primitives (see prim.h for the contracts).
 *
 * Plain system calls only: nothing here may allocate, because these run
 * inside malloc.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "prim/prim.h"

/* A memfd named POOL_MEMFD_NAME, so that a mapping of it reads
 * "/memfd:shmpool (deleted)" in /proc/PID/maps and shmpool-stat can find
 * the arena from outside.  Sized but not allocated, and created without
 * commit charge, like MAP_NORESERVE.  -1 when memfds are not to be had. */
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

/* The shared arena at `at`: the memfd (anonymous shared memory where
 * memfds cannot be had). */
static void *map_shared_at(void *at, size_t size, bool hugetlb)
{
    int fd = arena_fd(size, hugetlb);
    if (fd < 0 && hugetlb) {
        /* hugetlb memory comes from a memfd here, or not at all */
        errno = ENOSYS;
        return MAP_FAILED;
    }
    void *a = fd >= 0 ? mmap(at, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0)
                      : mmap(at, size, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    int err = errno;
    if (fd >= 0)
        close(fd); /* the mapping keeps the memory */
    errno = err;
    return a;
}

/* The private arena at `at`: anonymous memory, copied on write by a fork
 * like any heap, and freed page by page by MADV_DONTNEED.  A private
 * mapping of a memfd would not do: every page written would cost a page of
 * the file as well as its private copy.  Only the first OS page is the
 * memfd's, mapped privately, so that the arena still goes by its name in
 * /proc/PID/maps. */
static void *map_private_at(void *at, size_t size)
{
    void *a = mmap(at, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    size_t first = pool_prim_os_page_size_();
    int fd = a != MAP_FAILED ? arena_fd(first, false) : -1;
    if (fd >= 0) {
        /* Without it the arena works the same, only unnamed. */
        mmap(a, first, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE | MAP_FIXED, fd, 0);
        close(fd);
    }
    return a;
}

int pool_prim_map_arena_(size_t size, size_t align, pool_backing_t backing, bool shared,
                         void **out)
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
    void *a = shared ? map_shared_at((void *)aligned, size, backing == POOL_BACKING_HUGETLB)
                     : map_private_at((void *)aligned, size);
    if (a == MAP_FAILED) {
        int err = errno;
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

int pool_prim_advise_huge_(void *p, size_t size)
{
    return madvise(p, size, MADV_HUGEPAGE) == 0 ? 0 : errno;
}

int pool_prim_resident_(const void *p, size_t len, unsigned char *vec)
{
    return mincore((void *)p, len, vec) == 0 ? 0 : errno;
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

bool pool_prim_thp_(bool shared)
{
    char buf[128];
    if (!read_small_file(shared ? "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
                                : "/sys/kernel/mm/transparent_hugepage/enabled",
                         buf, sizeof buf))
        return false;
    /* The setting in force is the one in brackets; MADV_HUGEPAGE counts
     * under all but these two. */
    return strstr(buf, "[never]") == NULL && strstr(buf, "[deny]") == NULL;
}

int pool_prim_unmap_(void *p, size_t size)
{
    return munmap(p, size) == 0 ? 0 : errno;
}

int pool_prim_remove_(void *p, size_t size, bool shared)
{
    return madvise(p, size, shared ? MADV_REMOVE : MADV_DONTNEED) == 0 ? 0 : errno;
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

int pool_prim_zero_(void *p, size_t size)
{
    return madvise(p, size, MADV_DONTNEED) == 0 ? 0 : errno;
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

static void *as_ptr(pool_fn_t fn)
{
    void *p;
    memcpy(&p, &fn, sizeof p);
    return p;
}

static pool_fn_t as_fn(void *p)
{
    pool_fn_t fn;
    memcpy(&fn, &p, sizeof fn);
    return fn;
}

pool_fn_t pool_prim_next_symbol_(const char *name)
{
    /* RTLD_NEXT skips the pool's own definition (waithook.c), which is the one
     * a plain call would reach, and keeps any wrapper loaded after us. */
    return as_fn(dlsym(RTLD_NEXT, name));
}

/* ------------------------------------------------------------------------ */
/* The private heap                                                          */
/* ------------------------------------------------------------------------ */

typedef struct private_heap_s {
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void *(*memalign)(size_t, size_t);
    size_t (*usable)(void *);
    const char *foreign; /* the program's own allocator's file, when these are its */
} private_heap_t;

enum { HEAP_UNSET, HEAP_RESOLVING, HEAP_READY };

static private_heap_t heap;
static int heap_state; /* HEAP_*: the first thread to resolve publishes */
/* Set while this thread resolves: a lookup that fails allocates its error
 * message, and that malloc would come back here. */
static __thread bool heap_resolving __attribute__((tls_model("initial-exec")));


static __attribute__((noreturn)) void heap_unresolved(const char *name)
{
    static const char head[] = "shmpool: glibc's ", tail[] = "@" POOL_LIBC_VERSION
        " cannot be found: the pool has no private heap\n";
    pool_prim_write_(2, head, sizeof head - 1);
    pool_prim_write_(2, name, strlen(name));
    pool_prim_write_(2, tail, sizeof tail - 1);
    abort();
}

/* glibc's own definition of name: the version pins it, since a versioned
 * lookup passes over the unversioned definitions an allocator linked into
 * the program exports (tcmalloc and mimalloc define __libc_malloc and
 * malloc_usable_size, jemalloc the latter).  dlvsym allocates nothing when
 * it finds the symbol, so this is safe inside malloc; dlopen("libc.so.6")
 * is not (its first call builds libc's search list with malloc). */
static pool_fn_t libc_symbol(const char *name)
{
    void *sym = dlvsym(RTLD_DEFAULT, name, POOL_LIBC_VERSION);
    if (sym == NULL)
        heap_unresolved(name);
    return as_fn(sym);
}

/* The definition name would have without the pool: the program's own
 * allocator's.  glibc defines all of the malloc family, so it is found. */
static pool_fn_t own_symbol(const char *name)
{
    pool_fn_t fn = pool_prim_next_symbol_(name);
    if (fn == NULL)
        heap_unresolved(name);
    return fn;
}

static uint32_t gnu_hash(const char *s)
{
    uint32_t h = 5381;
    for (; *s != '\0'; s++)
        h = h * 33 + (unsigned char)*s;
    return h;
}

/* What exports() asks of dl_iterate_phdr: whether the object holding addr
 * defines each of names, read from its symbol table, not with dlsym,
 * whose failure allocates (the error message). */
typedef struct export_query_s {
    uintptr_t addr;
    const char *const *names;
    bool *found;
    const char *file; /* out: the object's path */
} export_query_t;

/* The object's address for a dynamic-section pointer: the dynamic linker
 * relocates them in place on most systems, and not where the section is
 * read-only. */
static uintptr_t dyn_ptr(const struct dl_phdr_info *info, ElfW(Addr) v)
{
    return v < info->dlpi_addr ? info->dlpi_addr + v : v;
}

static bool holds(const struct dl_phdr_info *info, uintptr_t addr)
{
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && addr >= start && addr - start < ph->p_memsz)
            return true;
    }
    return false;
}

/* Whether the GNU hash table gh over symtab/strtab has a defined name. */
static bool gnu_lookup(const uint32_t *gh, const ElfW(Sym) *symtab, const char *strtab,
                       const char *name)
{
    uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_words = gh[2];
    const uint32_t *buckets = gh + 4 + bloom_words * (sizeof(ElfW(Addr)) / 4);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t h = gnu_hash(name);
    uint32_t i = nbuckets == 0 ? 0 : buckets[h % nbuckets];
    if (i < symoffset)
        return false;
    for (;; i++) {
        uint32_t ch = chain[i - symoffset];
        if ((ch | 1) == (h | 1) && symtab[i].st_shndx != SHN_UNDEF &&
            strcmp(strtab + symtab[i].st_name, name) == 0)
            return true;
        if (ch & 1)
            return false;
    }
}

static int exports_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    export_query_t *q = arg;
    (void)size;
    if (!holds(info, q->addr))
        return 0;
    q->file = info->dlpi_name;
    const ElfW(Dyn) *dyn = NULL;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    const uint32_t *gh = NULL;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    for (; dyn != NULL && dyn->d_tag != DT_NULL; dyn++) {
        if (dyn->d_tag == DT_GNU_HASH)
            gh = (const uint32_t *)dyn_ptr(info, dyn->d_un.d_ptr);
        else if (dyn->d_tag == DT_SYMTAB)
            symtab = (const ElfW(Sym) *)dyn_ptr(info, dyn->d_un.d_ptr);
        else if (dyn->d_tag == DT_STRTAB)
            strtab = (const char *)dyn_ptr(info, dyn->d_un.d_ptr);
    }
    /* Without a GNU hash table (old or exotic linkers) nothing is found:
     * the allocator counts as one the pool does not know. */
    for (size_t i = 0; q->names[i] != NULL; i++)
        q->found[i] = gh != NULL && symtab != NULL && strtab != NULL &&
                      gnu_lookup(gh, symtab, strtab, q->names[i]);
    return 1;
}

/* The entry points by which the allocators the pool takes over are known
 * (override.c defines every one of theirs that takes or gives a block):
 * jemalloc's.  Not tcmalloc: its constructor initialises it through its
 * exported tc_malloc, so that taking tc_malloc over leaves it broken, and
 * leaving it would hand tc_free the arena's blocks. */
static const char *const taken_over[] = { "mallocx", NULL };

/* Into *h: glibc's allocator, unless the program's malloc is another
 * allocator's that the pool does not take over (tcmalloc's, mimalloc's,
 * whose tc_* and mi_* functions are as good as free(), or an unknown
 * one): then that
 * allocator's own functions, so that the program's blocks never meet a
 * second allocator. */
static void resolve(private_heap_t *h)
{
    if (heap_resolving)
        heap_unresolved("malloc");
    heap_resolving = true;
    h->malloc = (void *(*)(size_t))libc_symbol("__libc_malloc");
    h->free = (void (*)(void *))libc_symbol("__libc_free");
    h->calloc = (void *(*)(size_t, size_t))libc_symbol("__libc_calloc");
    h->realloc = (void *(*)(void *, size_t))libc_symbol("__libc_realloc");
    h->memalign = (void *(*)(size_t, size_t))libc_symbol("__libc_memalign");
    /* glibc exports no __libc_malloc_usable_size: its public name, pinned
     * to glibc by the version like the rest. */
    h->usable = (size_t (*)(void *))libc_symbol("malloc_usable_size");
    h->foreign = NULL;
    void *own = as_ptr(own_symbol("malloc"));
    Dl_info own_info, libc_info;
    if (dladdr(own, &own_info) != 0 && dladdr((void *)h->malloc, &libc_info) != 0 &&
        own_info.dli_fbase != libc_info.dli_fbase) {
        bool found[sizeof taken_over / sizeof taken_over[0]] = { false };
        export_query_t q = { (uintptr_t)own, taken_over, found, own_info.dli_fname };
        dl_iterate_phdr(exports_cb, &q);
        bool known = false;
        for (size_t i = 0; taken_over[i] != NULL; i++)
            known |= found[i];
        if (!known) {
            h->malloc = (void *(*)(size_t))own_symbol("malloc");
            h->free = (void (*)(void *))own_symbol("free");
            h->calloc = (void *(*)(size_t, size_t))own_symbol("calloc");
            h->realloc = (void *(*)(void *, size_t))own_symbol("realloc");
            h->memalign = (void *(*)(size_t, size_t))own_symbol("memalign");
            h->usable = (size_t (*)(void *))own_symbol("malloc_usable_size");
            h->foreign = q.file != NULL && *q.file != '\0' ? q.file : "the program itself";
        }
    }
    heap_resolving = false;
}

/* The heap, resolved by the first caller; a thread that comes by while
 * another resolves resolves a copy of its own (the same answer) rather
 * than wait, so that no caller ever waits on another. */
static const private_heap_t *private_heap(private_heap_t *local)
{
    int state = __atomic_load_n(&heap_state, __ATOMIC_ACQUIRE);
    if (state == HEAP_READY)
        return &heap;
    int expect = HEAP_UNSET;
    if (__atomic_compare_exchange_n(&heap_state, &expect, HEAP_RESOLVING, false,
                                    __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        resolve(&heap);
        __atomic_store_n(&heap_state, HEAP_READY, __ATOMIC_RELEASE);
        return &heap;
    }
    resolve(local);
    return local;
}

void *pool_prim_private_malloc_(size_t size)
{
    private_heap_t local;
    return private_heap(&local)->malloc(size);
}

void pool_prim_private_free_(void *p)
{
    private_heap_t local;
    private_heap(&local)->free(p);
}

void *pool_prim_private_calloc_(size_t n, size_t size)
{
    private_heap_t local;
    return private_heap(&local)->calloc(n, size);
}

void *pool_prim_private_realloc_(void *p, size_t size)
{
    private_heap_t local;
    return private_heap(&local)->realloc(p, size);
}

void *pool_prim_private_memalign_(size_t align, size_t size)
{
    private_heap_t local;
    return private_heap(&local)->memalign(align, size);
}

size_t pool_prim_private_usable_(void *p)
{
    private_heap_t local;
    return private_heap(&local)->usable(p);
}

const char *pool_prim_private_foreign_(void)
{
    private_heap_t local;
    return private_heap(&local)->foreign;
}

size_t pool_prim_os_page_size_(void)
{
    long n = sysconf(_SC_PAGESIZE);
    return n > 0 ? (size_t)n : 4096;
}
