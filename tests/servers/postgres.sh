#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# PostgreSQL 15 (Debian's postgresql-15) on libshmpool.so in children mode:
# the postmaster stays private, every process it forks attaches.  pgbench -C
# opens a new connection, and so a new backend, for every transaction:
# 3,000 short-lived backends; then a kill -9 of a backend, after which the
# postmaster kills and restarts all the others; then 1,000 backends more.
# Then: no transaction failed, no attach failed and no arena filled up,
# and the arena's use is flat across both, its dead reaped and its heap
# check passing.  The server runs as `postgres` in a directory of its own,
# on a Unix socket only.
set -eu
. "$(dirname "$0")/lib.sh"

backends=3000 backends_after_kill=1000 clients=4

t_init postgres 240
bin=/usr/lib/postgresql/15/bin
t_need postgresql-15 $bin/postgres $bin/initdb $bin/pgbench $bin/psql $bin/pg_isready

pgdata=$tmp/pg sock=$tmp/sock
mkdir "$pgdata" "$sock"
# postgres refuses to run as root.
if [ "$(id -u)" -eq 0 ]; then
    chown postgres: "$pgdata" "$sock"
    as_pg() { runuser -u postgres -- "$@"; }
else
    as_pg() { "$@"; }
fi
conn="-h $sock -p 5432 -U postgres"

if ! as_pg $bin/initdb -D "$pgdata" -A trust -U postgres --no-sync >"$tmp/initdb.out" 2>&1; then
    t_bad "initdb failed: $(tail -n 3 "$tmp/initdb.out")"
    t_end
    exit
fi
# fsync off: the test is about processes, not the disk.  autovacuum off:
# its workers come and go on their own clock, and the settled state must
# be the same set of processes before and after.
as_pg env LD_PRELOAD="$lib" SHMPOOL_MODE=children $bin/postgres -D "$pgdata" -k "$sock" \
    -c listen_addresses= -p 5432 -c fsync=off -c autovacuum=off -c log_connections=on \
    -c max_connections=20 -c shared_buffers=16MB >"$tmp/log/postgres.log" 2>&1 &

ready() {
    $bin/pg_isready -q $conn
}

if ! t_wait_for 30 ready; then
    t_bad "postgres did not accept connections within 30 s"
    t_end
    exit
fi
postmaster=$(head -n 1 "$pgdata/postmaster.pid")
# SIGINT is the fast shutdown.
t_server "$postmaster" INT

# Every process the postmaster forks is attached.
server_pids() {
    t_children "$postmaster"
}

t_check_mapped "postmaster's children" $(server_pids)

# pgbench_run WHAT CLIENTS TRANSACTIONS OPTION...: a pgbench run whose
# every transaction must succeed.
pgbench_run() {
    what=$1 want=$(( $2 * $3 ))
    out=$tmp/pgbench-$(echo "$what" | tr -c 'a-z0-9\n' -).out
    if $bin/pgbench $conn -n -c "$2" -t "$3" "${@:4}" postgres >"$out" 2>&1; then
        t_ok "$what: pgbench exited 0"
    else
        t_bad "$what: pgbench failed: $(grep -m 3 -i 'error\|fatal' "$out" | tr '\n' ' ')"
    fi
    t_expect "$what: transactions processed" \
        "$(sed -n 's|^number of transactions actually processed: \([0-9]*\)/.*|\1|p' "$out")" -eq $want
    t_expect "$what: failed transactions" \
        "$(sed -n 's|^number of failed transactions: \([0-9]*\).*|\1|p' "$out")" -eq 0
}

if ! $bin/pgbench $conn -i -q -s 1 postgres >"$tmp/pgbench-init.out" 2>&1; then
    t_bad "pgbench -i failed: $(tail -n 3 "$tmp/pgbench-init.out")"
    t_end
    exit
fi
pgbench_run "warm-up" $clients 25 -S -C
t_settle "before the backends" "$postmaster" "$tmp/before.json"

connected=$(t_log_count 'connection authorized')
pgbench_run "$backends backends" $clients $((backends / clients)) -S -C
t_expect "backends started (log_connections)" \
    $(( $(t_log_count 'connection authorized') - connected )) -ge $backends
t_settle "after $backends backends" "$postmaster" "$tmp/mid.json"
t_check_arena "after $backends backends" "$tmp/before.json" "$tmp/mid.json" 0

# A backend dies by kill -9 in the middle of a query: the postmaster then
# stops every other child (SIGQUIT) and starts afresh.
$bin/psql $conn -Atqc "select pg_sleep(600)" postgres >/dev/null 2>&1 &
sleeper=$!
victim_pid() {
    victim=$($bin/psql $conn -Atqc \
        "select pid from pg_stat_activity where query = 'select pg_sleep(600)'" postgres)
    [ -n "$victim" ]
}
if t_wait_for 10 victim_pid; then
    kill -KILL "$victim"
    restarted() {
        [ "$(t_log_count 'ready to accept connections')" -ge 2 ] && ready
    }
    if t_wait_for 30 restarted; then
        t_ok "the postmaster restarted after backend $victim was killed"
    else
        t_bad "the postmaster did not restart within 30 s after backend $victim was killed"
    fi
else
    t_bad "the backend running pg_sleep never showed up in pg_stat_activity"
fi
wait $sleeper 2>/dev/null || true

pgbench_run "$backends_after_kill backends after the kill" $clients \
    $((backends_after_kill / clients)) -S -C
t_expect "errors in the server log" "$(t_log_count 'ERROR:')" -eq 0
t_check_library_log
t_settle "after the kill" "$postmaster" "$tmp/after.json"
t_check_arena "after the kill and $backends_after_kill backends more" \
    "$tmp/before.json" "$tmp/after.json" 1
t_end
