#!/usr/bin/env bash
# inproc.sh builds c/inproc.c and runs it next to fabric's in-process Go
# ping-pong benchmarks, so the cost that Go adds per message shows side by
# side: C single-threaded, C with an idle second thread (atomic glibc locks,
# as in any Go process), Go batch (one PostAndRead per message) and Go plain
# (TInject, poll, TRecv). Needs gcc and libfabric-dev.
#
#   test/bench/pingpong/inproc.sh [rounds]    (default 3)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
gcc -O2 -o "$out/inproc" "$here/c/inproc.c" -lfabric -lpthread
(cd "$root" && go test -c -o "$out/fabric.test" ./fabric/)
for ((r = 0; r < ${1:-3}; r++)); do
	timeout 60 "$out/inproc" 200000 | tail -1
	timeout 60 "$out/inproc" -t 200000 | tail -1
	timeout 120 "$out/fabric.test" -test.run '^$' -test.bench 'BatchPingPong8|TaggedPingPong8' -test.benchtime 300ms | grep '^Benchmark'
done
