/* SPDX-License-Identifier: BSD-2-Clause */
/* Child processes of the pool's tests (spawn.h).  No Check here: crashfuzz
 * links it without Check, and a child reports through its exit status. */
#include "config.h"

#include <stdlib.h>
#include <unistd.h>

#include "pool-internal.h"
#include "spawn.h"

void test_own_classes(void)
{
    pool_tcache_sh_t *tc = pool_tls_tcache_;
    if (tc == &pool_empty_tcache_)
        abort();
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++)
        tc->light[cls] = (uint8_t)(pool_classes_[cls].light_max | POOL_LIGHT_AGAIN);
}

pid_t test_spawn(unsigned alarm_s, bool attach, const char *crash)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    if (crash != NULL)
        setenv("SHMPOOL_CRASH", crash, 1);
    else
        unsetenv("SHMPOOL_CRASH");
    alarm(alarm_s);
    if (attach && pool_attach() != 0)
        _exit(1);
    return 0;
}
