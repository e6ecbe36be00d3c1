#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Reading an arena allocates none of it: a page of the shared memfd that was
# never written costs nothing until someone reads it through a mapping, so a
# reader must pass such pages over.  The memfd's allocated blocks (st_blocks
# through /proc/PID/map_files) may grow by at most a few pages while an idle
# poold -w 2 serves /stats (which runs the live heap check in debug
# builds), while shmpool-stat, text and JSON, reads its arena (and checks
# the heap), and while shmpool-stat reads the arena of a
# preloaded program holding a block of 8 MiB, whose descriptors and page
# map inside were never written.
#
# Environment (set by make check): POOLD, SHMPOOL_LIB, SHMPOOL_STAT.
set -u
poold=${POOLD:?POOLD is not set}
lib=${SHMPOOL_LIB:?SHMPOOL_LIB is not set}
stat=${SHMPOOL_STAT:?SHMPOOL_STAT is not set}
python=/usr/bin/python3
tmp=$(mktemp -d)
pids=
trap 'kill $pids 2>/dev/null; rm -rf "$tmp"' EXIT
status=0

fail() {
    echo "statread: FAIL: $*"
    status=1
}

# blocks PID: KiB allocated to the arena's memfd mapped by PID.
blocks() {
    range=$(grep -m 1 "/memfd:shmpool" /proc/"$1"/maps | cut -d' ' -f1)
    [ -n "$range" ] || return 1
    echo $(($(stat -L -c %b /proc/"$1"/map_files/"$range") / 2))
}

# stat_runs PID: shmpool-stat and shmpool-stat --json, three times each.
stat_runs() {
    for _ in 1 2 3; do
        "$stat" "$1" >"$tmp/out" 2>&1 || fail "shmpool-stat $1: $(cat "$tmp/out")"
        "$stat" --json "$1" >"$tmp/out" 2>&1 || fail "shmpool-stat --json $1: $(cat "$tmp/out")"
    done
}

# expect_growth WHAT BEFORE AFTER KIB: AFTER at most KIB above BEFORE.
expect_growth() {
    if [ "$3" -gt $(($2 + $4)) ]; then
        fail "$1 grew the arena from $2 to $3 KiB, more than $4 KiB"
    else
        echo "statread: PASS: $1: the arena's memfd went from $2 to $3 KiB"
    fi
}

: >"$tmp/poold.log"
"$poold" -w 2 -p 0 >"$tmp/poold.log" 2>&1 &
master=$!
pids=$master
port=
for _ in $(seq 100); do
    port=$(sed -n 's/.* listen=[^ ]*:\([0-9]*\) .*/\1/p' "$tmp/poold.log")
    [ -n "$port" ] && break
    sleep 0.05
done
[ -n "$port" ] || { fail "poold did not start: $(cat "$tmp/poold.log")"; exit 1; }
if ! blocks $master >/dev/null; then
    echo "statread: SKIP: poold maps no shmpool arena (not a pool build)"
    exit 77
fi
get_stats() {
    $python - "$port" "$1" <<'PY'
import sys, urllib.request
for _ in range(int(sys.argv[2])):
    urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/stats", timeout=10).read()
PY
}
# The workers' first requests allocate their buffers (about 150 KiB in a
# debug build); a check that read every page of the arena's metadata would
# add over 400 KiB.
before=$(blocks $master)
get_stats 12 || fail "GET /stats"
after=$(blocks $master)
expect_growth "poold's first /stats" "$before" "$after" 256
before=$after
stat_runs $master
after=$(blocks $master)
expect_growth "shmpool-stat of poold -w 2" "$before" "$after" 16

# A program in children mode whose child attached and holds a big block.
cat >"$tmp/prog.py" <<'PY'
import os, time
pid = os.fork()
if pid == 0:
    big = bytearray(8 << 20)
    small = [bytearray(100) for _ in range(100)]
    print(os.getpid(), flush=True)
    time.sleep(30)
    os._exit(0)
time.sleep(30)
PY
LD_PRELOAD=$lib SHMPOOL_MODE=children $python "$tmp/prog.py" >"$tmp/child" 2>"$tmp/prog.err" &
pids="$pids $!"
for _ in $(seq 100); do [ -s "$tmp/child" ] && break; sleep 0.05; done
child=$(cat "$tmp/child")
if [ -z "$child" ]; then
    fail "the program's child never started: $(cat "$tmp/prog.err")"
else
    before=$(blocks "$child")
    stat_runs "$child"
    after=$(blocks "$child")
    expect_growth "shmpool-stat of a child holding 8 MiB" "$before" "$after" 16
fi
exit $status
