# SPDX-License-Identifier: BSD-2-Clause
# Sourced by the tests in tests/servers/: real programs (nginx, PostgreSQL,
# Apache, bash, Python) run on libshmpool.so the way a user runs them,
#     LD_PRELOAD=libshmpool.so SHMPOOL_MODE=children program ...
# The helpers give every test the same frame:
#   t_init NAME LIMIT   a private temporary directory holding a copy of the
#                       library, a hard time limit, and cleanup on any exit
#   t_expect / t_ok / t_bad / t_end
#                       one PASS or FAIL line per check and a verdict;
#                       every check runs, so one run lists all that fail
#   t_stat, t_settle, t_check_arena
#                       the arena as shmpool-stat sees it from outside
# Environment (set by make check): SHMPOOL_LIB, SHMPOOL_STAT.

t_passed=0
t_failed=0
t_servers=""

# t_init NAME LIMIT: start a test called NAME that may run LIMIT seconds.
# Sets $tmp (mode 0711, so that a server that drops to another user can
# reach the files it is given by path) and $lib, a world-readable copy of
# libshmpool.so in it: postgres execs as `postgres`, and the build tree may
# be private to root.  Every process that maps that copy is ours, which is
# how cleanup finds servers that left our process tree (PostgreSQL's
# backends call setsid).
t_init() {
    t_name=$1 t_limit=$2
    : "${SHMPOOL_LIB:?SHMPOOL_LIB is not set (make check sets it)}"
    if [ ! -f "$SHMPOOL_LIB" ]; then
        echo "$t_name: FAIL: $SHMPOOL_LIB is missing (make builds it)" >&2
        exit 1
    fi
    tmp=$(mktemp -d "/tmp/poold-$t_name.XXXXXX")
    chmod 0711 "$tmp"
    mkdir "$tmp/log"
    chmod 0777 "$tmp/log"
    lib=$tmp/libshmpool.so
    cp "$SHMPOOL_LIB" "$lib"
    chmod 0644 "$lib"
    trap t_cleanup EXIT
    trap 'exit 1' INT TERM HUP
    t_watchdog &
    # Out of the job table, so that killing it at the end is not reported.
    disown $!
    t_start=$(date +%s)
}

# The hard limit: when it passes, say so, kill everything the test started
# and the test itself.  (A trap in the test would wait for whatever command
# is hanging in the foreground, so the watchdog does the cleanup itself.)
t_watchdog() {
    sleep "$t_limit"
    echo "$t_name: FAIL: hard time limit of ${t_limit}s reached; killing everything it started" >&2
    t_kill_all KILL
    rm -rf "$tmp"
    kill -KILL $$
}

# t_server PID SIGNAL: a server to stop with SIGNAL (its fast shutdown)
# when the test ends, before anything left is killed.
t_server() {
    t_servers="$t_servers $1:$2"
}

# The processes to clean up: every descendant of the test but the caller
# (the watchdog, when it is the one cleaning up) and every process that
# maps our copy of the library.
t_ours() {
    ps -e -o pid=,ppid= | awk -v top=$$ -v me="$1" '
        { parent[$1] = $2 }
        END {
            for (p in parent) {
                for (q = p; q in parent && q != top && q > 1; q = parent[q]) ;
                if (q == top && p != top && p != me) print p
            }
        }'
    grep -ls -- "$lib" /proc/[0-9]*/maps 2>/dev/null | cut -d/ -f3
}

# t_kill_all SIGNAL: send SIGNAL to all of ours.
t_kill_all() {
    me=$BASHPID
    pids=$(t_ours $me | sort -u)
    [ -n "$pids" ] && kill -"$1" $pids 2>/dev/null
    return 0
}

t_cleanup() {
    status=$?
    trap - EXIT INT TERM HUP
    # A server the test already stopped is gone: under set -e a failed
    # kill would end the cleanup here, leaving the watchdog and $tmp.
    for s in $t_servers; do
        kill -"${s#*:}" "${s%:*}" 2>/dev/null || true
    done
    # A fast shutdown takes well under a second; give it five.
    for _ in $(seq 50); do
        [ -z "$(grep -ls -- "$lib" /proc/[0-9]*/maps 2>/dev/null)" ] && break
        sleep 0.1
    done
    t_kill_all KILL
    wait 2>/dev/null
    if [ $status -ne 0 ] && [ $status -ne 77 ] && [ -d "$tmp/log" ]; then
        for f in "$tmp"/log/*; do
            [ -s "$f" ] || continue
            echo "---- last lines of ${f##*/}"
            tail -n 15 "$f"
        done
    fi
    rm -rf "$tmp"
    exit $status
}

# t_skip WHAT: a package is genuinely missing.  Loudly: CI installs every
# one of them (scripts/deps-debian.sh), so a skip there is a bug in that
# script, not a pass.
t_skip() {
    echo "$t_name: SKIP: $* -- scripts/deps-debian.sh installs it;" \
         "a skip in CI means that script is broken" >&2
    exit 77
}

# t_need PACKAGE FILE...: skip unless every FILE exists.
t_need() {
    pkg=$1
    shift
    for f in "$@"; do
        [ -e "$f" ] || t_skip "$f is missing (Debian package $pkg)"
    done
}

t_ok() {
    t_passed=$((t_passed + 1))
    echo "$t_name: PASS: $*"
}

t_bad() {
    t_failed=$((t_failed + 1))
    echo "$t_name: FAIL: $*"
}

# t_expect WHAT VALUE OP LIMIT: a numeric check, e.g.
# t_expect "attach failures" "$n" -eq 0.  An empty VALUE (a figure that
# could not be read) fails.
t_expect() {
    if [ -z "$2" ]; then
        t_bad "$1: no value${t_why:+ ($t_why)}"
    elif [ "$2" "$3" "$4" ]; then
        t_ok "$1: $2 (want $3 $4)"
    else
        t_bad "$1: $2, want $3 $4"
    fi
}

# t_end: the verdict, and the exit status make check reads.
t_end() {
    echo "$t_name: $t_passed checks passed, $t_failed checks failed" \
         "in $(( $(date +%s) - t_start ))s"
    [ $t_failed -eq 0 ]
}

# t_wait_for SECONDS COMMAND...: poll COMMAND every 0.1 s until it
# succeeds; false if it never does within SECONDS.
t_wait_for() {
    n=$(( $1 * 10 ))
    shift
    while ! "$@" >/dev/null 2>&1; do
        n=$((n - 1))
        [ $n -gt 0 ] || return 1
        sleep 0.1
    done
}

# t_free_port: a TCP port on 127.0.0.1 that nothing listens on now.
t_free_port() {
    /usr/bin/python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# t_children PID: the pids of PID's children, one a line.
t_children() {
    ps -o pid= --ppid "$1" | tr -d ' '
}

# t_check_mapped WHAT PID...: the preload really is in these processes
# (a lost LD_PRELOAD would make every other check pass on glibc).  A pid
# that has exited meanwhile (PostgreSQL's start-up process) is passed over.
t_check_mapped() {
    what=$1 seen=
    shift
    for p in "$@"; do
        maps=$(cat "/proc/$p/maps" 2>/dev/null) || continue
        if [ "${maps#*"$lib"}" = "$maps" ]; then
            t_bad "$what: libshmpool.so is not mapped into pid $p"
            return
        fi
        seen="$seen $p"
    done
    if [ -n "$seen" ]; then
        t_ok "$what: libshmpool.so is mapped into pids$seen"
    else
        t_bad "$what: no process to look at"
    fi
}

# t_log_count PATTERN: lines matching PATTERN in the servers' logs
# ($tmp/log/: their stderr, which the library writes to, and the logs
# they redirect their stderr into).
t_log_count() {
    cat "$tmp"/log/* 2>/dev/null | grep -c -- "$1"
}

# t_check_library_log: the library's two complaints that mean a process
# lost the shared arena.
t_check_library_log() {
    t_expect "attach failures logged ('could not attach')" \
        "$(t_log_count 'could not attach')" -eq 0
    t_expect "arena-full fallbacks logged ('is full')" "$(t_log_count 'is full')" -eq 0
}

# ---------------------------------------------------------------------------
# wrk: load, and its failures sorted by cause
# ---------------------------------------------------------------------------

# t_wrk_start URL CONNS OUT [WRK-OPTION...]: wrk in the background for at
# most 300 s (the test stops it with t_wrk_stop); sets $wrk_pid.
t_wrk_start() {
    url=$1 conns=$2 out=$3
    shift 3
    wrk -t 1 -c "$conns" -d 300s --timeout 10s "$@" "$url" >"$out" 2>&1 &
    wrk_pid=$!
}

# t_wrk_stop: SIGINT makes wrk stop and print its summary.
t_wrk_stop() {
    kill -INT "$wrk_pid" 2>/dev/null
    wait "$wrk_pid" 2>/dev/null || true
}

# t_check_wrk OUT KILLS CONNS: the requests wrk sent failed only where a
# worker was killed under them.  Classification: a killed worker's
# connections are reset by the kernel, which wrk counts as read or write
# errors; the servers here close no connection early otherwise (keep-alive
# is off, so a graceful reload or a recycled child has no idle connection
# to drop), and so read and write errors are allowed only when workers were
# killed, at most CONNS (all wrk's connections) per kill.  Connect errors
# (the listening socket belongs to the master and outlives every worker),
# timeouts and non-2xx answers are real failures and must be zero.
t_check_wrk() {
    out=$1 kills=$2 conns=$3
    served=$(grep -Eo '^ *[0-9]+ requests in' "$out" | grep -Eo '[0-9]+' | head -n 1)
    set -- $(grep -Eo 'connect [0-9]+, read [0-9]+, write [0-9]+, timeout [0-9]+' "$out" |
             grep -Eo '[0-9]+' | tr '\n' ' ') 0 0 0 0
    e_connect=$1 e_read=$2 e_write=$3 e_timeout=$4
    non2xx=$(grep -Eo 'Non-2xx or 3xx responses: [0-9]+' "$out" | grep -Eo '[0-9]+$' || echo 0)
    t_why="wrk printed no summary: $(tail -n 2 "$out" | tr '\n' ' ')"
    t_expect "requests served" "$served" -gt 0
    t_expect "failed requests outside killed workers' connections" \
        "${served:+$((e_connect + e_timeout + non2xx))}" -eq 0
    t_expect "connections reset (on $kills killed workers)" \
        "${served:+$((e_read + e_write))}" -le $((kills * conns))
    t_why=
}

# ---------------------------------------------------------------------------
# The arena from outside: shmpool-stat --json PID
# ---------------------------------------------------------------------------

# t_stat PID OUT: the JSON of the arena PID has mapped, into OUT.  Fails
# with the reason in $t_why (so t_expect says why its figure is missing).
t_stat() {
    if [ ! -x "${SHMPOOL_STAT:-}" ]; then
        [ -n "${t_said_no_stat:-}" ] ||
            echo "$t_name: shmpool-stat is missing at '${SHMPOOL_STAT:-}' (SHMPOOL_STAT):" \
                 "it comes with the allocator's lifecycle fix (issue 13); every check" \
                 "that reads the arena fails"
        t_said_no_stat=1
        t_why="no shmpool-stat"
        : >"$2"
        return 1
    fi
    if ! "$SHMPOOL_STAT" --json "$1" >"$2" 2>"$2.err"; then
        t_why="shmpool-stat --json $1 failed: $(head -c 300 "$2.err")"
        : >"$2"
        return 1
    fi
    t_why=
}

# t_json FILE EXPR: evaluate a Python expression over the JSON object j in
# FILE; prints nothing when FILE is empty or lacks what EXPR reads.
t_json() {
    /usr/bin/python3 - "$1" "$2" <<'EOF'
import json, sys
try:
    with open(sys.argv[1]) as f:
        j = json.load(f)
    alive = [p for p in j["processes"] if p["state"] == "alive"]
    v = eval(sys.argv[2], {"j": j, "alive": alive, "len": len, "max": max, "sum": sum,
                           "sorted": sorted})
except (ValueError, KeyError, TypeError, IndexError, OSError):
    sys.exit(0)
print(" ".join(map(str, v)) if isinstance(v, list) else int(v) if isinstance(v, bool) else v)
EOF
}

# The settled state every test waits for is defined by the test's own
# function server_pids: it prints the pids of the server's processes that
# should be attached now (nginx's or Apache's workers, the postmaster's
# children), one a line.

# t_pids_json FILE: the pids of the processes alive in the arena, sorted.
t_pids_json() {
    echo $(t_json "$1" 'sorted(p["pid"] for p in alive)')
}

t_pids_server() {
    echo $(server_pids | sort -n)
}

# t_settle WHAT PID OUT: wait (at most 20 s) until the arena of server
# PID is quiescent: the processes alive in it are the server's
# (server_pids), none is dead, and arena.in_use is unchanged over three
# readings 0.3 s apart; leave the last reading in OUT.  A check: it fails
# when the arena never settles, saying what was last seen.
t_settle() {
    prev= same=0
    for _ in $(seq 66); do
        if ! t_stat "$2" "$3"; then
            t_bad "$1: the arena cannot be read: $t_why"
            return
        fi
        now="alive $(t_pids_json "$3"), dead $(t_json "$3" 'len(j["processes"]) - len(alive)'), in_use $(t_json "$3" 'j["arena"]["in_use"]')"
        t_pids_server >"$3.pids"
        want="alive $(cat "$3.pids"), dead 0,"
        if [ "$now" = "$prev" ] && [ "${now#"$want"}" != "$now" ]; then
            same=$((same + 1))
            if [ $same -ge 2 ]; then
                t_ok "$1: the arena settled: $now"
                return
            fi
        else
            same=0
        fi
        prev=$now
        sleep 0.3
    done
    t_bad "$1: the arena never settled: last seen $now; want $want"
    echo "---- the server's processes, then the arena, as the settle ended"
    ps -o pid=,ppid=,stat=,etimes=,args= -p "$(t_pids_server | tr ' ' ',')" 2>&1 | head -n 80
    "$SHMPOOL_STAT" "$2" 2>&1 | head -n 80
    # Where the server's master is: a dead child its master has not waited
    # for is reaped by nobody in an idle server.
    echo "---- pid $2 (the master): wchan $(cat /proc/"$2"/wchan 2>&1), syscall $(cat /proc/"$2"/syscall 2>&1)"
    grep -E '^(State|SigPnd|ShdPnd|SigBlk)' /proc/"$2"/status 2>&1
    if command -v gdb >/dev/null; then gdb -p "$2" -batch -ex bt 2>&1 | grep '^#' | head -n 25; fi
    # A zombie its master has not waited for: its threads, and what the
    # master's next waits return.
    for z in $(ps -o pid=,stat= --ppid "$2" | awk '$2 ~ /^Z/ { print $1 }'); do
        echo "---- zombie $z: $(grep -E '^(Threads|Tgid|PPid|TracerPid)' /proc/"$z"/status 2>&1 | tr '\n\t' '  '), tasks $(ls /proc/"$z"/task 2>&1 | tr '\n' ' ')"
    done
    if command -v strace >/dev/null; then timeout 3 strace -tt -p "$2" 2>&1 | head -n 30; fi
}

# t_check_arena WHAT BEFORE AFTER KILLS: the checks on the arena after a
# storm of exits and deaths, from two settled readings (t_settle).
#  - bytes in use no higher than before, within a tolerance: every
#    quiescent process keeps live state of its own (a worker's connection
#    arrays, a backend's caches), which differs by a few KiB from one
#    process to the next; so the tolerance is 64 KiB per live process, plus
#    the largest process's live bytes for each process more than before
#    (Apache's idle children settle at 2 or 3).  A leak left by each of
#    hundreds or thousands of exits lands far above that;
#  - every attach succeeded, every death was reaped (at least KILLS reaps)
#    without leaking, no slot is held by a dead process, and the processes
#    alive in the arena are the server's (server_pids) as they were when
#    the reading was taken (a prefork server keeps starting and stopping
#    idle children, so a later look may differ);
#  - the heap check passes (these tests run in the debug build only).
t_check_arena() {
    what=$1 before=$2 after=$3 kills=$4
    in0=$(t_json "$before" 'j["arena"]["in_use"]')
    n0=$(t_json "$before" 'len(alive)')
    in1=$(t_json "$after" 'j["arena"]["in_use"]')
    n1=$(t_json "$after" 'len(alive)')
    if [ -n "$in0" ] && [ -n "$in1" ]; then
        maxlive=$(t_json "$after" 'max([p["live"] for p in alive] + [0])')
        extra=$(( n1 > n0 ? n1 - n0 : 0 ))
        t_expect "$what: growth of arena bytes in use (before $in0 with $n0 processes, after $in1 with $n1)" \
            $((in1 - in0)) -le $(( 65536 * n1 + maxlive * extra ))
    else
        t_bad "$what: arena bytes in use before and after: not read${t_why:+ ($t_why)}"
    fi
    t_expect "$what: attach failures (shmpool-stat)" "$(t_json "$after" 'j["attach_failures"]')" -eq 0
    t_expect "$what: reaps (shmpool-stat)" "$(t_json "$after" 'j["reaps"]["count"]')" -ge "$kills"
    t_expect "$what: bytes leaked by reaps" "$(t_json "$after" 'j["reaps"]["leaked"]')" -eq 0
    t_expect "$what: slots held by dead processes" \
        "$(t_json "$after" 'len(j["processes"]) - len(alive)')" -eq 0
    slots=$(t_pids_json "$after") want=$(cat "$after.pids" 2>/dev/null)
    if [ -z "$n1" ]; then
        t_bad "$what: processes in the arena: not read${t_why:+ ($t_why)}"
    elif [ "$slots" = "$want" ]; then
        t_ok "$what: the processes alive in the arena are the server's ($slots)"
    else
        t_bad "$what: processes alive in the arena '$slots', but the server's are '$want'"
    fi
    check=$(t_json "$after" 'j["check"]')
    if [ "$check" = ok ]; then
        t_ok "$what: heap check ok"
    else
        t_bad "$what: heap check: '${check:-not read${t_why:+ ($t_why)}}'"
    fi
}
