#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Lint the manual pages with mandoc; any warning fails the test.  And
# shmpool(3) must name every function the installed header exports
# (POOL_API), and no function the header lacks.
set -u
if [ -z "${MANDOC:-}" ]; then
    echo "manlint: mandoc not found at configure time (Debian package mandoc)" >&2
    exit 99
fi
status=0
for page in "$top_srcdir"/man/*.[1-9]; do
    out=$("$MANDOC" -T lint -W warning "$page" 2>&1)
    if [ -n "$out" ]; then
        printf '%s\n' "$out"
        status=1
    else
        echo "manlint: $page clean"
    fi
done

header=$top_srcdir/shm/shmpool.h
page=$top_srcdir/man/shmpool.3
api=$(sed -n 's/^POOL_API[^(]*[ *]\(pool_[a-z_]*\)(.*/\1/p' "$header" | sort)
if [ -z "$api" ]; then
    echo "manlint: no POOL_API function found in $header" >&2
    exit 1
fi
synopsis=$(sed -n '/^\.Sh SYNOPSIS/,/^\.Sh DESCRIPTION/s/^\.Fn \(pool_[a-z_]*\).*/\1/p' "$page" | sort)
named=$(sed -n '/^\.Sh NAME/,/^\.Nd/s/^\.Nm \(pool_[a-z_]*\).*/\1/p' "$page" | sort)
for fn in $api; do
    if ! printf '%s\n' $named | grep -qx "$fn"; then
        echo "manlint: $page: $fn (in $header) is missing from NAME"
        status=1
    fi
    if ! printf '%s\n' $synopsis | grep -qx "$fn"; then
        echo "manlint: $page: $fn (in $header) has no .Fn line in SYNOPSIS"
        status=1
    fi
done
for fn in $named; do
    if ! printf '%s\n' $api | grep -qx "$fn"; then
        echo "manlint: $page: NAME lists $fn, which $header does not export"
        status=1
    fi
done
[ $status -eq 0 ] && echo "manlint: $page names all $(echo $api | wc -w) functions of $header"
exit $status
