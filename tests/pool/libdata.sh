#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# A forked child copies no page of the library's file data, only .bss:
# tests/libdata (see there) under LD_PRELOAD=libshmpool.so
# SHMPOOL_MODE=children.
exec sh "$(dirname "$0")/children.sh" libdata
