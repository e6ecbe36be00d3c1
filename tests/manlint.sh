#!/bin/sh
# Lint the manual pages with mandoc; any warning fails the test.
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
exit $status
