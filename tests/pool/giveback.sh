#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# A preloaded worker that goes quiet after a burst gives back what the
# burst left in its cache, its classes and the page heap within seconds,
# with no call of its own: tests/giveback (see there) under
# LD_PRELOAD=libshmpool.so SHMPOOL_MODE=children.
exec sh "$(dirname "$0")/children.sh" giveback
