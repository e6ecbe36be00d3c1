#!/bin/sh
# one-cpu.sh COMMAND...: run COMMAND confined to CPU 0 by a cpuset
# (cgroup v1, as this VM mounts it), so that a pinning to CPU 1 fails and
# every thread shares CPU 0.  Root only.
set -e
cs=/sys/fs/cgroup/cpuset/one-cpu
[ -d "$cs" ] || { mkdir "$cs"; echo 0 > "$cs/cpuset.cpus"; echo 0 > "$cs/cpuset.mems"; }
echo $$ > "$cs/tasks"
exec "$@"
