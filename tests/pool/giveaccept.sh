#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# A preloaded worker that blocks in accept() on its master's listening
# socket after a burst, as an idle Apache prefork child does, gives back
# what the burst left within seconds, and its accept still takes the next
# connection: tests/giveaccept (tests/programs/giveback.c built with
# GIVEBACK_ACCEPT) under LD_PRELOAD=libshmpool.so SHMPOOL_MODE=children.
exec sh "$(dirname "$0")/children.sh" giveaccept
