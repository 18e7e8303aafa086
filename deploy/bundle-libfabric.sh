#!/usr/bin/env bash
# bundle-libfabric.sh DIR copies this machine's libfabric.so.1 and the
# shared libraries it needs (all but the C library's own) into DIR, so that
# test binaries built here run on a machine that has no libfabric, such as
# a GPU node with only the NVIDIA driver: LD_LIBRARY_PATH=DIR (make
# gpu-check sets it). libfabric loads its providers from there too; shm,
# tcp and the other built-in ones need nothing more.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
dir=$1
# awk reads to the end: exiting at the first match would let ldconfig die
# of SIGPIPE on its longer output, which pipefail turns into a failure.
lib=$(ldconfig -p | awk '$1 == "libfabric.so.1" && !found { print $NF; found = 1 }')
[ -n "$lib" ] || { echo "bundle-libfabric: no libfabric.so.1 here (apt-get install libfabric1)" >&2; exit 1; }
mkdir -p "$dir"
cp -L "$lib" "$dir/libfabric.so.1"
ldd "$lib" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | while read -r name path; do
	case $name in
	libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) ;;
	*) cp -L "$path" "$dir/$name" ;;
	esac
done
echo "bundle-libfabric: $(ls "$dir" | wc -l) libraries in $dir" >&2
