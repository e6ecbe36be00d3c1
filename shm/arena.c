/* libshmpool — the arena: create, attach, detach, thread slots and fork.
 *
 * pool_create() maps one MAP_SHARED|MAP_NORESERVE region and lays out, at
 * fixed offsets: the header, the central caches, counters, the page heap, the
 * slots, the span descriptors, the page map, then the data pages.  Nothing
 * here calls malloc.  pool_attach() (after fork) validates the header and
 * gives the calling thread a slot; other threads of an attached process take
 * a slot at their first allocation and give it back when they exit.
 *
 * Fork: a MAP_SHARED page is not copied on write, so the child of an
 * attached process would write straight into its parent's live objects.
 * Instead the child replaces the whole arena mapping with a private copy
 * of what it inherited -- the tier state, the span descriptors, the page
 * map and the pages of every span in use -- what copy-on-write gives any
 * other heap, while the parent waits in its atfork handler so that the
 * copy is the state at fork.  The child then drops its copied thread cache
 * and becomes "forked": it serves new allocations from its private heap,
 * ignores (and counts) frees of what it inherited, and cannot attach to
 * the shared arena, which it no longer maps.  This holds in every mode and
 * in poold.  posix_spawn and vfork run no fork handlers and copy nothing.
 */
#include "pool-internal.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "prim/prim.h"

pool_arena_t pool_arena_;
pool_proc_state_t pool_proc_state_;
pool_tcache_sh_t pool_empty_tcache_;
__thread pool_tcache_sh_t *pool_tls_tcache_
    __attribute__((tls_model("initial-exec"))) = &pool_empty_tcache_;

static int proc_slot = -1;          /* slot taken by pool_attach() */
static bool attach_children;        /* SHMPOOL_MODE=children */
static bool arena_copied;           /* a forked child: the arena is a private copy */
static pthread_key_t thread_key;    /* destructor gives the slot back */
static pthread_once_t once_handlers = PTHREAD_ONCE_INIT;
static bool handlers_ok;

/* Arena alignment: a 2 MiB boundary lets the kernel use huge pages where it
 * can and keeps every page-aligned offset page-aligned in memory.  A
 * hugetlb arena starts on a 1 GiB boundary: there the kernel shares the
 * page-table pages of a shared mapping between the processes that map it,
 * so a page one process faulted in is mapped in all. */
#define POOL_ARENA_ALIGN ((size_t)2 << 20)
#define POOL_HUGETLB_ALIGN ((size_t)1 << 30)
/* Above this the 32-bit page indices of the page map would overflow. */
#define POOL_MAX_HEAP_SIZE ((size_t)1 << 44)
#define POOL_MIN_DATA_PAGES 64

/* ------------------------------------------------------------------------ */
/* Layout                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct layout_s {
    uint64_t off_central, off_centralstats, off_lockstats, off_pageheap, off_slots;
    uint64_t off_journals, off_crash, off_spans, off_pm_class, off_pm_span, off_owners;
    uint64_t off_data, end;
} layout_t;

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) & ~(a - 1);
}

static void layout_for(uint32_t npages, layout_t *l)
{
    uint64_t off = align_up(sizeof(pool_header_sh_t), 64);
    l->off_central = off;
    off += sizeof(pool_central_sh_t) * POOL_NCLASSES;
    l->off_centralstats = off = align_up(off, 64);
    off += sizeof(pool_centralstats_sh_t) * POOL_NCLASSES;
    l->off_lockstats = off = align_up(off, 64);
    off += sizeof(pool_lockstats_sh_t) * (1 + POOL_NCLASSES);
    l->off_pageheap = off = align_up(off, 64);
    off += sizeof(pool_pageheap_sh_t);
    l->off_slots = off = align_up(off, 64);
    off += sizeof(pool_slot_sh_t) * POOL_MAX_SLOTS;
    l->off_journals = off = align_up(off, 64);
    off += sizeof(pool_journal_sh_t) * (1 + POOL_NCLASSES);
    l->off_crash = off = align_up(off, 64);
    off += sizeof(pool_crash_sh_t);
    l->off_spans = off = align_up(off, 64);
    off += sizeof(pool_span_sh_t) * (uint64_t)npages;
    l->off_pm_class = off = align_up(off, 64);
    off += npages;
    l->off_pm_span = off = align_up(off, 64);
    off += sizeof(uint32_t) * (uint64_t)npages;
    l->off_owners = off = align_up(off, 64);
    off += (uint64_t)POOL_OWNER_ROW * npages;
    l->off_data = off = align_up(off, POOL_PAGE_SIZE);
    l->end = off + ((uint64_t)npages << POOL_PAGE_SHIFT);
}

/* Most data pages that fit in size bytes together with their metadata. */
static uint32_t pages_for(size_t size)
{
    layout_t l;
    layout_for(0, &l);
    uint64_t per_page =
        POOL_PAGE_SIZE + sizeof(pool_span_sh_t) + 1 + sizeof(uint32_t) + POOL_OWNER_ROW;
    if (size <= l.end)
        return 0;
    uint64_t n = (size - l.end) / per_page;
    for (;;) {
        layout_for((uint32_t)n, &l);
        if (l.end <= size || n == 0)
            return (uint32_t)n;
        n--;
    }
}

uint32_t pool_layout_version_(void)
{
    return POOL_LAYOUT_VERSION | (uint32_t)POOL_CONFIG_DEBUG << 8 |
           (uint32_t)POOL_CONFIG_SPINLOCK << 12 | (uint32_t)POOL_PAGE_SHIFT << 16;
}

size_t pool_min_heap_size(void)
{
    layout_t l;
    layout_for(POOL_MIN_DATA_PAGES, &l);
    return align_up(l.end, (uint64_t)1 << 20);
}

/* Point a's fields into the arena whose header is at h. */
static void arena_view(pool_arena_t *a, pool_header_sh_t *h)
{
    char *b = (char *)h;
    a->slots = (pool_slot_sh_t *)(b + h->off_slots);
    a->central = (pool_central_sh_t *)(b + h->off_central);
    a->cstats = (pool_centralstats_sh_t *)(b + h->off_centralstats);
    a->lockstats = (pool_lockstats_sh_t *)(b + h->off_lockstats);
    a->ph = (pool_pageheap_sh_t *)(b + h->off_pageheap);
    a->spans = (pool_span_sh_t *)(b + h->off_spans);
    a->pm_class = (uint8_t *)(b + h->off_pm_class);
    a->pm_span = (uint32_t *)(b + h->off_pm_span);
    a->journals = (pool_journal_sh_t *)(b + h->off_journals);
    a->owners = (uint8_t *)(b + h->off_owners);
    a->crash = (pool_crash_sh_t *)(b + h->off_crash);
    a->data = (uintptr_t)(b + h->off_data);
    a->npages = h->npages;
    a->data_size = (uintptr_t)h->npages << POOL_PAGE_SHIFT;
    a->hdr = h;
}

int pool_arena_view_(pool_arena_t *a, void *map, size_t len)
{
    pool_header_sh_t *h = map;
    memset(a, 0, sizeof *a);
    if (len < sizeof *h || h->magic != POOL_MAGIC)
        return EINVAL;
    if (h->version != pool_layout_version_() || h->page_shift != POOL_PAGE_SHIFT)
        return EPROTO;
    layout_t l;
    layout_for(h->npages, &l);
    if (h->off_data != l.off_data || h->off_owners != l.off_owners || l.off_data > len)
        return EINVAL;
    pool_sizeclass_init_();
    arena_view(a, h);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Threads and fork                                                          */
/* ------------------------------------------------------------------------ */

__thread bool pool_tls_exited_ __attribute__((tls_model("initial-exec")));

/* A free slot has no tag, so that a process killed right after claiming
 * it, before writing its own, is never taken for the previous holder.  The
 * state turns free before the life lock is given back: a claimer takes the
 * lock first, so nobody claims a slot still being released. */
void pool_slot_release_(pool_slot_sh_t *slot)
{
    slot->tag = POOL_NO_TAG;
    pool_atomic_store_release(&slot->xflags, 0);
    pool_atomic_store_release(&slot->xstate, POOL_SLOT_FREE);
    pool_life_release_(&slot->life);
}

/* Take a free slot for the calling thread: its life lock, then its state.
 * A life lock whose holder died while the slot was free (a claimer killed
 * mid-claim, a releaser after its release) is as good as a free one. */
static bool slot_claim(pool_slot_sh_t *slot, uint32_t pid)
{
    if (pool_atomic_load_relaxed(&slot->xstate) != POOL_SLOT_FREE)
        return false;
    if (pool_life_try_(&slot->life, &slot->xflags, NULL) == POOL_LIFE_HELD)
        return false;
    uint32_t expect = POOL_SLOT_FREE;
    if (!pool_atomic_cas(&slot->xstate, &expect, pid)) {
        pool_life_release_(&slot->life);
        return false;
    }
    pool_atomic_store_release(&slot->xflags, 0);
    return true;
}

/* Owner tag of the process attached through slot `slot`. */
static uint16_t tag_of_slot(int slot)
{
    return slot >= 0 && slot < POOL_MAX_TAG ? (uint16_t)(slot + 1) : POOL_NO_TAG;
}

/* Thread exit: flush the cache and give the slot back.  Runs only for the
 * thread that set the key; a forked child cleared it.  The attach slot is
 * kept while the process lives: its number is the tag of every object the
 * process holds, which must not pass to another process.  Its life lock
 * goes with the thread, though (the kernel would mark it owner-dead, the
 * sign of a dead process): from now on the process is judged alive by its
 * pid and start time. */
static void thread_exit(void *arg)
{
    pool_slot_sh_t *slot = arg;
    if (pool_tls_tcache_ != &slot->tcache)
        return;
    pool_tcache_flush_(&pool_arena_, &slot->tcache);
    pool_tls_tcache_ = &pool_empty_tcache_;
    pool_tls_exited_ = true;
    if (slot->tcache.slot != proc_slot) {
        pool_slot_release_(slot);
        return;
    }
    uint64_t start = 0;
    pool_prim_start_time_(pool_prim_getpid_(), &start);
    slot->start = start;
    pool_atomic_or(&slot->xflags, POOL_SLOT_BYPID);
    pool_life_release_(&slot->life);
}

/* The forking thread's gate: the parent waits on it until the child has
 * copied the arena. */
static __thread int fork_gate[2] = { -1, -1 };

static void fork_prepare(void)
{
    fork_gate[0] = fork_gate[1] = -1;
    if (pool_proc_state_ != POOL_PROC_ATTACHED)
        return;
    int rc = pool_prim_gate_open_(fork_gate);
    if (rc != 0) {
        fork_gate[0] = fork_gate[1] = -1;
        pool_error_(rc, "fork: cannot wait for the child's copy of the arena; objects the "
                        "parent changes meanwhile may reach the child changed");
    }
}

static void fork_parent(void)
{
    if (fork_gate[0] < 0)
        return;
    pool_prim_gate_wait_(fork_gate);
    fork_gate[0] = fork_gate[1] = -1;
}

/* The child's private copy of everything it may read of what it
 * inherited: the header and tier state, the span descriptors and page map
 * of the carved pages, and the pages of every span in use (free spans'
 * bytes mean nothing).  Other processes go on changing the shared arena
 * while the child copies; none of them can change a span the parent holds
 * while it waits, so the parent's objects are copied whole.  A descriptor
 * caught mid-change makes the walk copy page by page until the next one
 * that starts a span.  One mapping replaces the whole arena in a single
 * step, so nothing of the shared one stays mapped.  Costs a copy of the
 * bytes in use (see libshmpool(7)); the pages left out read as zero. */
static int copy_arena(void)
{
    pool_arena_t *a = &pool_arena_;
    pool_header_sh_t *h = a->hdr;
    void *m;
    int rc = pool_prim_map_private_(h->size, &m);
    if (rc != 0)
        return rc;
    char *dst = m;
    const char *src = (const char *)h;
    uint32_t carved = pool_atomic_load_acquire(&a->ph->carved);
    if (carved > a->npages)
        carved = a->npages;
    memcpy(dst, src, h->off_slots);
    memcpy(dst + h->off_spans, src + h->off_spans, sizeof(pool_span_sh_t) * carved);
    memcpy(dst + h->off_pm_class, src + h->off_pm_class, carved);
    memcpy(dst + h->off_pm_span, src + h->off_pm_span, sizeof(uint32_t) * carved);
    /* Runs of pages in use are copied whole: [run, p) so far. */
    uint32_t run = 0;
    for (uint32_t p = 0; p <= carved;) {
        uint32_t n = 1;
        bool is_free = p == carved;
        if (p < carved) {
            const pool_span_sh_t *s = &a->spans[p];
            n = pool_atomic_load_relaxed(&s->npages);
            is_free = pool_atomic_load_relaxed(&s->state) == POOL_SPAN_FREE;
            if (pool_atomic_load_relaxed(&s->start) != p || n == 0 || n > carved - p) {
                n = 1;
                is_free = false;
            }
        }
        if (is_free) {
            if (p > run) {
                size_t off = h->off_data + ((size_t)run << POOL_PAGE_SHIFT);
                pool_prim_copy_(dst + off, src + off, (size_t)(p - run) << POOL_PAGE_SHIFT);
            }
            run = p + n;
        }
        p += n;
    }
    rc = pool_prim_move_(m, h, h->size);
    if (rc != 0) {
        pool_prim_unmap_(m, h->size);
        return rc;
    }
    /* The copy is this process's alone: its locks may be made afresh
     * (one another process held at fork would never be given back). */
    pool_lock_init_(&a->ph->lock, POOL_LOCK_PAGEHEAP);
    for (unsigned cls = 0; cls < POOL_NCLASSES; cls++)
        pool_lock_init_(&a->central[cls].lock, POOL_LOCK_CENTRAL);
    return 0;
}

static void fork_child(void)
{
    pool_tls_exited_ = false;
    pool_self_pid_ = 0;
    if (pool_proc_state_ == POOL_PROC_ATTACHED) {
        int rc = copy_arena();
        if (fork_gate[0] >= 0) {
            pool_prim_gate_release_(fork_gate);
            fork_gate[0] = fork_gate[1] = -1;
        }
        /* Going on would write into the parent's objects. */
        if (rc != 0)
            pool_fatal_("forked child %d could not copy the arena (error %d); it would share "
                        "its parent's objects", pool_prim_getpid_(), rc);
        arena_copied = true;
        /* Drop, never flush: the parent still owns these objects. */
        pool_tls_tcache_ = &pool_empty_tcache_;
        pthread_setspecific(thread_key, NULL);
        pool_proc_state_ = POOL_PROC_FORKED;
        proc_slot = -1;
    } else if (attach_children && pool_proc_state_ == POOL_PROC_PRIVATE) {
        int rc = pool_attach();
        if (rc != 0)
            pool_error_(rc, "child %d could not attach to the arena; it stays private",
                        pool_prim_getpid_());
    }
}

static void install_handlers(void)
{
    handlers_ok = pthread_key_create(&thread_key, thread_exit) == 0 &&
                  pthread_atfork(fork_prepare, fork_parent, fork_child) == 0;
}

/* The first free slot for the calling thread, or NULL.  A process's first
 * slot is its tag: it never takes the last slot, which has none (its
 * objects could not be reclaimed when it dies). */
static pool_slot_sh_t *claim_any(pool_arena_t *a)
{
    unsigned n = proc_slot >= 0 ? POOL_MAX_SLOTS : POOL_MAX_TAG;
    for (unsigned i = 0; i < n; i++)
        if (slot_claim(&a->slots[i], (uint32_t)pool_prim_getpid_()))
            return &a->slots[i];
    return NULL;
}

pool_tcache_sh_t *pool_thread_setup_(void)
{
    pool_arena_t *a = &pool_arena_;
    if (pool_tls_exited_)
        return NULL;
    pool_slot_sh_t *slot = claim_any(a);
    /* Slots run short: the dead may hold them. */
    if (slot == NULL && pool_reap_dead_(a) > 0)
        slot = claim_any(a);
    if (slot != NULL) {
        unsigned i = (unsigned)(slot - a->slots);
        slot->used = 1;
        slot->pid = pool_prim_getpid_();
        slot->tid = pool_prim_gettid_();
        /* The first slot of a process (pool_attach) names its tag. */
        uint16_t tag = tag_of_slot(proc_slot >= 0 ? proc_slot : (int)i);
        slot->tag = tag;
        pool_tcache_init_(a, &slot->tcache, (uint16_t)i);
        slot->tcache.tag = tag;
        pool_tls_tcache_ = &slot->tcache;
        pthread_setspecific(thread_key, slot);
        return &slot->tcache;
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                 */
/* ------------------------------------------------------------------------ */

/* What every process using an arena needs before it touches one: the class
 * table, and each lock kind's repair. */
static void tiers_init(void)
{
    pool_sizeclass_init_();
    pool_pageheap_register_();
    pool_central_register_();
}

/* SHMPOOL_HUGEPAGES: what the arena is made of.  Unset or "off": base
 * pages.  "thp": transparent huge pages where the system gives them to
 * shared memory that asks.  "hugetlb": reserved huge pages, all of the
 * arena, on a 1 GiB boundary so that processes share the page-table pages
 * that map it.  What cannot be had is said on one line and the arena falls
 * back to base pages. */
static pool_backing_t backing_wanted(void)
{
    const char *v = pool_prim_getenv_("SHMPOOL_HUGEPAGES");
    if (v == NULL || *v == '\0' || strcmp(v, "off") == 0)
        return POOL_BACKING_PAGES;
    if (strcmp(v, "thp") == 0) {
        if (pool_prim_thp_shared_())
            return POOL_BACKING_THP;
        pool_error_(0, "SHMPOOL_HUGEPAGES=thp: the system gives shared memory no transparent "
                       "huge pages (/sys/kernel/mm/transparent_hugepage/shmem_enabled); "
                       "using base pages");
        return POOL_BACKING_PAGES;
    }
    if (strcmp(v, "hugetlb") == 0)
        return POOL_BACKING_HUGETLB;
    pool_error_(0, "SHMPOOL_HUGEPAGES='%s' is not off, thp or hugetlb; using base pages", v);
    return POOL_BACKING_PAGES;
}

/* Map the arena as backing asks, or with base pages when it cannot be had;
 * *backing gets what it is made of. */
static int map_arena(size_t *size, pool_backing_t *backing, void **m)
{
    if (*backing == POOL_BACKING_HUGETLB) {
        size_t huge = (size_t)align_up(*size, POOL_HUGE_PAGE);
        int rc = pool_prim_map_shared_(huge, POOL_HUGETLB_ALIGN, POOL_BACKING_HUGETLB, m);
        if (rc == 0) {
            *size = huge;
            return 0;
        }
        pool_error_(rc, "SHMPOOL_HUGEPAGES=hugetlb: cannot reserve %lu huge pages of 2 MiB "
                        "(reserve them in /proc/sys/vm/nr_hugepages); using base pages",
                    (unsigned long)(huge / POOL_HUGE_PAGE));
        *backing = POOL_BACKING_PAGES;
    }
    return pool_prim_map_shared_(*size, POOL_ARENA_ALIGN, *backing, m);
}

int pool_create(size_t size)
{
    if (pool_arena_.hdr != NULL)
        return EEXIST;
    if (size < pool_min_heap_size() || size > POOL_MAX_HEAP_SIZE)
        return EINVAL;
    size = (size_t)align_up(size, POOL_PAGE_SIZE);
    tiers_init();
    pthread_once(&once_handlers, install_handlers);

    void *m;
    pool_backing_t backing = backing_wanted();
    int rc = map_arena(&size, &backing, &m);
    if (rc != 0)
        return rc;
    uint32_t npages = pages_for(size);
    layout_t l;
    layout_for(npages, &l);
    pool_header_sh_t *h = m;
    h->version = pool_layout_version_();
    h->page_shift = POOL_PAGE_SHIFT;
    h->base = (uintptr_t)m;
    h->size = size;
    h->npages = npages;
    h->backing = backing;
    h->off_slots = l.off_slots;
    h->off_central = l.off_central;
    h->off_centralstats = l.off_centralstats;
    h->off_lockstats = l.off_lockstats;
    h->off_pageheap = l.off_pageheap;
    h->off_spans = l.off_spans;
    h->off_pm_class = l.off_pm_class;
    h->off_pm_span = l.off_pm_span;
    h->off_data = l.off_data;
    h->off_journals = l.off_journals;
    h->off_owners = l.off_owners;
    h->off_crash = l.off_crash;
    pool_arena_t *a = &pool_arena_;
    arena_view(a, h);
    rc = pool_lock_init_(&a->ph->lock, POOL_LOCK_PAGEHEAP);
    for (unsigned cls = 0; rc == 0 && cls < POOL_NCLASSES; cls++)
        rc = pool_lock_init_(&a->central[cls].lock, POOL_LOCK_CENTRAL);
    for (unsigned i = 0; rc == 0 && i < POOL_MAX_SLOTS; i++)
        rc = pool_life_init_(&a->slots[i].life);
    if (rc != 0) {
        pool_prim_unmap_(m, size);
        memset(a, 0, sizeof *a);
        return rc;
    }
    pool_pageheap_init_(a);
    pool_central_init_(a);
    /* Last: a header with the magic is a complete header. */
    pool_atomic_store_release(&h->magic, POOL_MAGIC);
    return 0;
}

int pool_attach(void)
{
    if (pool_proc_state_ == POOL_PROC_ATTACHED)
        return EALREADY;
    pool_header_sh_t *h = pool_arena_.hdr;
    if (h == NULL || arena_copied)
        return ENOENT;
    if (h->magic != POOL_MAGIC || h->version != pool_layout_version_() ||
        h->base != (uintptr_t)h || h->page_shift != POOL_PAGE_SHIFT) {
        pool_error_(0, "cannot attach to the arena at %p: its header says magic %lx, base %p, "
                    "layout version %x; this library expects magic %lx, base %p, version %x",
                    (void *)h, (unsigned long)h->magic, (void *)h->base, h->version,
                    (unsigned long)POOL_MAGIC, (void *)h, pool_layout_version_());
        return EPROTO;
    }
    tiers_init();
    pthread_once(&once_handlers, install_handlers);
    if (!handlers_ok) {
        pool_error_(0, "cannot attach: thread-exit or fork handler registration failed");
        return EAGAIN;
    }
    pool_crash_config_();
    pool_tls_exited_ = false;
    pool_self_pid_ = pool_prim_getpid_();
    proc_slot = -1;
    /* Whoever notices first reaps: a process that attaches reaps the dead
     * before it takes a slot, so that slots and memory pass on without a
     * master that knows the pool. */
    pool_reap_dead_(&pool_arena_);
    pool_tcache_sh_t *tc = pool_thread_setup_();
    if (tc == NULL) {
        pool_atomic_inc(&h->xattach_failures);
        return EAGAIN;
    }
    proc_slot = tc->slot;
    pool_proc_state_ = POOL_PROC_ATTACHED;
    return 0;
}

void pool_detach(void)
{
    if (pool_proc_state_ != POOL_PROC_ATTACHED)
        return;
    pool_tcache_sh_t *tc = pool_tls_tcache_;
    if (tc != &pool_empty_tcache_) {
        pool_tcache_flush_(&pool_arena_, tc);
        pool_tls_tcache_ = &pool_empty_tcache_;
        pthread_setspecific(thread_key, NULL);
        if (tc->slot != proc_slot)
            pool_slot_release_(&pool_arena_.slots[tc->slot]);
    }
    /* Objects the process still holds keep living after the slot (and
     * with it the tag) passes to another process. */
    pool_disown_(&pool_arena_, tag_of_slot(proc_slot));
    if (proc_slot >= 0)
        pool_slot_release_(&pool_arena_.slots[proc_slot]);
    pool_proc_state_ = POOL_PROC_PRIVATE;
    proc_slot = -1;
}

/* A process that exits gives its thread cache back on the way: what its
 * objects hold is garbage once it is gone, but its cache is free memory
 * that a reap would otherwise walk object by object.  The slot itself
 * stays until the process is gone (exit goes on using the heap after this
 * runs: stdio, other destructors), and whoever notices its death then
 * reaps the rest. */
__attribute__((destructor)) static void process_exit(void)
{
    if (pool_proc_state_ == POOL_PROC_ATTACHED && pool_tls_tcache_ != &pool_empty_tcache_)
        pool_thread_flush();
}

void pool_destroy_(void)
{
    if (pool_arena_.hdr == NULL)
        return;
    /* The thread's robust-mutex list names the life locks it holds: they
     * must be given back before their memory goes, or the next robust
     * mutex it takes follows a pointer into nothing. */
    pool_detach();
    pool_prim_unmap_(pool_arena_.hdr, pool_arena_.hdr->size);
    memset(&pool_arena_, 0, sizeof pool_arena_);
    arena_copied = false;
    pool_tls_tcache_ = &pool_empty_tcache_;
    pool_proc_state_ = POOL_PROC_PRIVATE;
    proc_slot = -1;
}

void pool_attach_children_(void)
{
    attach_children = true;
}

bool pool_arena_copied_(void)
{
    return arena_copied;
}

bool pool_attached(void)
{
    return pool_proc_state_ == POOL_PROC_ATTACHED;
}

int pool_slot(void)
{
    return proc_slot;
}

const char *pool_name(void)
{
    return "shmpool";
}

bool pool_owns(const void *p)
{
    return pool_in_arena(p);
}
