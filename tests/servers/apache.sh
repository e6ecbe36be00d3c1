#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Apache 2.4 (Debian's apache2) with the prefork MPM on libshmpool.so in
# children mode: the parent stays private, every child attaches.  With
# MaxConnectionsPerChild 5 and keep-alive off, a child exits after five
# requests and the parent forks another: under wrk load, at least 2,000
# recycled children, and a kill -9 of a busy child every 200 of them.
# Then: no request failed outside the killed children's connections, no
# attach failed and no arena filled up, and the arena (as shmpool-stat sees
# it) is back to its level before the load, its dead reaped and its heap
# check passing.  Everything (config, logs, pid file) is in the test's
# directory and the server listens on 127.0.0.1 only.
set -eu
. "$(dirname "$0")/lib.sh"

children=2000 per_child=5 kill_every=200 conns=8

t_init apache 240
mods=/usr/lib/apache2/modules
t_need apache2 /usr/sbin/apache2 $mods/mod_mpm_prefork.so $mods/mod_authz_core.so
t_need wrk /usr/bin/wrk

port=$(t_free_port)
mkdir -p "$tmp/www" "$tmp/run"
head -c 3000 /dev/urandom | base64 >"$tmp/www/index.html"
user=
[ "$(id -u)" -eq 0 ] && user="User www-data
Group www-data"
# The access log names the child that served each request (%P): the
# distinct pids in it are the children that lived.  Prefork replaces exited
# children only in its once-a-second maintenance, at most 32 at a time
# (MAX_SPAWN_RATE): hence 32 spare children, the most it can recycle (about
# 27 a second here, with or without the library: 2,000 take 75 s).  And
# no maximum below ServerLimit: above MaxSpareServers the master stops one
# idle child a second (a byte down its pipe of death, then a dummy
# connection to wake a child, which a child serves as one of its five),
# and a dying child is dead in the arena until the master's next wait, a
# second later.  With 33, a burst of spawns could keep that trimming going
# past the settle's 20 s, one dead child at almost every reading.
cat >"$tmp/httpd.conf" <<EOF
ServerRoot $tmp
ServerName 127.0.0.1
LoadModule mpm_prefork_module $mods/mod_mpm_prefork.so
LoadModule authz_core_module $mods/mod_authz_core.so
$user
Listen 127.0.0.1:$port
PidFile $tmp/run/httpd.pid
DefaultRuntimeDir $tmp/run
ErrorLog $tmp/log/error.log
LogFormat "%P %>s" served
CustomLog $tmp/access.log served
DocumentRoot $tmp/www
<Directory $tmp/www>
    Require all granted
</Directory>
KeepAlive Off
StartServers 32
MinSpareServers 32
MaxSpareServers 64
ServerLimit 64
MaxRequestWorkers 64
MaxConnectionsPerChild $per_child
EOF

# A session of its own: when it stops, Apache signals its whole process
# group, which would otherwise be this test's (and make check's).
setsid env LD_PRELOAD="$lib" SHMPOOL_MODE=children /usr/sbin/apache2 -f "$tmp/httpd.conf" \
    -DFOREGROUND >"$tmp/log/apache.out" 2>"$tmp/log/apache.err" &

server_pids() {
    t_children "$master"
}

listening() {
    curl -s -o /dev/null "http://127.0.0.1:$port/"
}

if ! t_wait_for 10 listening; then
    t_bad "apache did not answer on 127.0.0.1:$port within 10 s"
    t_end
    exit
fi
master=$(cat "$tmp/run/httpd.pid")
t_server "$master" TERM
t_check_mapped "children" $(server_pids)
url=http://127.0.0.1:$port/index.html

lived() {
    awk '{ print $1 }' "$tmp/access.log" | sort -u | wc -l
}

t_wrk_start "$url" $conns "$tmp/warm.out"
sleep 2
t_wrk_stop
t_settle "before the load" $master "$tmp/before.json"

t_wrk_start "$url" $conns "$tmp/wrk.out"
start=$(lived) kills=0 n=$start
# At most 120 s.
for _ in $(seq 240); do
    sleep 0.5
    n=$(lived)
    [ $((n - start)) -lt $children ] || break
    [ $((n - start)) -lt $(( (kills + 1) * kill_every )) ] && continue
    set -- $(server_pids)
    # Between recycled children the master may have none alive for a
    # moment; the kill waits for the next turn.
    [ $# -gt 0 ] || continue
    kill -KILL "$1" 2>/dev/null && kills=$((kills + 1))
done
t_wrk_stop
t_expect "children that served and exited" $((n - start)) -ge $children
t_expect "children killed" $kills -eq $((children / kill_every - 1))
t_check_wrk "$tmp/wrk.out" $kills $conns
t_check_library_log

t_settle "after the load" $master "$tmp/after.json"
t_check_arena "after $((n - start)) recycled children and $kills kills" \
    "$tmp/before.json" "$tmp/after.json" $kills
t_end
