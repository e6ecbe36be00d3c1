#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# The library as a user gets it: `make install DESTDIR=...` of this build
# tree, then the program of shmpool(3)'s EXAMPLES, compiled against the
# installed <shmpool.h> with the flags `pkg-config --cflags --libs
# shmpool` gives from the installed shmpool.pc, run against the installed
# libshmpool.so.  Its child must attach and allocate in the arena, and the
# master's wait must find its memory given back.  Everything it writes is
# under its own temporary directory (make distcheck runs it on a read-only
# source tree).
#
# Environment (set by make check): MAKE, CC, PKG_CONFIG, INSTALL_LIBDIR,
# INSTALL_INCLUDEDIR, INSTALL_MANDIR, TESTS_BUILDDIR, top_srcdir.
set -u

builddir=$(cd "${TESTS_BUILDDIR:?TESTS_BUILDDIR is not set}/.." && pwd)
srcdir=${top_srcdir:?top_srcdir is not set}
: "${MAKE:?MAKE is not set}" "${CC:?CC is not set}" "${PKG_CONFIG:?PKG_CONFIG is not set}"
libdir=${INSTALL_LIBDIR:?INSTALL_LIBDIR is not set}
includedir=${INSTALL_INCLUDEDIR:?INSTALL_INCLUDEDIR is not set}
mandir=${INSTALL_MANDIR:?INSTALL_MANDIR is not set}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/poold-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/dest
status=0

fail() {
    echo "install: FAIL: $*"
    status=1
}

# The parent make's jobserver and flags are not this one's business.
if ! (unset MAKEFLAGS MFLAGS; $MAKE -C "$builddir" install DESTDIR="$dest") \
        >"$tmp/install.out" 2>&1; then
    echo "install: FAIL: make install DESTDIR=$dest failed:"
    tail -n 20 "$tmp/install.out"
    exit 1
fi

for f in "$includedir/shmpool.h" "$libdir/libshmpool.so" "$libdir/pkgconfig/shmpool.pc" \
         "$mandir/man3/shmpool.3" "$mandir/man7/libshmpool.7"; do
    if [ -f "$dest$f" ]; then
        echo "install: PASS: $f installed"
    else
        fail "$f is not installed"
    fi
done
# The old name collided with other projects' headers in a shared include
# directory.
[ -e "$dest$includedir/pool.h" ] && fail "$includedir/pool.h is installed: the header is shmpool.h"

# Only the installed shmpool.pc, its paths seen inside DESTDIR.
PKG_CONFIG_LIBDIR=$dest$libdir/pkgconfig
PKG_CONFIG_PATH=
PKG_CONFIG_SYSROOT_DIR=$dest
export PKG_CONFIG_LIBDIR PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
if ! flags=$("$PKG_CONFIG" --cflags --libs shmpool 2>"$tmp/pc.err"); then
    fail "pkg-config --cflags --libs shmpool: $(cat "$tmp/pc.err")"
    exit 1
fi
echo "install: PASS: pkg-config --cflags --libs shmpool: $flags"

# The example of shmpool(3), as a reader would copy it from the page.
sed -n '/^\.Sh EXAMPLES/,/^\.Sh/{/^\.Bd -literal/,/^\.Ed/p}' "$srcdir/man/shmpool.3" |
    awk '/^\.Ed/ { exit } !/^\.Bd/' | sed 's/\\e/\\/g; s/\\&//g' >"$tmp/example.c"
if ! grep -q 'pool_attach' "$tmp/example.c"; then
    fail "no program found in the EXAMPLES of man/shmpool.3"
    exit 1
fi
# shellcheck disable=SC2086 # $flags is a list of options
if ! $CC -Wall -Wextra -Werror -o "$tmp/example" "$tmp/example.c" $flags \
        >"$tmp/cc.out" 2>&1; then
    fail "the example does not build against the installed header and shmpool.pc:"
    cat "$tmp/cc.out"
    exit 1
fi
echo "install: PASS: the example of shmpool(3) builds with $CC and pkg-config"

if ! LD_LIBRARY_PATH=$dest$libdir timeout 30 "$tmp/example" >"$tmp/out" 2>"$tmp/err"; then
    fail "the example failed: $(cat "$tmp/out" "$tmp/err" | tr '\n' ' ')"
elif ! grep -qx 'child: slot [0-9]*, a block in the arena' "$tmp/out"; then
    fail "the child did not allocate in the arena: $(tr '\n' ' ' <"$tmp/out")"
elif ! grep -qx 'master: child exited 0; 0 bytes still in use' "$tmp/out"; then
    fail "the master's wait did not give the child's memory back: $(tr '\n' ' ' <"$tmp/out")"
elif [ -s "$tmp/err" ]; then
    fail "the example wrote to stderr: $(tr '\n' ' ' <"$tmp/err")"
else
    echo "install: PASS: $(tr '\n' ';' <"$tmp/out")"
fi
# The library it ran on is the installed one.
if ! LD_LIBRARY_PATH=$dest$libdir ldd "$tmp/example" | grep -q "$dest$libdir/libshmpool.so"; then
    fail "the example did not load $dest$libdir/libshmpool.so: $(LD_LIBRARY_PATH=$dest$libdir ldd "$tmp/example" | tr '\n' ' ')"
fi
exit $status
