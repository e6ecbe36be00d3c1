/* SPDX-License-Identifier: BSD-2-Clause */
/* shmpool-stat — the arena of a running program, seen from outside.
 *
 *   shmpool-stat [--json] PID
 *
 * PID is any process that maps the arena: the process that loaded
 * libshmpool.so (attached or not) or any attached child.  The arena is the
 * memfd named "shmpool" in its /proc/PID/maps.  A shared arena is mapped
 * read-only through /proc/PID/map_files (or, where that is refused, its
 * metadata copied through /proc/PID/mem); a private one (SHMPOOL_MODE=
 * process), whose first page alone is a private mapping of the memfd, has
 * its metadata copied through /proc/PID/mem.  Nothing of it is locked or
 * written: what is printed is a snapshot of an arena that may be changing.
 * Through the mapping nothing is allocated either: a read of a page never
 * written allocates it, so the heap check passes over what mincore says
 * has no memory behind it, and a free object's owner is not read; copied
 * through /proc/PID/mem, a shared arena's metadata is read whole, holes and
 * all, and allocated.  It
 * shows what /stats shows for poold: usage, every process that holds a
 * slot with its pid, state and live bytes, the reaps and what they gave
 * back, fallbacks, attach failures, lock recoveries, and the heap check
 * (taken again, up to five times, while it finds a change caught half
 * made); and, through the mapping, what of the arena has memory behind it,
 * by what it holds: data, owner tags, span descriptors, page map, and the
 * slots, caches and journals before them.
 *
 * Exit status: 0; 1 (one line on stderr) when PID maps no arena or it
 * cannot be read; 2 on bad usage.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "pool-internal.h"
#include "prim/prim.h"

static const char *prog = "shmpool-stat";

static void usage(FILE *f)
{
    fprintf(f, "usage: %s [--json] PID\n", prog);
}

/* ------------------------------------------------------------------------ */
/* Finding and reading the arena                                             */
/* ------------------------------------------------------------------------ */

typedef struct source_s {
    int pid;
    uintptr_t start, end; /* the mapping in the other process */
    bool shared;          /* MAP_SHARED there; else its first page only */
    void *map;            /* our view of it: a mapping, or a copy */
    size_t len;
    bool copied;          /* read through /proc/PID/mem */
} source_t;

/* The arena's mapping in /proc/PID/maps.  Returns 0, ENOENT (no arena),
 * ESRCH (no such process) or the errno of opening the file. */
static int find_arena(source_t *src)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/maps", src->pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return errno == ENOENT ? ESRCH : errno;
    int rc = ENOENT;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long lo, hi;
        char perms[8];
        if (strstr(line, "/memfd:" POOL_MEMFD_NAME " ") == NULL &&
            strstr(line, "/memfd:" POOL_MEMFD_NAME "\n") == NULL)
            continue;
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3) {
            src->start = lo;
            src->end = hi;
            src->shared = perms[3] == 's';
            rc = 0;
            break;
        }
    }
    fclose(f);
    return rc;
}

/* pread all of [off, off+n) of fd into buf. */
static int read_at(int fd, void *buf, size_t n, uintptr_t off)
{
    for (size_t done = 0; done < n;) {
        ssize_t k = pread(fd, (char *)buf + done, n - done, (off_t)(off + done));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? errno : EIO;
        done += (size_t)k;
    }
    return 0;
}

/* Copy the header and metadata (everything before the data pages) out of
 * the other process's memory. */
static int copy_arena(source_t *src)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", src->pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    pool_header_sh_t h;
    int rc = read_at(fd, &h, sizeof h, src->start);
    uint64_t size = src->shared ? src->end - src->start : h.size;
    if (rc == 0 && (h.magic != POOL_MAGIC || h.layout.off_data > size))
        rc = EINVAL;
    if (rc == 0) {
        free(src->map);
        src->len = h.layout.off_data;
        src->map = malloc(src->len);
        rc = src->map == NULL ? ENOMEM : read_at(fd, src->map, src->len, src->start);
    }
    close(fd);
    src->copied = true;
    return rc;
}

/* Our view of the arena: a shared one mapped read-only where the system
 * lets us, else copied (a mapping of a private arena's memfd would show
 * the file, not the process's pages). */
static int open_arena(source_t *src)
{
    if (!src->shared)
        return copy_arena(src);
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/map_files/%lx-%lx", src->pid,
             (unsigned long)src->start, (unsigned long)src->end);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        src->len = src->end - src->start;
        src->map = mmap(NULL, src->len, PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        if (src->map != MAP_FAILED)
            return 0;
        src->map = NULL;
    }
    return copy_arena(src);
}

/* A fresh snapshot, for the copy (a mapping is always current). */
static int refresh(source_t *src)
{
    return src->copied ? copy_arena(src) : 0;
}

/* ------------------------------------------------------------------------ */
/* Processes                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct proc_s {
    unsigned slot;     /* the process's first slot: its tag is slot + 1 */
    int pid;
    unsigned threads;  /* slots it holds */
    bool dead;
    uint64_t live;     /* bytes of its objects and big spans held by callers */
    uint64_t cached;   /* bytes in its thread caches */
} proc_t;

/* Whether the holder of a taken slot is dead, from the slot alone: the
 * kernel sets FUTEX_OWNER_DIED and clears the owner of a robust mutex whose
 * holder died; a slot already found dead says so; one judged by its pid
 * has the process's start time. */
static bool slot_dead(const pool_slot_sh_t *s)
{
    uint32_t flags = s->xflags;
    unsigned word = (unsigned)s->life.mutex.__data.__lock;
    if (flags & POOL_SLOT_DEAD)
        return true;
    if ((word & FUTEX_OWNER_DIED) && (word & FUTEX_TID_MASK) == 0)
        return true;
    if ((word & FUTEX_TID_MASK) == 0 && (flags & POOL_SLOT_BYPID)) {
        uint64_t start;
        return pool_prim_start_time_(s->pid, &start) != 0 || start != s->start;
    }
    return false;
}

/* One entry per process holding slots, with the bytes its tag owns. */
static unsigned list_processes(const pool_arena_t *a, proc_t *procs)
{
    unsigned n = 0;
    static int by_tag[POOL_MAX_TAG + 1];
    memset(by_tag, -1, sizeof by_tag);
    for (unsigned i = 0, top = pool_slots_top(a); i < top; i++) {
        const pool_slot_sh_t *s = &a->slots[i];
        if (s->xstate == POOL_SLOT_FREE || s->tag != i + 1)
            continue;
        procs[n] = (proc_t){ i, (int)s->xstate, 0, slot_dead(s), 0, 0 };
        by_tag[s->tag] = (int)n++;
    }
    for (unsigned i = 0, top = pool_slots_top(a); i < top; i++) {
        const pool_slot_sh_t *s = &a->slots[i];
        if (s->xstate == POOL_SLOT_FREE || s->tag == POOL_NO_TAG || s->tag > POOL_MAX_TAG ||
            by_tag[s->tag] < 0)
            continue;
        proc_t *p = &procs[by_tag[s->tag]];
        p->threads++;
        for (unsigned cls = 1; cls < POOL_NCLASSES; cls++)
            p->cached += (uint64_t)pool_tcache_held(&a->tcaches[i], cls) * pool_classes_[cls].size;
    }
    /* Every handed-out object and big span, by the tag it carries. */
    for (pool_span_walk_t w = pool_span_walk(a); w.next < w.carved;) {
        const pool_span_sh_t *s = pool_span_next(a, &w);
        if (s == NULL)
            w.next++; /* a span caught half made: on from the next page */
        else if (s->state == POOL_SPAN_BIG && s->owner <= POOL_MAX_TAG && by_tag[s->owner] >= 0)
            procs[by_tag[s->owner]].live += (uint64_t)s->npages << POOL_PAGE_SHIFT;
        else if (s->state == POOL_SPAN_SMALL && s->count <= POOL_MAX_OBJECTS)
            /* A free object's tag is not read: its row may never have been
             * written, and a read would allocate its page of the arena. */
            for (uint32_t oi = 0; oi < s->count; oi++) {
                if (!(s->bitmap[oi / 64] >> (oi % 64) & 1))
                    continue;
                uint8_t tag = *pool_owner_of(a, s, oi);
                if (by_tag[tag] >= 0)
                    procs[by_tag[tag]].live += s->objsize;
            }
    }
    /* What sits in a process's own caches is not held by its callers. */
    for (unsigned k = 0; k < n; k++)
        procs[k].live = procs[k].live > procs[k].cached ? procs[k].live - procs[k].cached : 0;
    return n;
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */
/* ------------------------------------------------------------------------ */

/* The arena's memory by what it holds: bytes with memory behind them in
 * the memfd, whichever process wrote them and whoever maps them now. */
typedef struct memory_s {
    bool known; /* only a shared arena's mapping can be asked */
    uint64_t data, tags, descriptors, pagemap, other;
} memory_t;

typedef struct report_s {
    pool_usage_t u;
    memory_t mem;
    proc_t procs[POOL_MAX_SLOTS];
    unsigned nprocs, ndead;
    char check[256];
} report_t;

/* mincore over the mapping, an OS page counted in the region its first
 * byte lies in.  A copy has no pages of the memfd behind it to ask about. */
static void memory_of(const source_t *src, const pool_arena_t *a, memory_t *m)
{
    if (src->copied)
        return;
    const pool_layout_sh_t *l = &a->hdr->layout;
    const uint64_t end[] = { l->off_spans, l->off_pm_class, l->off_owners, l->off_data, src->len };
    uint64_t *into[] = { &m->other, &m->descriptors, &m->pagemap, &m->tags, &m->data };
    const unsigned last = sizeof end / sizeof end[0] - 1;
    static unsigned char vec[1 << 16];
    size_t page = pool_prim_os_page_size_();
    unsigned r = 0;
    for (uint64_t off = 0; off + page <= src->len;) {
        size_t n = (src->len - off) / page;
        if (n > sizeof vec)
            n = sizeof vec;
        if (pool_prim_resident_((const char *)src->map + off, n * page, vec) != 0)
            return;
        for (size_t i = 0; i < n; i++, off += page) {
            while (r < last && off >= end[r])
                r++;
            if (vec[i] & 1)
                *into[r] += page;
        }
    }
    m->known = true;
}

/* The heap check, taken again while it finds a change caught half made. */
static void check(source_t *src, pool_arena_t *a, report_t *r)
{
    for (int attempt = 0; attempt < 5; attempt++) {
        if (attempt > 0) {
            struct timespec ts = { 0, 20000000 };
            nanosleep(&ts, NULL);
            if (refresh(src) != 0 || pool_arena_view_(a, src->map, src->len) != 0)
                break;
        }
        if (pool_check_view_(a, r->check, sizeof r->check) == 0) {
            snprintf(r->check, sizeof r->check, "ok");
            return;
        }
    }
}

/* s as a JSON string's contents: quotes, backslashes and controls replaced. */
static void json_clean(char *s)
{
    for (; *s; s++)
        if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20)
            *s = '\'';
}

static void print_json(int pid, const pool_arena_t *a, report_t *r)
{
    const pool_usage_t *u = &r->u;
    const pool_crash_sh_t *c = a->crash;
    printf("{\"pid\":%d,\"arena\":{\"reserved\":%zu,\"used\":%zu,\"in_use\":%zu,\"cached\":%zu,"
           "\"free\":%zu,\"returned\":%zu,\"fallbacks\":%zu,\"foreign_frees\":%zu,"
           "\"attach_failures\":%zu},\"processes\":[",
           pid, u->reserved, u->used, u->in_use, u->cached, u->free, u->returned, u->fallbacks,
           u->foreign_frees, u->attach_failures);
    for (unsigned k = 0; k < r->nprocs; k++) {
        const proc_t *p = &r->procs[k];
        printf("%s{\"slot\":%u,\"pid\":%d,\"threads\":%u,\"live\":%" PRIu64 ",\"cached\":%" PRIu64
               ",\"state\":\"%s\"}",
               k ? "," : "", p->slot, p->pid, p->threads, p->live, p->cached,
               p->dead ? "dead" : "alive");
    }
    printf("],\"reaps\":{\"count\":%" PRIu64 ",\"cached\":%" PRIu64 ",\"live\":%" PRIu64
           ",\"transit\":%" PRIu64 ",\"leaked\":%" PRIu64 ",\"last\":[",
           c->reaps, c->cached, c->live, c->transit, c->leaked);
    uint64_t n = c->reaps < POOL_REAP_HISTORY ? c->reaps : POOL_REAP_HISTORY;
    for (uint64_t i = 0; i < n; i++) {
        const pool_reaprec_sh_t *rec = &c->last[(c->reaps - 1 - i) % POOL_REAP_HISTORY];
        printf("%s{\"pid\":%d,\"reaper\":%d,\"slots\":%u,\"cached\":%" PRIu64 ",\"live\":%" PRIu64
               ",\"transit\":%" PRIu64 ",\"leaked\":%" PRIu64 "}",
               i ? "," : "", rec->pid, rec->reaper, rec->slots, rec->cached, rec->live,
               rec->transit, rec->leaked);
    }
    json_clean(r->check);
    printf("]},\"memory\":");
    const memory_t *m = &r->mem;
    if (m->known)
        printf("{\"data\":%" PRIu64 ",\"tags\":%" PRIu64 ",\"descriptors\":%" PRIu64
               ",\"pagemap\":%" PRIu64 ",\"other\":%" PRIu64 "}",
               m->data, m->tags, m->descriptors, m->pagemap, m->other);
    else
        printf("null");
    printf(",\"attach_failures\":%zu,\"recoveries\":%" PRIu64 ",\"rolled_back\":%" PRIu64
           ",\"rebuilds\":%" PRIu64 ",\"quarantined\":%" PRIu64 ",\"check\":\"%s\"}\n",
           u->attach_failures, c->xrecoveries, c->xrolled_back, c->xrebuilds, c->xquarantined,
           r->check);
}

/* n bytes in KiB, MiB or GiB, into buf. */
static const char *human(char *buf, size_t cap, uint64_t n)
{
    static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    double v = (double)n;
    unsigned i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    snprintf(buf, cap, i == 0 ? "%.0f %s" : "%.1f %s", v, unit[i]);
    return buf;
}

static void print_text(int pid, const source_t *src, const pool_arena_t *a, const report_t *r)
{
    const pool_usage_t *u = &r->u;
    const pool_crash_sh_t *c = a->crash;
    char b[6][32];
    printf("shmpool-stat: pid %d, arena at %#lx, %s (%s)\n", pid, (unsigned long)src->start,
           human(b[0], sizeof b[0], u->reserved),
           src->copied ? "metadata copied through /proc/PID/mem" : "mapped read-only");
    printf("  arena       : used %s: in use %s, cached %s, free %s (%s given back)\n",
           human(b[0], sizeof b[0], u->used), human(b[1], sizeof b[1], u->in_use),
           human(b[2], sizeof b[2], u->cached), human(b[3], sizeof b[3], u->free),
           human(b[4], sizeof b[4], u->returned));
    const memory_t *m = &r->mem;
    if (m->known)
        printf("  memory      : %s: data %s, owner tags %s, span descriptors %s, page map %s, "
               "slots, caches and journals %s\n",
               human(b[0], sizeof b[0], m->data + m->tags + m->descriptors + m->pagemap + m->other),
               human(b[1], sizeof b[1], m->data), human(b[2], sizeof b[2], m->tags),
               human(b[3], sizeof b[3], m->descriptors), human(b[4], sizeof b[4], m->pagemap),
               human(b[5], sizeof b[5], m->other));
    else
        printf("  memory      : not known for a copy\n");
    printf("  fallbacks %zu, foreign frees %zu, attach failures %zu\n", u->fallbacks,
           u->foreign_frees, u->attach_failures);
    printf("  processes   : %u alive, %u dead and not yet reaped\n", r->nprocs - r->ndead,
           r->ndead);
    if (r->nprocs > 0)
        printf("    %-5s %-8s %-7s %-6s %-12s %s\n", "slot", "pid", "threads", "state", "live",
               "cached");
    for (unsigned k = 0; k < r->nprocs; k++) {
        const proc_t *p = &r->procs[k];
        printf("    %-5u %-8d %-7u %-6s %-12s %s\n", p->slot, p->pid, p->threads,
               p->dead ? "dead" : "alive", human(b[0], sizeof b[0], p->live),
               human(b[1], sizeof b[1], p->cached));
    }
    printf("  reaps       : %" PRIu64 ", giving back %s cached, %s live, %s in transit; %s leaked\n",
           c->reaps, human(b[0], sizeof b[0], c->cached), human(b[1], sizeof b[1], c->live),
           human(b[2], sizeof b[2], c->transit), human(b[3], sizeof b[3], c->leaked));
    uint64_t n = c->reaps < POOL_REAP_HISTORY ? c->reaps : POOL_REAP_HISTORY;
    for (uint64_t i = 0; i < n && i < 5; i++) {
        const pool_reaprec_sh_t *rec = &c->last[(c->reaps - 1 - i) % POOL_REAP_HISTORY];
        printf("    pid %d by pid %d: %s cached, %s live, %s in transit, %s leaked\n", rec->pid,
               rec->reaper, human(b[0], sizeof b[0], rec->cached),
               human(b[1], sizeof b[1], rec->live), human(b[2], sizeof b[2], rec->transit),
               human(b[3], sizeof b[3], rec->leaked));
    }
    printf("  recoveries  : %" PRIu64 " (%" PRIu64 " undone, %" PRIu64 " rebuilt, %s quarantined)\n",
           c->xrecoveries, c->xrolled_back, c->xrebuilds, human(b[0], sizeof b[0], c->xquarantined));
    printf("  check       : %s\n", r->check);
}

/* ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    bool json = false;
    const char *pidarg = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' || pidarg != NULL) {
            fprintf(stderr, "%s: unexpected argument '%s' (usage: %s [--json] PID)\n", prog,
                    argv[i], prog);
            return 2;
        } else {
            pidarg = argv[i];
        }
    }
    char *end;
    long pid = pidarg != NULL ? strtol(pidarg, &end, 10) : 0;
    if (pidarg == NULL || *end != '\0' || pid <= 0 || pid > 0x3fffffff) {
        fprintf(stderr, "%s: %s (usage: %s [--json] PID)\n", prog,
                pidarg == NULL ? "no PID given" : "PID must be a process id", prog);
        return 2;
    }
    source_t src = { (int)pid, 0, 0, false, NULL, 0, false };
    int rc = find_arena(&src);
    if (rc == ENOENT) {
        fprintf(stderr, "%s: process %ld maps no shmpool arena (no /memfd:" POOL_MEMFD_NAME
                        " in /proc/%ld/maps)\n", prog, pid, pid);
        return 1;
    }
    if (rc == 0)
        rc = open_arena(&src);
    pool_arena_t a;
    if (rc == 0)
        rc = pool_arena_view_(&a, src.map, src.len);
    if (rc != 0) {
        fprintf(stderr, "%s: cannot read the arena of process %ld: %s%s\n", prog, pid,
                rc == EPROTO ? "it was made by a library built with another configuration"
                             : strerror(rc),
                rc == EACCES || rc == EPERM
                    ? " (run as root, or as its user where ptrace is allowed)"
                    : "");
        return 1;
    }
    static report_t r;
    pool_usage_view_(&a, &r.u);
    memory_of(&src, &a, &r.mem);
    r.nprocs = list_processes(&a, r.procs);
    for (unsigned k = 0; k < r.nprocs; k++)
        r.ndead += r.procs[k].dead;
    check(&src, &a, &r);
    if (json)
        print_json((int)pid, &a, &r);
    else
        print_text((int)pid, &src, &a, &r);
    return 0;
}
