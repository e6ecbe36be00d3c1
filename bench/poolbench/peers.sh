# SPDX-License-Identifier: BSD-2-Clause
# Sourced by the benchmark scripts: where the peer allocators' shared
# objects are, as their Debian packages install them.

# peer_so NAME: print the path of jemalloc's, tcmalloc's or mimalloc's
# shared object; fail with one line naming the package when it is missing.
peer_so() {
    case $1 in
    jemalloc) pkg=libjemalloc2 so=libjemalloc.so.2 ;;
    tcmalloc) pkg=libtcmalloc-minimal4 so=libtcmalloc_minimal.so.4 ;;
    mimalloc) pkg=libmimalloc2.0 so=libmimalloc.so.2 ;;
    *) echo "${0##*/}: no peer allocator named $1" >&2; return 1 ;;
    esac
    path=$(dpkg -L "$pkg" 2>/dev/null | grep "/$so\$" | head -n 1)
    if [ -z "$path" ]; then
        echo "${0##*/}: $so not found; install the Debian package $pkg" >&2
        return 1
    fi
    echo "$path"
}
