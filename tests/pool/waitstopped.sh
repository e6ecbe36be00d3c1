#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# A parent under plain LD_PRELOAD=libshmpool.so never blocks in a wait
# because a child holds a pool lock: tests/waitstopped (see there) stops a
# child inside the page-heap lock and waits, with WNOHANG and for another
# child, while it sleeps there; and an attached child's poll(), cut into
# slices, does not wait for that lock either.
exec sh "$(dirname "$0")/children.sh" waitstopped
