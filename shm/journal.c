/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — operation journals: save, then write; commit; undo.
 *
 * Every lock has a journal (pool_journal_sh_t).  A holder begins an
 * operation, saves each metadata word before it writes it
 * (pool_journal_save_, POOL_JSET, or a whole span descriptor at once with
 * pool_journal_save_span_), and commits.  Long operations are cut into
 * steps of at most POOL_JOURNAL_MAX entries; pool_journal_step_ commits
 * and begins again between two of them, so no operation, however many
 * spans it touches, can run out of room.  When a
 * holder dies, the next locker undoes its open operation with
 * pool_journal_undo_ and starts from an empty journal: the verification or
 * rebuild that follows never journals at all.
 *
 * Entry points: pool_journal_begin_/commit_/step_/undo_.
 */
#include "pool-internal.h"

#include <stddef.h>

const char *pool_op_name_(uint32_t op)
{
    static const char *const names[] = { "none", "fetch", "add-span", "release",
                                         "page-alloc", "page-free", "reap", "page-return" };
    return op < sizeof names / sizeof names[0] ? names[op] : "unknown";
}

void pool_journal_begin_(pool_journal_sh_t *j, pool_op_t op)
{
    j->n = 0;
    j->gen++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    j->op = op;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

void pool_journal_commit_(pool_journal_sh_t *j)
{
    POOL_CRASH_STEP(j->op);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    /* The commit point: from here a recoverer undoes nothing. */
    j->op = POOL_OP_NONE;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    j->n = 0;
}

void pool_journal_step_(pool_journal_sh_t *j)
{
    if (j->n > 0) {
        pool_op_t op = (pool_op_t)j->op;
        pool_journal_commit_(j);
        pool_journal_begin_(j, op);
    }
}

void pool_journal_overflow_(const pool_journal_sh_t *j)
{
    pool_fatal_("%s operation %lu logged more than %u entries in one step",
                pool_op_name_(j->op), (unsigned long)j->gen, (unsigned)POOL_JOURNAL_MAX);
}

_Static_assert(sizeof(pool_journal_sh_t) == 6 * 64 &&
                   sizeof(pool_journal_more_sh_t) == sizeof(pool_journal_sh_t),
               "a journal and each block of its room are six lines");
_Static_assert(POOL_JOURNAL_HEAD + POOL_JOURNAL_BLOCKS * POOL_JOURNAL_MORE >= POOL_JOURNAL_MAX,
               "the blocks hold the rest of the room");

/* The descriptor's fields, as whole words: everything before the bitmap. */
#define SPAN_FIELD_WORDS (offsetof(pool_span_sh_t, bitmap) / sizeof(uint64_t))
_Static_assert(offsetof(pool_span_sh_t, bitmap) % sizeof(uint64_t) == 0,
               "span fields end on a word");

void pool_journal_save_span_(pool_journal_sh_t *j, pool_span_sh_t *s)
{
    uint64_t *w = (uint64_t *)(void *)s;
    for (size_t i = 0; i < SPAN_FIELD_WORDS; i++)
        pool_journal_save_(j, &w[i], sizeof w[i]);
}

/* True when an undo entry names a metadata word of this arena: a journal
 * is never trusted to write anywhere else. */
static bool entry_valid(const pool_arena_t *a, uintptr_t addr, unsigned size)
{
    uintptr_t lo = (uintptr_t)a->hdr, hi = a->data;
    if (size != 1 && size != 2 && size != 4 && size != 8)
        return false;
    return addr >= lo && addr + size <= hi && addr % size == 0;
}

/* Restore every saved word, newest first.  Writes only old values, so a
 * second run after a partial first one ends in the same state.  Returns
 * false when an entry was unusable. */
static bool rollback(pool_arena_t *a, const pool_journal_sh_t *j)
{
    bool ok = true;
    uint32_t n = j->n < POOL_JOURNAL_MAX ? j->n : POOL_JOURNAL_MAX;
    for (uint32_t i = n; i-- > 0;) {
        const pool_undo_sh_t *u = pool_journal_entry_(j, i);
        uintptr_t addr = (uintptr_t)(u->where >> 4);
        unsigned size = (unsigned)(u->where & 15);
        if (!entry_valid(a, addr, size)) {
            ok = false;
            continue;
        }
        switch (size) {
        case 1:
            *(uint8_t *)addr = (uint8_t)u->old;
            break;
        case 2:
            *(uint16_t *)addr = (uint16_t)u->old;
            break;
        case 4:
            *(uint32_t *)addr = (uint32_t)u->old;
            break;
        default:
            *(uint64_t *)addr = u->old;
            break;
        }
        POOL_CRASH_POINT("recover.undo");
    }
    return ok;
}

bool pool_journal_undo_(pool_arena_t *a, pool_journal_sh_t *j)
{
    if (j->op == POOL_OP_NONE) {
        /* Died between operations, or a recoverer died after its undo:
         * nothing to undo, but the entries a dead holder saved after its
         * last commit must not linger (nor what an old rebuild logged). */
        j->n = 0;
        return true;
    }
    bool clean = rollback(a, j);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    /* Undone: a recoverer that dies from here on verifies again. */
    j->op = POOL_OP_NONE;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    j->n = 0;
    j->rolled_back++;
    pool_atomic_inc(&a->crash->xrolled_back);
    return clean;
}
