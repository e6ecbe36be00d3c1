#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Shells and scripting runtimes on libshmpool.so in children mode: bash
# command substitutions, pipelines and subshells nested three deep, and
# Python's subprocess and multiprocessing (fork start method), each run
# with and without the library, must print byte for byte the same (stdout,
# stderr and exit status).  In children mode every process a preloaded one
# forks is attached to the shared arena, and every child of an attached
# process must see its parent's heap as a private copy, as fork gives it:
# a shell's subshell is exactly that.  The system python3 is used
# throughout (a pyenv shim on PATH would add processes of its own), except
# in the case that runs Python through a bash wrapper like such a shim.
set -eu
. "$(dirname "$0")/lib.sh"

t_init shells 180
python=/usr/bin/python3
t_need python3 $python

# one_line FILE: the start of FILE, on one line, for a FAIL message.
one_line() {
    head -c 300 "$1" | tr '\n' ' '
}

# compare NAME: the bash script on stdin, on glibc and on the pool.  120 s
# each at most, a guard against a hang and not a timing: on a quiet machine
# every case takes well under a second on glibc, but 400 forked Pythons on
# two cores shared with other builds took over 30.
compare() {
    name=$1
    cat >"$tmp/case.sh"
    rc0=0 rc1=0
    timeout 120 bash "$tmp/case.sh" >"$tmp/glibc.out" 2>"$tmp/glibc.err" || rc0=$?
    timeout 120 env LD_PRELOAD="$lib" SHMPOOL_MODE=children bash "$tmp/case.sh" \
        >"$tmp/pool.out" 2>"$tmp/pool.err" || rc1=$?
    if [ ! -s "$tmp/glibc.out" ] || [ $rc0 -ne 0 ]; then
        t_bad "$name: the case itself is broken: status $rc0 and $(wc -c <"$tmp/glibc.out") bytes on glibc"
    elif [ $rc1 -ne $rc0 ]; then
        t_bad "$name: exit status $rc1 with the library, $rc0 without; stderr: $(one_line "$tmp/pool.err")"
    elif ! cmp -s "$tmp/glibc.out" "$tmp/pool.out"; then
        t_bad "$name: stdout differs: $(diff "$tmp/glibc.out" "$tmp/pool.out" >"$tmp/diff" || one_line "$tmp/diff")"
    elif ! cmp -s "$tmp/glibc.err" "$tmp/pool.err"; then
        t_bad "$name: stderr differs: $(diff "$tmp/glibc.err" "$tmp/pool.err" >"$tmp/diff" || one_line "$tmp/diff")"
    else
        t_ok "$name: $(wc -c <"$tmp/pool.out") bytes identical"
    fi
}

# ---------------------------------------------------------------------------
# bash
# ---------------------------------------------------------------------------
compare "bash: substitution in a substitution (issue 13, verbatim)" <<'EOF'
x=$( y=$(echo 1); echo in ); echo "[$x]"
EOF

compare "bash: pipeline in a substitution (issue 13, verbatim)" <<'EOF'
z=$(echo a; echo b | cat); echo "[$z]"
EOF

compare "bash: substitutions three deep" <<'EOF'
a=$( b=$( c=$( echo deep; echo "$(seq 3 | tr '\n' ,)" ); echo "$c mid" ); echo "$b top" )
echo "[$a]"
EOF

compare "bash: subshells and pipelines three deep" <<'EOF'
( echo l1; ( echo l2; ( echo l3 | tr a-z A-Z; seq 1 5 | sort -r ) | cat ) | sed 's/^/  /' ) | cat -n
f() { local s=; while read -r l; do s="$s$l;"; done; echo "$s"; }
seq 1 50 | f
echo "$(seq 1 20 | f | ( read -r v; echo "${#v}" ))"
diff <(seq 1 100) <(seq 1 100 | sort -n) && echo same
EOF

# A subshell (attached) builds a heap of its own, then its children change
# it: the subshell must keep its own values.
compare "bash: an attached subshell's heap, changed by its children" <<'EOF'
(
    big=()
    for i in $(seq 1 300); do big+=("v$i-$(printf '%0300d' "$i")"); done
    x=$( big[7]=changed; echo "${big[7]:0:7} ${#big[@]}" )
    echo "child saw: $x"
    echo "subshell keeps: ${big[7]:0:7} ${#big[@]}"
    y=$( ( big[8]=deeper; unset 'big[9]'; echo "${big[8]} ${#big[@]}" ) | cat )
    echo "$y; subshell keeps: ${big[8]:0:3} ${#big[@]}"
    declare -A m
    for i in $(seq 1 200); do m[k$i]=$(printf '%0100d' "$i"); done
    echo "$( ( for k in "${!m[@]}"; do m[$k]=x; done; echo "${#m[@]} ${m[k5]}" ) ) / ${m[k5]:0:5}"
)
EOF

# ---------------------------------------------------------------------------
# Python
# ---------------------------------------------------------------------------
cat >"$tmp/subproc.py" <<'EOF'
import hashlib, subprocess, sys
print(subprocess.run(["/bin/echo", "hello"], capture_output=True, text=True).stdout.strip())
print(subprocess.check_output("seq 1 1000 | sort -r | head -n 3", shell=True, text=True), end="")
data = bytes(range(256)) * 4096
p = subprocess.run(["cat"], input=data, capture_output=True)
print(len(p.stdout), hashlib.sha256(p.stdout).hexdigest())
inner = "import subprocess; print(subprocess.check_output(['sh', '-c', 'echo $((6*7))'], text=True).strip())"
print(subprocess.check_output([sys.executable, "-c", inner], text=True).strip())
procs = [subprocess.Popen(["sh", "-c", "echo %d" % i], stdout=subprocess.PIPE, text=True)
         for i in range(20)]
print(",".join(p.communicate()[0].strip() for p in procs))
EOF

# The parent's table is private (it is the preloaded process); the pool's
# workers and the Process are attached, and they fork in turn: forker's
# child changes a dict that its attached parent built, and the nested Pool
# runs in children of an attached process.  Strings over 512 bytes, since
# CPython takes smaller objects from arenas it maps itself, not malloc.
cat >"$tmp/mp.py" <<'EOF'
import hashlib, multiprocessing as mp, os
table = {i: "x%d" % i * (60 + i % 50) for i in range(5000)}

def work(n):
    s = "".join(table[k] for k in range(n, n + 500))
    table[n] = "changed"
    return hashlib.sha256(s.encode()).hexdigest()[:16]

def forker(q):
    d = {i: "v%d-" % i * 200 for i in range(3000)}
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        for i in range(0, 3000, 7):
            d[i] = "child"
        d.update({-i: "new" * 300 for i in range(1, 500)})
        os.write(w, str(sum(map(len, d.values()))).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    q.put("forked child: %s, parent: %d" % (os.read(r, 100).decode(), sum(map(len, d.values()))))

def nested(q):
    with mp.Pool(2) as p:
        q.put(p.map(work, range(100, 140, 10)))

if __name__ == "__main__":
    mp.set_start_method("fork")
    with mp.Pool(3) as p:
        print(p.map(work, range(0, 300, 10)))
    print(table[10][:6], len(table))
    for target in (forker, nested):
        q = mp.Queue()
        proc = mp.Process(target=target, args=(q,))
        proc.start()
        print(q.get())
        proc.join()
        print(target.__name__, "exit", proc.exitcode)
EOF

compare "python3: subprocess" <<EOF
$python $tmp/subproc.py
EOF

compare "python3: multiprocessing, fork start method" <<EOF
$python $tmp/mp.py
EOF

# Like a pyenv shim: a bash script that runs command substitutions, then
# execs the interpreter; started from a subshell and a substitution.
cat >"$tmp/python3" <<EOF
#!/bin/bash
set -e
program="\${0##*/}"
here="\$(cd "\$(dirname "\$0")" && pwd)"
version="\$(echo "\$program" | tr -d a-z)"
exec $python "\$@"
EOF
chmod +x "$tmp/python3"
compare "python3 through a bash wrapper that execs it, in a subshell" <<EOF
( "$tmp/python3" "$tmp/subproc.py" )
out=\$( ( "$tmp/python3" "$tmp/mp.py" ) | cat )
echo "\$out"
EOF

# 400 short-lived children, each leaving 2.5 MB it never frees (os._exit):
# an exited child's memory must come back, or a 256 MiB arena fills up.
compare "python3: 400 children each leaving 2.5 MB, 256 MiB arena" <<EOF
export SHMPOOL_HEAP_SIZE=256M
$python -c '
import os
for i in range(400):
    pid = os.fork()
    if pid == 0:
        keep = [b"%d" % i * 1000 for _ in range(2500)]
        os._exit(0)
    os.waitpid(pid, 0)
print("400 children done")
'
EOF

t_end
