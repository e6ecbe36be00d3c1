/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — crash injection (debug builds).
 *
 * Crash points are named places in the pool where a test can make the
 * process die: inside every lock-held mutation (one at every journaled
 * step, journal.<op>, besides the named ones), in recovery, in the reaper
 * and in the watchdog's repair.  SHMPOOL_CRASH picks one point and hit
 * ("name:N", optionally ":stop" to stop instead of dying, and "@SLOT" to
 * arm it only in the process attached at that slot: one worker of a
 * server whose workers all inherit the variable), or makes any
 * hit of any point fatal with a probability ("random:P[:SEED]"), so that a
 * soak lands its deaths inside locks rather than wherever a kill from
 * outside happens to fall, or both ("random:P,name:N").  Anything else is
 * refused with a line on stderr and arms nothing.  A process that dies
 * here says on stderr which point it died at and which lock it held, for
 * the soak to count.
 *
 * Release builds compile every point away (POOL_CRASH_POINT); this file
 * then only parses nothing.
 */
#include "pool-internal.h"

#include <string.h>

#include "prim/prim.h"

/* Every named point; journal.<op> adds one per operation kind.  A test
 * checks that the sources use no other. */
const char *const pool_crash_points_[] = {
    "central.fetch",    "central.add_span",    "central.release",
    "central.claim",    "central.disown",
    "pageheap.take",    "pageheap.carve",      "pageheap.free",
    "pageheap.merge_left", "pageheap.merge_right", "pageheap.release",
    "lock.acquired",    "recover.undo",        "recover.rebuild",
    "reap.found",       "reap.object",         "reap.transit",
    "reap.slot",        "tcache.cut",          "tcache.inbox_push",
    "tcache.inbox_take",
    "repair.lock",      "lock.journal",        "central.purge",
    NULL,
};

static char crash_name[64];    /* empty: no named point armed */
static unsigned long crash_at; /* die at this hit */
/* The counters are shared by the threads of a process (poold --threads):
 * each hit has one number, so the point fires exactly once. */
static unsigned long crash_hits; /* of the named point */
static bool crash_stop;        /* ":stop": stop (SIGSTOP) there instead, lock held */
static int crash_slot;         /* "@SLOT": only the process attached there; -1: any
                                * (pool_crash_config_ sets it before arming a point) */
static bool crash_random;      /* "random:P": any point, with probability */
static unsigned long random_hits; /* of any point, in random mode */
static uint64_t crash_threshold; /* die when a draw is below it (P * 2^64) */
static uint64_t crash_seed;    /* random mode: hit n draws from hash(seed, n) */

/* The innermost pool lock the calling thread holds, and how many. */
static __thread unsigned held_depth POOL_TLS;
static __thread uint32_t held_kind POOL_TLS;
static __thread uint32_t held_arg POOL_TLS;

/* Parse decimal digits [d, end) into *out; false past limit or on a
 * non-digit. */
static bool parse_count(const char *d, const char *end, unsigned long limit,
                        unsigned long *out)
{
    unsigned long v = 0;
    if (d == end)
        return false;
    for (; d < end; d++) {
        if (*d < '0' || *d > '9' || v > limit / 10)
            return false;
        v = v * 10 + (unsigned long)(*d - '0');
    }
    if (v > limit)
        return false;
    *out = v;
    return true;
}

/* "P" as 0 < P <= 1, written 1, 0.25 or .001, into P * 2^64 (saturated). */
static bool parse_probability(const char *d, const char *end, uint64_t *out)
{
    unsigned __int128 num = 0, den = 1;
    bool point = false, digits = false;
    for (; d < end; d++) {
        if (*d == '.' && !point) {
            point = true;
            continue;
        }
        if (*d < '0' || *d > '9' || den > (unsigned __int128)1e18)
            return false;
        num = num * 10 + (unsigned)(*d - '0');
        if (point)
            den *= 10;
        digits = true;
    }
    if (!digits || num == 0 || num > den)
        return false;
    unsigned __int128 t = (num << 64) / den;
    *out = t > UINT64_MAX ? UINT64_MAX : (uint64_t)t;
    return true;
}

static bool config_random(const char *v)
{
    const char *p = v + strlen("random:");
    const char *colon = strchr(p, ':');
    const char *end = colon != NULL ? colon : p + strlen(p);
    if (!parse_probability(p, end, &crash_threshold))
        return false;
    unsigned long seed = 0;
    if (colon != NULL) {
        if (!parse_count(colon + 1, colon + 1 + strlen(colon + 1), ~0ul, &seed))
            return false;
    } else {
        seed = (unsigned long)pool_prim_getpid_() * 0x9e3779b97f4a7c15u ^ pool_prim_now_ns_();
    }
    crash_seed = (uint64_t)seed;
    crash_random = true;
    return true;
}

/* A point that exists: a misspelt name would never fire, and a test that
 * relies on it would pass for the wrong reason. */
static bool known(const char *name)
{
    for (unsigned i = 0; pool_crash_points_[i] != NULL; i++)
        if (strcmp(name, pool_crash_points_[i]) == 0)
            return true;
    if (strncmp(name, "journal.", 8) != 0)
        return false;
    for (uint32_t op = POOL_OP_NONE + 1; strcmp(pool_op_name_(op), "unknown") != 0; op++)
        if (strcmp(name + 8, pool_op_name_(op)) == 0)
            return true;
    return false;
}

/* "name:N[:stop][@SLOT]".  The count is not optional: a point armed at a
 * hit nobody wrote would fire where the test did not mean it to. */
static bool config_named(const char *v)
{
    const char *end = strchr(v, '@');
    if (end != NULL) {
        unsigned long slot;
        if (!parse_count(end + 1, end + 1 + strlen(end + 1), POOL_MAX_SLOTS - 1, &slot))
            return false;
        crash_slot = (int)slot;
    } else {
        end = v + strlen(v);
    }
    const char *colon = memchr(v, ':', (size_t)(end - v));
    if (colon == NULL)
        return false;
    const char *mode = memchr(colon + 1, ':', (size_t)(end - colon - 1));
    if (mode != NULL && ((size_t)(end - mode) != 5 || strncmp(mode, ":stop", 5) != 0))
        return false;
    crash_stop = mode != NULL;
    unsigned long at;
    size_t n = (size_t)(colon - v);
    if (!parse_count(colon + 1, mode != NULL ? mode : end, 100000000ul, &at) || at == 0 ||
        n == 0 || n >= sizeof crash_name)
        return false;
    memcpy(crash_name, v, n);
    crash_name[n] = '\0';
    crash_at = at;
    return known(crash_name);
}

void pool_crash_config_(void)
{
    crash_name[0] = '\0';
    crash_hits = random_hits = 0;
    crash_stop = crash_random = false;
    crash_slot = -1;
    if (pool_config_debug == 0)
        return;
    const char *v = pool_prim_getenv_("SHMPOOL_CRASH");
    if (v == NULL || *v == '\0')
        return;
    /* At most one of each, separated by a comma: random deaths, and one
     * point that a probability would seldom reach (once a reap).  Every
     * part is read, an empty one after a comma too. */
    bool ok = true;
    for (const char *part = v;;) {
        const char *comma = strchr(part, ',');
        size_t n = comma != NULL ? (size_t)(comma - part) : strlen(part);
        char one[96];
        ok = n > 0 && n < sizeof one;
        if (ok) {
            memcpy(one, part, n);
            one[n] = '\0';
            if (strncmp(one, "random:", 7) == 0)
                ok = !crash_random && config_random(one);
            else
                ok = crash_name[0] == '\0' && config_named(one);
        }
        if (!ok || comma == NULL)
            break;
        part = comma + 1;
    }
    if (!ok) {
        crash_name[0] = '\0';
        crash_random = crash_stop = false;
        crash_slot = -1;
        pool_error_(0, "SHMPOOL_CRASH='%s' is not point:N[:stop][@SLOT] or random:P[:SEED] "
                       "(0 < P <= 1), nor one of each after a comma, for points libshmpool(7) "
                       "names; no crash point is armed", v);
    }
}

void pool_crash_note_lock_(pool_lock_kind_t kind, unsigned arg, bool held)
{
    if (held) {
        held_depth++;
        held_kind = kind;
        held_arg = arg;
    } else if (held_depth > 0) {
        held_depth--;
    }
}

/* Say where the process dies, at which hit, then die (or stop). */
static void POOL_COLD fire(const char *name, const char *op, unsigned long hit)
{
    char lock[48];
    if (held_depth == 0)
        pool_snprintf_(lock, sizeof lock, "no lock");
    else if (held_kind == POOL_LOCK_PAGEHEAP)
        pool_snprintf_(lock, sizeof lock, "%u lock%s, the last the page heap", held_depth,
                       held_depth > 1 ? "s" : "");
    else
        pool_snprintf_(lock, sizeof lock, "%u lock%s, the last class %u", held_depth,
                       held_depth > 1 ? "s" : "", held_arg);
    pool_error_(0, "crash point %s%s (hit %lu) in pid %d, holding %s", name, op, hit,
                pool_prim_getpid_(), lock);
    if (crash_stop)
        pool_prim_stop_self_();
    else
        pool_prim_kill_self_();
}

/* Random mode: whether hit n fires.  A hash of the hit's number, not a
 * generator's state, so that threads drawing at once need share nothing
 * but the counter (splitmix64's finaliser). */
static bool draw(unsigned long n)
{
    uint64_t z = crash_seed + (uint64_t)n * UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return (z ^ (z >> 31)) < crash_threshold;
}

static unsigned long count_hit(unsigned long *counter)
{
    return __atomic_add_fetch(counter, 1, __ATOMIC_RELAXED);
}

/* One hit of the point name+op, `named` when it is SHMPOOL_CRASH's named
 * point: that fires at its crash_at-th hit in its slot, random mode at any
 * hit its draw picks. */
static void hit(const char *name, const char *op, bool named)
{
    unsigned long n;
    named &= crash_slot < 0 || pool_slot() == crash_slot;
    if (named && (n = count_hit(&crash_hits)) == crash_at)
        fire(name, op, n);
    if (crash_random && draw(n = count_hit(&random_hits)))
        fire(name, op, n);
}

void pool_crash_point_(const char *name)
{
    hit(name, "", crash_name[0] != '\0' && strcmp(name, crash_name) == 0);
}

void pool_crash_step_(uint32_t op)
{
    const char *o = pool_op_name_(op);
    hit("journal.", o, strncmp(crash_name, "journal.", 8) == 0 && strcmp(crash_name + 8, o) == 0);
}
