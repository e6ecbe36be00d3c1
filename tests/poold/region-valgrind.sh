#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Run the region's unit tests under valgrind: any error or leak fails.
# check_region counts the region's mallocs with its own malloc, which
# valgrind must then leave in place (nouserintercepts) while it still
# checks the glibc malloc underneath.
set -u
if [ -z "${VALGRIND:-}" ]; then
    echo "region-valgrind: valgrind not found at configure time (Debian package valgrind)" >&2
    exit 99
fi
CK_FORK=no exec "$VALGRIND" -q --error-exitcode=9 --leak-check=full \
    --show-leak-kinds=all --errors-for-leak-kinds=all \
    --soname-synonyms=somalloc=nouserintercepts \
    "$TESTS_BUILDDIR/check_region"
