#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# nginx (Debian's nginx-light) on libshmpool.so in children mode, as a user
# would run it: the master stays private, its two workers attach.  Under
# wrk load, 200 reloads (SIGHUP: two new workers each time, the old ones
# finish gracefully and exit) and a kill -9 of a worker after every tenth
# reload, 20 in all.  Then: no request failed outside the killed workers'
# connections, no attach failed and no arena filled up, and the arena (as
# shmpool-stat sees it) is back to its level before the reloads, its dead
# reaped and its heap check passing.
set -eu
. "$(dirname "$0")/lib.sh"

reloads=200 kills_every=10 conns=8

t_init nginx 240
t_need nginx-light /usr/sbin/nginx
t_need wrk /usr/bin/wrk

port=$(t_free_port)
mkdir -p "$tmp/www" "$tmp/body"
head -c 3000 /dev/urandom | base64 >"$tmp/www/index.html"
# Workers drop to www-data when the test runs as root, as nginx is run in
# production; the library was mapped before, so they need no access to it.
user=
[ "$(id -u)" -eq 0 ] && user="user www-data;"
# Keep-alive off: a reload or a recycled worker then never drops an idle
# connection, so any reset wrk sees is a killed worker's (t_check_wrk).
# gzip makes every request allocate in the worker (zlib's state comes from
# nginx's request pool, which is malloc).
cat >"$tmp/nginx.conf" <<EOF
$user
worker_processes 2;
pid $tmp/nginx.pid;
error_log $tmp/log/error.log notice;
events { worker_connections 256; }
http {
    access_log off;
    keepalive_timeout 0;
    client_body_temp_path $tmp/body;
    gzip on;
    gzip_min_length 0;
    server {
        listen 127.0.0.1:$port;
        root $tmp/www;
    }
}
EOF

LD_PRELOAD=$lib SHMPOOL_MODE=children /usr/sbin/nginx -p "$tmp" -e "$tmp/log/error.log" \
    -c "$tmp/nginx.conf" -g "daemon off;" >"$tmp/log/nginx.out" 2>"$tmp/log/nginx.err" &
master=$!
t_server $master QUIT

# The current workers: the master's children that are not shutting down
# (their title then says so).
server_pids() {
    ps -o pid=,args= --ppid "$master" | awk '$2 == "nginx:" && $3 == "worker" && NF == 4 { print $1 }'
}

two_workers() {
    [ "$(server_pids | wc -l)" -eq 2 ]
}

# new_workers OLD...: two workers are up and none of them is in OLD.
new_workers() {
    now=$(server_pids)
    [ "$(echo "$now" | wc -w)" -eq 2 ] || return 1
    for p in $now; do
        case " $* " in *" $p "*) return 1 ;; esac
    done
}

if ! t_wait_for 10 two_workers; then
    t_bad "nginx did not start two workers within 10 s"
    t_end
    exit
fi
t_check_mapped "workers" $(server_pids)
url=http://127.0.0.1:$port/
t_expect "a first request answers 200" \
    "$(curl -s -o /dev/null -w '%{http_code}' -H 'Accept-Encoding: gzip' "$url")" -eq 200

# The level before the storm: after a warm-up, so that the workers hold
# whatever a loaded worker keeps.
t_wrk_start "$url" $conns "$tmp/warm.out" -H 'Accept-Encoding: gzip'
sleep 2
t_wrk_stop
t_settle "before the reloads" $master "$tmp/before.json"

t_wrk_start "$url" $conns "$tmp/wrk.out" -H 'Accept-Encoding: gzip'
done_reloads=0 done_kills=0
for i in $(seq $reloads); do
    old=$(server_pids)
    kill -HUP $master
    if ! t_wait_for 10 new_workers $old; then
        t_bad "reload $i: no two new workers within 10 s (now: $(echo $(server_pids)))"
        break
    fi
    done_reloads=$i
    [ $((i % kills_every)) -eq 0 ] || continue
    set -- $(server_pids)
    victim=$1
    kill -KILL "$victim"
    if ! t_wait_for 10 new_workers "$victim"; then
        t_bad "kill $((done_kills + 1)): worker $victim was not replaced within 10 s"
        break
    fi
    done_kills=$((done_kills + 1))
done
t_wrk_stop
t_expect "reloads done" $done_reloads -eq $reloads
t_expect "workers killed" $done_kills -eq $((reloads / kills_every))
t_expect "reloads nginx logged" "$(t_log_count 'signal 1 (SIGHUP) received')" -eq $done_reloads
t_expect "killed workers nginx logged" "$(t_log_count 'exited on signal 9')" -eq $done_kills
t_check_wrk "$tmp/wrk.out" $done_kills $conns
t_check_library_log

t_settle "after the reloads" $master "$tmp/after.json"
t_check_arena "after $done_reloads reloads and $done_kills kills" \
    "$tmp/before.json" "$tmp/after.json" $done_kills
t_end
