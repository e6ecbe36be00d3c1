#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# A preloaded worker that sleeps in epoll_wait() with no timeout after a
# burst, making no allocation at all, gives back what the burst left
# within seconds: tests/givesleep (tests/programs/giveback.c built with
# GIVEBACK_SLEEP) under LD_PRELOAD=libshmpool.so SHMPOOL_MODE=children.
exec sh "$(dirname "$0")/children.sh" givesleep
