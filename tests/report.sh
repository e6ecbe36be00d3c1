#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# bench/REPORT.md must be what bench/report makes of the committed results
# and bench/report.in.md, byte for byte: a hand edit of the page, or a
# result or note changed without regenerating it, fails here.  Plots are not
# redrawn (gnuplot is not needed); everything is written to a temp dir.
set -u
if ! command -v python3 >/dev/null 2>&1; then
    echo "report: python3 not found" >&2
    exit 99
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
report=$top_srcdir/bench/report

python3 "$report" --no-plots -o "$tmp/REPORT.md" || exit 1
if ! diff -u "$top_srcdir/bench/REPORT.md" "$tmp/REPORT.md"; then
    echo "report: bench/REPORT.md differs from what bench/report makes; run make report" >&2
    exit 1
fi
echo "report: bench/REPORT.md is what bench/report makes"

# A result the page needs that is missing is one line on stderr and exit 1.
cp -R "$top_srcdir/bench/results" "$tmp/results"
chmod -R u+w "$tmp/results"
rm "$tmp/results/kill-soak.json"
python3 "$report" --no-plots --results "$tmp/results" -o "$tmp/out.md" 2>"$tmp/err"
rc=$?
if [ $rc -ne 1 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -q 'kill-soak.json' "$tmp/err"; then
    echo "report: a missing result gave exit $rc and:" >&2
    cat "$tmp/err" >&2
    exit 1
fi
echo "report: a missing result is one line and exit 1"
