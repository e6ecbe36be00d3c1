#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# A reap the library's wait() left pending, which meets the stuck lock
# holder again at its retry, is still done at a later wait: tests/reapretry
# (see there) kills an attached child while another is stopped inside a
# class lock, waits through two failed reaps, lets the holder go and waits
# for it; shmpool-stat must then list neither child, dead or alive.
# Builds without crash points skip (77).
#
# Environment (set by make check): SHMPOOL_LIB, SHMPOOL_STAT, TESTS_BUILDDIR.
set -u
lib=${SHMPOOL_LIB:?SHMPOOL_LIB is not set}
stat=${SHMPOOL_STAT:?SHMPOOL_STAT is not set}
prog=${TESTS_BUILDDIR:?TESTS_BUILDDIR is not set}/reapretry
tmp=$(mktemp -d)
trap 'exec 3>&-; kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT

mkfifo "$tmp/in"
LD_PRELOAD=$lib SHMPOOL_MODE=children "$prog" <"$tmp/in" >"$tmp/out" 2>"$tmp/err" &
pid=$!
exec 3>"$tmp/in"
for _ in $(seq 200); do
    [ -s "$tmp/out" ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.05
done
if ! [ -s "$tmp/out" ]; then
    wait $pid
    rc=$?
    [ $rc -eq 77 ] && { echo "reapretry: SKIP: $(cat "$tmp/out" "$tmp/err")"; exit 77; }
    echo "reapretry: FAIL: exit $rc: $(cat "$tmp/err")"
    exit 1
fi
set -- $(cat "$tmp/out")
status=0
if "$stat" --json $pid >"$tmp/json" 2>"$tmp/serr"; then
    if ! python3 - "$tmp/json" "$1" "$2" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
a, b = int(sys.argv[2]), int(sys.argv[3])
left = [p for p in j["processes"] if p["pid"] in (a, b)]
assert not left, f"children still in the arena after the last wait: {left}"
dead = [p for p in j["processes"] if p["state"] != "alive"]
assert not dead, f"dead processes not reaped: {dead}"
print(f"reapretry: PASS: child {a}, killed while {b} held a class lock, reaped by the "
      f"wait after the holder went on; {len(j['processes'])} processes left, none dead")
PY
    then status=1; fi
else
    echo "reapretry: FAIL: shmpool-stat --json $pid: $(cat "$tmp/serr")"
    status=1
fi
echo go >&3
wait $pid || { echo "reapretry: FAIL: the program exited $?: $(cat "$tmp/err")"; status=1; }
exit $status
