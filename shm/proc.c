/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — the process lifecycle: create, attach, detach, thread
 * slots, thread exit and fork.
 *
 * pool_create() has arena.c map and lay out the arena, then readies its
 * locks and tiers.  pool_attach() (after fork) validates the header and
 * gives the calling thread a slot; other threads of an attached process
 * take a slot at their first allocation and give it back when they exit.
 *
 * Fork: the child of an attached process sees what it inherited as a
 * private copy, as with any heap.  A private arena (SHMPOOL_MODE=process,
 * pool_create_private_) is one by copy-on-write.  A MAP_SHARED page is not
 * copied on write, so the child of a process attached to a shared arena
 * would write straight into its parent's live objects: instead the child
 * replaces the whole arena mapping with a private copy of what it
 * inherited (pool_arena_fork_child_), while the parent waits in its atfork
 * handler so that the copy is the state at fork.  Either way the child
 * then drops its copied thread cache and becomes "forked": it serves new
 * allocations from its private heap, ignores (and counts) frees of what it
 * inherited, and cannot attach to an arena again.  This holds in every
 * mode and in poold.  posix_spawn and vfork run no fork handlers and copy
 * nothing.
 */
#include "pool-internal.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "prim/prim.h"

pool_proc_state_t pool_proc_state_;
#if POOL_CONFIG_STATS
/* What the empty cache's slow paths count lands here, as no slot's.  A
 * build without statistics reads no counters, so it has no such row. */
static POOL_READ_MOSTLY pool_binstats_t empty_stats[POOL_NCLASSES];
POOL_READ_MOSTLY pool_tcache_sh_t pool_empty_tcache_ = { .stats = empty_stats };
#else
POOL_READ_MOSTLY pool_tcache_sh_t pool_empty_tcache_;
#endif
__thread pool_tcache_sh_t *pool_tls_tcache_
    POOL_TLS = &pool_empty_tcache_;

/* The process's owner tag, the slot pool_attach() took plus one (a
 * process's first slot is below POOL_MAX_TAG); POOL_NO_TAG (0) while it is
 * not attached, which keeps it out of .data, whose page a child's write
 * would copy (POOL_READ_MOSTLY). */
static uint16_t proc_tag;
static bool attach_children;        /* SHMPOOL_MODE=children */
static bool arena_copied;           /* a forked child: the arena is a private copy */
static pthread_key_t thread_key;    /* destructor gives the slot back */
static pthread_once_t once_handlers = PTHREAD_ONCE_INIT;
static bool handlers_ok;

static int proc_slot(void)
{
    return (int)proc_tag - 1;
}

/* ------------------------------------------------------------------------ */
/* Threads and fork                                                          */
/* ------------------------------------------------------------------------ */

__thread bool pool_tls_exited_ POOL_TLS;

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
    pool_tcache_sh_t *tc = pool_slot_tcache(&pool_arena_, slot);
    if (pool_tls_tcache_ != tc)
        return;
    pool_tcache_flush_(&pool_arena_, tc);
    pool_tls_tcache_ = &pool_empty_tcache_;
    pool_tls_exited_ = true;
    if (tc->slot != proc_slot()) {
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
 * copied a shared arena. */
static __thread int fork_gate[2] = { -1, -1 };

static void fork_prepare(void)
{
    fork_gate[0] = fork_gate[1] = -1;
    if (pool_proc_state_ != POOL_PROC_ATTACHED || !pool_arena_.hdr->shared)
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

static void fork_child(void)
{
    pool_tls_exited_ = false;
    pool_self_pid_ = 0;
    if (pool_proc_state_ == POOL_PROC_ATTACHED) {
        int rc = pool_arena_fork_child_();
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
        proc_tag = POOL_NO_TAG;
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

/* Slots are made takeable this many at a time (3.3 KiB of descriptors):
 * the table touches only the pages of the slots made. */
#define SLOTS_GROW 32u

/* Make the life locks of slots [top, want) and raise the top past those
 * made: a slot is takeable only once its lock is. */
static void slots_make(pool_arena_t *a, unsigned top, unsigned want)
{
    unsigned end = top;
    while (end < want && pool_life_init_(&a->slots[end].life) == 0)
        end++;
    if (end > top)
        pool_atomic_store_release(&a->hdr->xslots_top, end);
}

/* Make slot `top` takeable, unless another thread did, and with it the
 * rest of its SLOTS_GROW.  Under the page-heap lock, so that a thread that
 * dies in between leaves the top where it was and the next makes them
 * again.  The lock is waited for as a reaper waits: a stopped holder makes
 * this attach fail, not hang, unless the top rose meanwhile (the grower
 * raised it, then stopped in a page allocation of its own).  False when
 * the top did not rise. */
static bool slots_grow(pool_arena_t *a, unsigned top)
{
    struct timespec deadline = pool_deadline_in_(POOL_WAIT_MS);
    if (!pool_lock_timed_(a, &a->ph->lock, POOL_LOCK_PAGEHEAP, 0, &deadline))
        return pool_slots_top(a) > top;
    if (pool_atomic_load_relaxed(&a->hdr->xslots_top) == top) {
        unsigned want = (top / SLOTS_GROW + 1) * SLOTS_GROW;
        slots_make(a, top, want < POOL_MAX_SLOTS ? want : POOL_MAX_SLOTS);
    }
    pool_unlock_(a, &a->ph->lock, POOL_LOCK_PAGEHEAP, 0);
    return pool_slots_top(a) > top;
}

/* The first free slot for the calling thread, or NULL.  A process's first
 * slot is its tag: it never takes the last slot, which has none (its
 * objects could not be reclaimed when it dies).  A slot above the top is
 * taken only when every one below is held. */
static pool_slot_sh_t *claim_any(pool_arena_t *a)
{
    unsigned n = proc_slot() >= 0 ? POOL_MAX_SLOTS : POOL_MAX_TAG;
    for (;;) {
        unsigned top = pool_slots_top(a);
        for (unsigned i = 0; i < top && i < n; i++)
            if (slot_claim(&a->slots[i], (uint32_t)pool_prim_getpid_()))
                return &a->slots[i];
        if (top >= n || !slots_grow(a, top))
            return NULL;
    }
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
        /* A slot's cache is touched only once a thread takes it: the lists
         * of the spans it will own are made on its first use. */
        if (!slot->used) {
            pool_central_own_init_(&a->tcaches[i]);
            pool_atomic_store_release(&slot->used, 1);
        }
        slot->pid = pool_prim_getpid_();
        slot->tid = pool_prim_gettid_();
        /* The first slot of a process (pool_attach) names its tag. */
        uint16_t tag = proc_tag != POOL_NO_TAG ? proc_tag : tag_of_slot((int)i);
        slot->tag = tag;
        pool_tcache_sh_t *tc = &a->tcaches[i];
        /* Before the inboxes open: a free that finds one open reads it. */
        tc->tag = tag;
        if (!pool_tcache_init_(a, tc, (uint16_t)i)) {
            pool_slot_release_(slot);
            return NULL;
        }
        pool_tls_tcache_ = tc;
        pthread_setspecific(thread_key, slot);
        return tc;
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
static int create(size_t size, bool shared)
{
    if (pool_arena_.hdr != NULL)
        return EEXIST;
    if (size < pool_min_heap_size() || size > POOL_MAX_HEAP_SIZE)
        return EINVAL;
    tiers_init();
    pthread_once(&once_handlers, install_handlers);

    int rc = pool_arena_map_(size, shared);
    if (rc != 0)
        return rc;
    pool_arena_t *a = &pool_arena_;
    pool_header_sh_t *h = a->hdr;
    rc = pool_lock_init_(&a->ph->lock, POOL_LOCK_PAGEHEAP);
    for (unsigned cls = 0; rc == 0 && cls < POOL_NCLASSES; cls++)
        rc = pool_lock_init_(&a->central[cls].lock, POOL_LOCK_CENTRAL);
    if (rc != 0) {
        pool_prim_unmap_(h, h->size);
        memset(a, 0, sizeof *a);
        return rc;
    }
    pool_pageheap_init_(a);
    pool_central_init_(a);
    /* The first slots are made while nobody else can attach: a server's
     * first workers then take slots below the top without the page-heap
     * lock, which one of them may already hold, stopped or dead. */
    slots_make(a, 0, SLOTS_GROW);
    /* Last: a header with the magic is a complete header. */
    pool_atomic_store_release(&h->magic, POOL_MAGIC);
    return 0;
}

int pool_create(size_t size)
{
    return create(size, true);
}

int pool_create_private_(size_t size)
{
    return create(size, false);
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
    proc_tag = POOL_NO_TAG;
    /* Whoever notices first reaps: a process that attaches reaps the dead
     * before it takes a slot, so that slots and memory pass on without a
     * master that knows the pool. */
    pool_reap_dead_(&pool_arena_);
    pool_tcache_sh_t *tc = pool_thread_setup_();
    if (tc == NULL) {
        pool_atomic_inc(&h->xattach_failures);
        return EAGAIN;
    }
    proc_tag = tc->tag;
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
        if (tc->slot != proc_slot())
            pool_slot_release_(&pool_arena_.slots[tc->slot]);
    }
    /* Objects the process still holds keep living after the slot (and
     * with it the tag) passes to another process. */
    pool_disown_(&pool_arena_, proc_tag);
    if (proc_slot() >= 0)
        pool_slot_release_(&pool_arena_.slots[proc_slot()]);
    pool_proc_state_ = POOL_PROC_PRIVATE;
    proc_tag = POOL_NO_TAG;
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
    proc_tag = POOL_NO_TAG;
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
    return proc_slot();
}
