#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Redis 7 (Debian's redis-server, linked to libjemalloc.so.2) on
# libshmpool.so, with SHMPOOL_MODE=process (the server's heap in the
# arena; a BGSAVE child gets a private copy of it), children (the server
# private, its BGSAVE child attached) and unset (all private: the test
# calls that mode "private").  The preload takes over the
# jemalloc entry points Redis calls (malloc_usable_size, nallocx ...), so
# its heap is the pool's.  In each mode:
#  - 1 M keys loaded with redis-cli --pipe, a BGSAVE with writes stopped,
#    a restart from the snapshot with the same DBSIZE and DEBUG DIGEST;
#  - a BGSAVE while redis-benchmark writes, redis-check-rdb on the
#    snapshot, and a restart that loads the keys it counted;
#  - a kill -9 of the server in the middle of a BGSAVE, and a restart
#    that loads whatever snapshot is on disk, as redis-check-rdb counts it.
# Every snapshot must be written (no child dies), nothing may crash, and
# the library says nothing on stderr.
set -eu
. "$(dirname "$0")/lib.sh"

keys=1000000 bench_writes=100000

t_init redis 420
t_need redis-server /usr/bin/redis-server
t_need redis-tools /usr/bin/redis-cli /usr/bin/redis-check-rdb /usr/bin/redis-benchmark

port=$(t_free_port)
cli() {
    redis-cli -p "$port" "$@"
}

# The load: SET key:I val:I for every I, in the protocol --pipe sends.
awk -v n=$keys 'BEGIN {
    for (i = 0; i < n; i++) {
        k = "key:" i; v = "val:" i
        printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(k), k, length(v), v
    }
}' >"$tmp/load.resp"

# start MODE RUN: a server on $tmp/$MODE (its snapshot there), stdout
# (Redis's log) and stderr (the library's) apart; sets $server.
start() {
    mkdir -p "$tmp/$1"
    env LD_PRELOAD="$lib" SHMPOOL_MODE="${1#private}" /usr/bin/redis-server --port "$port" \
        --bind 127.0.0.1 --dir "$tmp/$1" --dbfilename dump.rdb --save '' --appendonly no \
        --enable-debug-command yes --daemonize no --logfile '' \
        >"$tmp/log/redis-$1-$2.log" 2>"$tmp/log/redis-$1-$2.err" &
    server=$!
    t_server $server TERM
    for _ in $(seq 600); do
        loaded && return 0
        if ! kill -0 $server 2>/dev/null; then
            rc=0
            wait $server || rc=$?
            t_bad "$1: the server ($2) ended with status $rc before it was up"
            return 1
        fi
        sleep 0.1
    done
    t_bad "$1: the server ($2) had not loaded its snapshot within 60 s"
    return 1
}

# stop MODE RUN: SHUTDOWN NOSAVE, and the server exits 0.
stop() {
    cli shutdown nosave >/dev/null 2>&1 || true
    rc=0
    wait $server || rc=$?
    t_expect "$1: the server's exit status ($2)" "$rc" -eq 0
}

info() {
    cli info 2>/dev/null | tr -d '\r' | sed -n "s/^$1://p"
}

# Up, and done loading the snapshot (until then, commands get LOADING).
loaded() {
    [ "$(info loading)" = 0 ]
}

not_saving() {
    [ "$(info rdb_bgsave_in_progress)" = 0 ]
}

# bgsave MODE WHAT: a BGSAVE that ends, and ends well.
bgsave() {
    cli bgsave >/dev/null
    if ! t_wait_for 120 not_saving; then
        t_bad "$1: $2: the BGSAVE did not end within 120 s"
        return
    fi
    status=$(info rdb_last_bgsave_status)
    if [ "$status" = ok ]; then
        t_ok "$1: $2: BGSAVE ok (fork took $(info latest_fork_usec) us)"
    else
        t_bad "$1: $2: BGSAVE status '$status'"
    fi
}

# rdb_keys MODE: the keys redis-check-rdb counts in the snapshot, which
# it must find sound.
rdb_keys() {
    if redis-check-rdb "$tmp/$1/dump.rdb" >"$tmp/check-rdb.out" 2>&1 &&
        grep -q 'RDB looks OK' "$tmp/check-rdb.out"; then
        sed -n 's/.*\[info\] \([0-9]*\) keys read.*/\1/p' "$tmp/check-rdb.out"
    fi
}

dbsize() {
    cli dbsize
}

mode_run() {
    mode=$1
    start $mode load || return 0
    t_check_mapped "$mode: redis-server" $server
    out=$(cli --pipe <"$tmp/load.resp" 2>&1 | tail -n 1)
    case $out in
    *"errors: 0, replies: $keys") t_ok "$mode: $keys keys loaded ($out)" ;;
    *) t_bad "$mode: the load: '$out'" ;;
    esac
    t_expect "$mode: DBSIZE after the load" "$(dbsize)" -eq $keys
    if [ $mode = process ]; then
        # The heap is the pool's: the keys are in the arena.
        t_stat $server "$tmp/stat.json" || true
        t_expect "$mode: bytes in use in the arena after the load" \
            "$(t_json "$tmp/stat.json" 'j["arena"]["in_use"]')" -gt $((keys * 40))
    fi

    # A snapshot of a still dataset, and a restart from it.
    bgsave $mode "writes stopped"
    digest=$(cli debug digest)
    stop $mode load
    start $mode restart || return 0
    t_expect "$mode: DBSIZE after the restart" "$(dbsize)" -eq $keys
    got=$(cli debug digest)
    if [ -n "$digest" ] && [ "$got" = "$digest" ]; then
        t_ok "$mode: DEBUG DIGEST after the restart is the one saved ($got)"
    else
        t_bad "$mode: DEBUG DIGEST after the restart '$got', saved '$digest'"
    fi

    # A snapshot while writes go on.
    redis-benchmark -p "$port" -t set -n $bench_writes -r 1000000 -P 16 -q \
        >"$tmp/bench-$mode.out" 2>&1 &
    bench=$!
    sleep 0.2
    bgsave $mode "writes going on"
    rc=0
    wait $bench || rc=$?
    t_expect "$mode: redis-benchmark's exit status" "$rc" -eq 0
    saved=$(rdb_keys $mode)
    t_expect "$mode: keys redis-check-rdb reads in the snapshot taken under writes" \
        "${saved:-}" -ge $keys
    stop $mode writes
    start $mode reload || return 0
    t_expect "$mode: DBSIZE after loading it (redis-check-rdb read ${saved:-nothing})" \
        "$(dbsize)" -eq "${saved:-0}"

    # A kill -9 of the server while its child saves.
    cli bgsave >/dev/null
    child=$(t_children $server | head -n 1)
    kill -KILL $server
    wait $server 2>/dev/null || true
    t_ok "$mode: server killed mid-BGSAVE (its child ${child:-had already ended})"
    if [ -n "$child" ]; then
        t_wait_for 60 sh -c "! kill -0 $child 2>/dev/null" ||
            t_bad "$mode: the orphaned BGSAVE child $child still runs after 60 s"
    fi
    saved=$(rdb_keys $mode)
    t_expect "$mode: keys redis-check-rdb reads after the kill" "${saved:-}" -ge $keys
    start $mode "after-kill" || return 0
    t_expect "$mode: DBSIZE after the restart (redis-check-rdb read ${saved:-nothing})" \
        "$(dbsize)" -eq "${saved:-0}"
    stop $mode "after-kill"
}

for mode in process children private; do
    mode_run $mode
done

# Nothing crashed, and the library said nothing.
t_expect "BGSAVE children that died (Redis's logs)" \
    "$(cat "$tmp"/log/*.log | grep -c 'terminated by signal')" -eq 0
t_expect "crash reports (Redis's logs)" \
    "$(cat "$tmp"/log/*.log | grep -c -i 'crashed by signal\|Guru Meditation')" -eq 0
t_expect "lines on stderr (the library's, and anything else's)" \
    "$(cat "$tmp"/log/*.err | wc -l)" -eq 0
t_end
