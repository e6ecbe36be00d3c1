#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# shmpool-stat from outside: bad arguments cost one line and exit 2, a
# process without an arena (or no process at all) one line and exit 1; a
# program on the pool is read, in text and in JSON, with itself listed
# alive and its live bytes counted, and its dead children shown dead until
# someone reaps them; so is a program in process mode, whose arena is
# private to it, after it has forked.
#
# Environment (set by make check): SHMPOOL_LIB, SHMPOOL_STAT.
set -u
lib=${SHMPOOL_LIB:?SHMPOOL_LIB is not set}
stat=${SHMPOOL_STAT:?SHMPOOL_STAT is not set}
tmp=$(mktemp -d)
pids=
trap 'kill $pids 2>/dev/null; rm -rf "$tmp"' EXIT
status=0

fail() {
    echo "stat: FAIL: $*"
    status=1
}

# expect_exit WANT ARGS...: the exit status and exactly one line on stderr.
expect_exit() {
    want=$1
    shift
    "$stat" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -ne "$want" ]; then
        fail "shmpool-stat $*: exit $rc, want $want"
    elif [ "$(wc -l <"$tmp/err")" -ne 1 ]; then
        fail "shmpool-stat $*: $(wc -l <"$tmp/err") lines on stderr, want 1"
    else
        echo "stat: PASS: shmpool-stat $*: exit $rc: $(cat "$tmp/err")"
    fi
}

expect_exit 2
expect_exit 2 --bogus 1
expect_exit 2 12x
expect_exit 2 1 2
expect_exit 1 $$                   # this shell maps no arena
expect_exit 1 2147483              # no such process

# A program that loaded the library in children mode (so it stays private
# and its children attach), and one child that attached, allocated and
# died without its parent waiting for it.
python=/usr/bin/python3
cat >"$tmp/prog.py" <<'PY'
import os, sys, time
pid = os.fork()
if pid == 0:
    junk = [bytearray(1000) for _ in range(500)]
    os._exit(0)
print(pid, flush=True)
time.sleep(30)
PY
LD_PRELOAD=$lib SHMPOOL_MODE=children $python "$tmp/prog.py" >"$tmp/child" 2>"$tmp/prog.err" &
prog=$!
pids=$prog
for _ in $(seq 100); do [ -s "$tmp/child" ] && break; sleep 0.05; done
child=$(cat "$tmp/child")
[ -n "$child" ] || fail "the program never forked"
# The child's death, once it is dead (a zombie: its parent does not wait).
for _ in $(seq 100); do
    [ "$(cut -d' ' -f3 /proc/"$child"/stat 2>/dev/null)" = Z ] && break
    sleep 0.05
done

if "$stat" --json $prog >"$tmp/json" 2>"$tmp/err"; then
    if $python - "$tmp/json" "$child" <<'PY'
import json, os, sys
j = json.load(open(sys.argv[1]))
child = int(sys.argv[2])
procs = {p["pid"]: p for p in j["processes"]}
assert child in procs, f"the child {child} is not listed: {procs}"
assert procs[child]["state"] == "dead", f"the dead child is {procs[child]['state']}"
assert procs[child]["live"] >= 500 * 1000, f"the child's live bytes: {procs[child]['live']}"
assert j["arena"]["in_use"] >= procs[child]["live"], "in use below the child's live bytes"
assert j["check"] in ("ok", ""), f"check: {j['check']}"
print("stat: PASS: JSON: the dead child listed dead with", procs[child]["live"], "live bytes;",
      "check", j["check"] or "(not in this build)")
# The child's blocks are still held (a dead process's wait for a reap), so
# their pages, their tags and their spans' descriptors have memory behind
# them, and nothing is counted twice.
m = j["memory"]
assert m is not None, "the memory of a shared arena is not known"
assert m["data"] >= 500 * 1000, f"data {m['data']}, below the child's blocks"
assert m["tags"] > 0 and m["descriptors"] > 0 and m["pagemap"] > 0 and m["other"] > 0, m
# The memfd's own count of its blocks, read a moment later (a sleeping
# program may give back between the two).
for line in open(f"/proc/{j['pid']}/maps"):
    if "/memfd:shmpool" in line:
        blocks = os.stat(f"/proc/{j['pid']}/map_files/{line.split()[0]}").st_blocks * 512
        break
total = sum(m.values())
assert abs(total - blocks) <= blocks // 10, f"{m} sums to {total}, the memfd holds {blocks}"
print("stat: PASS: JSON: memory", m, "against the memfd's", blocks)
PY
    then :; else fail "JSON of pid $prog: $(head -c 400 "$tmp/json")"; fi
else
    fail "shmpool-stat --json $prog: $(cat "$tmp/err")"
fi
if "$stat" $prog >"$tmp/text" 2>"$tmp/err" && grep -q "1 dead and not yet reaped" "$tmp/text" &&
    grep -q "^  memory      : .*: data .*, owner tags " "$tmp/text"; then
    echo "stat: PASS: text: $(grep processes "$tmp/text"); $(grep memory "$tmp/text")"
else
    fail "text of pid $prog: $(cat "$tmp/text" "$tmp/err")"
fi
# Process mode: the arena is the program's own (a private mapping), read
# through /proc/PID/mem; a fork on the way changes nothing of it.
cat >"$tmp/proc.py" <<'PY'
import os, sys, time
junk = [bytearray(1000) for _ in range(2000)]
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
print(os.getpid(), flush=True)
time.sleep(30)
PY
LD_PRELOAD=$lib SHMPOOL_MODE=process $python "$tmp/proc.py" >"$tmp/procpid" 2>"$tmp/proc.err" &
pids="$pids $!"
for _ in $(seq 100); do [ -s "$tmp/procpid" ] && break; sleep 0.05; done
procpid=$(cat "$tmp/procpid")
if [ -z "$procpid" ]; then
    fail "the process-mode program never started: $(cat "$tmp/proc.err")"
elif "$stat" --json "$procpid" >"$tmp/json" 2>"$tmp/err"; then
    if $python - "$tmp/json" "$procpid" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
me = int(sys.argv[2])
procs = {p["pid"]: p for p in j["processes"]}
assert list(procs) == [me], f"processes: {procs}, want only {me}"
assert procs[me]["state"] == "alive", f"the program is {procs[me]['state']}"
assert procs[me]["live"] >= 2000 * 1000, f"its live bytes: {procs[me]['live']}"
assert j["check"] in ("ok", ""), f"check: {j['check']}"
assert j["memory"] is None, f"the memory of a copy: {j['memory']}"
print("stat: PASS: process mode, JSON: the program listed alive with", procs[me]["live"],
      "live bytes; check", j["check"] or "(not in this build)")
PY
    then :; else fail "JSON of process-mode pid $procpid: $(head -c 400 "$tmp/json")"; fi
    if "$stat" "$procpid" >"$tmp/text" 2>"$tmp/err" &&
        grep -q "copied through /proc/PID/mem" "$tmp/text"; then
        echo "stat: PASS: process mode, text: $(head -n 1 "$tmp/text")"
    else
        fail "text of process-mode pid $procpid: $(cat "$tmp/text" "$tmp/err")"
    fi
else
    fail "shmpool-stat --json $procpid (process mode): $(cat "$tmp/err")"
fi
exit $status
