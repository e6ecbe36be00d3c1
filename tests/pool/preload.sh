#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Programs nobody here wrote, run on libshmpool.so through LD_PRELOAD: each
# must print exactly what it prints on glibc malloc.  A probe asks the loaded
# library (pool_attached, pool_owns on a fresh malloc) so that the test fails
# if the preload silently changed nothing; bad settings must cost one line on
# stderr and nothing else; tests/prefork checks SHMPOOL_MODE=children.
#
# Environment (set by make check): SHMPOOL_LIB, TESTS_BUILDDIR, top_srcdir.
set -u

lib=${SHMPOOL_LIB:?SHMPOOL_LIB is not set}
builddir=${TESTS_BUILDDIR:?TESTS_BUILDDIR is not set}
srcdir=${top_srcdir:?top_srcdir is not set}
limit=120

if [ ! -f "$lib" ]; then
    echo "preload: $lib is missing (make builds it)" >&2
    exit 1
fi
for tool in python3 git sort awk timeout; do
    if ! command -v "$tool" >/dev/null; then
        echo "preload: $tool not found (scripts/deps-debian.sh installs it)" >&2
        exit 1
    fi
done

# The interpreter itself: a wrapper script (pyenv's shims) would run a dozen
# processes, each with its own arena and its own warnings.
python=$(python3 -c 'import sys; print(sys.executable)')

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0

fail() {
    echo "preload: FAIL: $*" >&2
    status=1
}

# same_output NAME COMMAND...: run COMMAND on glibc and on the pool
# (SHMPOOL_MODE=process) and compare exit status, stdout and stderr.
same_output() {
    name=$1
    shift
    timeout $limit "$@" >"$tmp/glibc.out" 2>"$tmp/glibc.err"
    rc_glibc=$?
    timeout $limit env LD_PRELOAD="$lib" SHMPOOL_MODE=process "$@" \
        >"$tmp/pool.out" 2>"$tmp/pool.err"
    rc_pool=$?
    if [ $rc_glibc -ne $rc_pool ]; then
        fail "$name: exit status $rc_pool on the pool, $rc_glibc on glibc"
        sed 's/^/  pool stderr: /' "$tmp/pool.err" | head -n 5 >&2
    elif ! cmp -s "$tmp/glibc.out" "$tmp/pool.out"; then
        fail "$name: stdout differs from glibc's"
        diff "$tmp/glibc.out" "$tmp/pool.out" | head -n 10 >&2
    elif ! cmp -s "$tmp/glibc.err" "$tmp/pool.err"; then
        fail "$name: stderr differs from glibc's"
        diff "$tmp/glibc.err" "$tmp/pool.err" | head -n 10 >&2
    elif [ ! -s "$tmp/glibc.out" ]; then
        fail "$name: printed nothing, so the comparison proves nothing"
    else
        echo "preload: ok: $name ($(wc -c <"$tmp/pool.out") bytes identical)"
    fi
}

# expect NAME EXPECTED_STDOUT STDERR_LINES STDERR_WORD COMMAND...: run
# COMMAND, compare stdout, count stderr lines and look for a word in them.
expect() {
    name=$1 want=$2 lines=$3 word=$4
    shift 4
    timeout $limit "$@" >"$tmp/e.out" 2>"$tmp/e.err"
    rc=$?
    got=$(cat "$tmp/e.out")
    n=$(wc -l <"$tmp/e.err")
    if [ $rc -ne 0 ]; then
        fail "$name: exit status $rc"
        head -n 5 "$tmp/e.err" >&2
    elif [ "$got" != "$want" ]; then
        fail "$name: printed '$got', expected '$want'"
        head -n 5 "$tmp/e.err" >&2
    elif [ "$n" -ne "$lines" ]; then
        fail "$name: $n lines on stderr, expected $lines"
        head -n 5 "$tmp/e.err" >&2
    elif [ -n "$word" ] && ! grep -q -- "$word" "$tmp/e.err"; then
        fail "$name: stderr does not name $word: $(cat "$tmp/e.err")"
    else
        echo "preload: ok: $name"
    fi
}

# ---------------------------------------------------------------------------
# Is the pool really there?  The probe mallocs through libc and asks the
# library; without the preload the symbols are missing and it says "absent".
# A forked child reports too: in process mode it must be detached, in
# children mode attached.
# ---------------------------------------------------------------------------
cat >"$tmp/probe.py" <<'EOF'
import ctypes, os, sys
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
def state():
    try:
        attached, owns = libc.pool_attached, libc.pool_owns
    except AttributeError:
        return "absent"
    attached.restype = owns.restype = ctypes.c_bool
    owns.argtypes = [ctypes.c_void_p]
    p = libc.malloc(1000)
    s = "attached=%d owns=%d" % (attached(), owns(p))
    libc.free(p)
    return s
parent = state()
if sys.argv[1:] == ["parent"]:
    print("parent %s" % parent)
    sys.exit(0)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(w, state().encode())
    os._exit(0)
os.close(w)
child = os.read(r, 100).decode()
os.waitpid(pid, 0)
print("parent %s, child %s" % (parent, child))
EOF
probe="$python $tmp/probe.py"

expect "probe without the preload" "parent absent, child absent" 0 "" $probe
expect "probe, SHMPOOL_MODE unset" \
    "parent attached=0 owns=0, child attached=0 owns=0" 0 "" \
    env LD_PRELOAD="$lib" $probe
expect "probe, SHMPOOL_MODE=process" \
    "parent attached=1 owns=1, child attached=0 owns=0" 0 "" \
    env LD_PRELOAD="$lib" SHMPOOL_MODE=process $probe
expect "probe, SHMPOOL_MODE=children" \
    "parent attached=0 owns=0, child attached=1 owns=1" 0 "" \
    env LD_PRELOAD="$lib" SHMPOOL_MODE=children $probe
expect "probe, SHMPOOL_MODE=process SHMPOOL_HEAP_SIZE=64M" \
    "parent attached=1 owns=1, child attached=0 owns=0" 0 "" \
    env LD_PRELOAD="$lib" SHMPOOL_MODE=process SHMPOOL_HEAP_SIZE=64M $probe

# Bad settings: one line naming the variable, then the program runs privately.
for mode in bogus PROCESS process2; do
    expect "SHMPOOL_MODE=$mode" "parent attached=0 owns=0" 1 SHMPOOL_MODE \
        env LD_PRELOAD="$lib" SHMPOOL_MODE=$mode $probe parent
done
for size in 12x abc -1 12Q 99999999999999999999999G; do
    expect "SHMPOOL_HEAP_SIZE=$size" "parent attached=0 owns=0" 1 SHMPOOL_HEAP_SIZE \
        env LD_PRELOAD="$lib" SHMPOOL_MODE=process SHMPOOL_HEAP_SIZE=$size $probe parent
done
# Well-formed but too small for an arena: still one line, still private.
for size in 0 1K; do
    expect "SHMPOOL_HEAP_SIZE=$size" "parent attached=0 owns=0" 1 "" \
        env LD_PRELOAD="$lib" SHMPOOL_MODE=process SHMPOOL_HEAP_SIZE=$size $probe parent
done

# ---------------------------------------------------------------------------
# Ordinary programs
# ---------------------------------------------------------------------------
cat >"$tmp/work.py" <<'EOF'
import hashlib, json, random
random.seed(7)
d = {}
for i in range(150000):
    d["key-%d" % i] = [i, str(i) * (i % 9), {"n": i, "s": "x" * (i % 300)}]
for i in range(0, 150000, 3):
    del d["key-%d" % i]
blobs = [bytearray(n) for n in range(1, 600000, 4999)]
for b in blobs:
    b[-1] = len(b) % 251
text = json.dumps(sorted(d.items(), key=lambda kv: kv[0][::-1])[:40000])
words = sorted(set(text.split('"')))
h = hashlib.sha256(text.encode())
h.update(bytes(b[-1] for b in blobs))
print(len(d), len(words), len(blobs), h.hexdigest())
EOF
same_output "python3 workload" "$python" "$tmp/work.py"

awk 'BEGIN {
    srand(42)
    for (i = 0; i < 150000; i++)
        printf "%09d %s line-%d\n", int(rand() * 1000000000),
            substr("abcdefghijklmnopqrstuvwxyz", i % 26 + 1, 1 + i % 20), i
}' >"$tmp/big.txt"
same_output "sort ($(wc -c <"$tmp/big.txt") bytes)" env LC_ALL=C sort "$tmp/big.txt"
same_output "sort -k2,2 -k1,1nr" env LC_ALL=C sort -k2,2 -k1,1nr "$tmp/big.txt"

# git on this tree; a distribution tarball has no history, so then on a
# repository made from its sources.  A fixed revision keeps both runs equal
# while others commit.
export GIT_CONFIG_NOSYSTEM=1 HOME="$tmp" GIT_PAGER=cat
# (An unpacked tarball may sit inside some other checkout, as under make
# distcheck from one: only a work tree whose top is this source tree counts.)
repo=$srcdir
top=$(git -C "$repo" rev-parse --show-toplevel 2>/dev/null || true)
if [ "$top" != "$(cd "$repo" && pwd -P)" ] ||
   ! git -C "$repo" rev-parse -q --verify HEAD >/dev/null 2>&1; then
    repo=$tmp/repo
    mkdir "$repo"
    # The sources only: make distcheck builds inside the unpacked tree.
    for part in configure.ac Makefile.am shm src tests bench man; do
        cp -R "$srcdir/$part" "$repo"/
    done
    chmod -R u+w "$repo"    # make distcheck's source tree is read-only
    git -C "$repo" init -q
    git -C "$repo" add -A
    if ! GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@localhost \
         GIT_AUTHOR_DATE=2000-01-01T00:00:00Z GIT_COMMITTER_NAME=t \
         GIT_COMMITTER_EMAIL=t@localhost GIT_COMMITTER_DATE=2000-01-01T00:00:00Z \
         git -C "$repo" commit -q -m tree; then
        echo "preload: cannot make a git repository from $srcdir" >&2
        exit 1
    fi
fi
rev=$(git -C "$repo" rev-parse HEAD)
same_output "git log --oneline | wc -l" sh -c "git -C '$repo' log --oneline $rev | wc -l"
same_output "git ls-tree -r" git -C "$repo" ls-tree -r "$rev"
same_output "git log -p --stat" git -C "$repo" log -p --stat "$rev"

# ---------------------------------------------------------------------------
# A prefork master and four children
# ---------------------------------------------------------------------------
if timeout $limit env LD_PRELOAD="$lib" SHMPOOL_MODE=children "$builddir/prefork" \
        >"$tmp/prefork.out" 2>"$tmp/prefork.err"; then
    echo "preload: ok: $(cat "$tmp/prefork.out")"
else
    fail "prefork under SHMPOOL_MODE=children"
    cat "$tmp/prefork.err" >&2
fi
if timeout $limit "$builddir/prefork" >/dev/null 2>&1; then
    fail "prefork passed without the library preloaded"
fi

exit $status
