/* SPDX-License-Identifier: BSD-2-Clause */
/* Child processes of the pool's tests, set up one way (spawn.c): in
 * tests/check_pool, tests/check_crashpoints and tests/crashfuzz. */
#ifndef TEST_SPAWN_H
#define TEST_SPAWN_H

#include <stdbool.h>
#include <sys/types.h>

/* Fork.  The child gets SHMPOOL_CRASH = crash (unset when NULL), an alarm
 * in alarm_s seconds, so that a child that hangs dies rather than stall
 * the suite, and, when attach, pool_attach() -- which reads SHMPOOL_CRASH,
 * so the crash point is armed from the attach on; a child that cannot
 * attach exits 1.  Returns the child's pid in the parent (-1 when fork
 * failed) and 0 in the child, set up. */
pid_t test_spawn(unsigned alarm_s, bool attach, const char *crash);

/* The calling thread, attached, past the objects its classes borrow from
 * their light classes, the budget a flush may give back included: each
 * class's objects come from spans of its own, as a test of one class's
 * bins and spans, or a heap shape, expects. */
void test_own_classes(void);

#endif /* TEST_SPAWN_H */
