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

# A deaths pass taken (prefork-deaths.csv) fills the deaths cells of nginx
# and Apache; PostgreSQL's says why it is not measured.
cat >"$tmp/results/prefork-deaths.csv" <<'CSV'
server,arm,deaths_asked,deaths,seconds,conns,served,failed,failed_other,workers_back,answers,mem_before_kb,mem_after_kb,reaps,leaked_bytes,dead_slots,check,note
nginx,glibc,10,10,6,32,42184,116,0,yes,yes,3269,3300,,,,,
nginx,libshmpool,10,10,6,32,51396,115,0,yes,yes,3978,4212,10,0,0,ok,
apache,glibc,10,10,6,32,7774,0,0,yes,yes,7090,8441,,,,,
apache,libshmpool,10,10,6,32,7828,3,1,yes,no,10187,11656,10,0,0,ok,
CSV
cp "$top_srcdir/bench/results/kill-soak.json" "$tmp/results/"
python3 "$report" --no-plots --results "$tmp/results" -o "$tmp/deaths.md" || exit 1
if ! grep -q '^| nginx |.*| \*\*a death costs its own connections\*\*: 115 of 51,396 requests' "$tmp/deaths.md" ||
   ! grep -q '^| Apache prefork |.*| \*\*stops answering\*\*: 3 of 7,828' "$tmp/deaths.md" ||
   ! grep -q "^| PostgreSQL |.*| not measured: a backend's SIGKILL" "$tmp/deaths.md"; then
    echo "report: prefork-deaths.csv did not fill the deaths cells:" >&2
    grep -E '^\| (nginx|PostgreSQL|Apache prefork) \|' "$tmp/deaths.md" >&2
    exit 1
fi
echo "report: prefork-deaths.csv fills the deaths cells"
