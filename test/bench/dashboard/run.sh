#!/usr/bin/env bash
# run.sh runs one reproduce command per area, each writing JSON lines (or
# go test -bench output) into OUTDIR, then regenerates the tables of DOC
# from them. Run it from anywhere on an otherwise idle machine; on 2 cores
# the whole run takes about 20 minutes.
#
#   test/bench/dashboard/run.sh [-smoke] OUTDIR [DOC]
#
# DOC defaults to docs/PERFORMANCE.md. -smoke runs every command with
# minimal repetitions to check the pipeline; its figures mean nothing, so
# give it a scratch copy of the page as DOC.
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
smoke=0
if [ "${1:-}" = "-smoke" ]; then smoke=1; shift; fi
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 [-smoke] OUTDIR [DOC]" >&2
	exit 2
fi
out="$1"
doc="${2:-$root/docs/PERFORMANCE.md}"
mkdir -p "$out"
rm -f "$out"/*.json "$out"/*.bench
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
cd "$root"
WEFT_BENCH_COMMIT="$(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo +dirty)"
export WEFT_BENCH_COMMIT
go build -o "$bin/" ./cmd/fabrun ./test/bench/pingpong ./test/bench/endpoint ./test/bench/onesided ./test/bench/onesided/overlap ./test/bench/ddtbench ./test/bench/p2p ./test/bench/ddtpp ./test/bench/osu

if [ $smoke = 1 ]; then
	PPI=200 EPI=100 WIN=2 OSI=200 FII=1000 ROWS=64 LEN=256 DDT_RUNS=1 DDT="-reps 1 -mintime 100us -sizes s" BC="-count 1 -benchtime 100x"
	P2P="-sizes 8,64k -iters 200 -windows 20"
	DDTPP="-sizes s -iters 20 -miniters 5"
	OSU2="-sizes 8,1m -iters 10"
	OSU4="$OSU2"
	OSU4EP="$OSU2"
else
	PPI=100000 EPI=5000 WIN=100 OSI=5000 FII=100000 ROWS=512 LEN=1024 DDT_RUNS=3 DDT="-reps 9" BC="-count 5 -benchtime 20000x"
	P2P=""
	DDTPP=""
	# 2 ranks: 10 000 timed calls per size up to 8 KiB (1000 above): a cell of
	# 1000 calls lasts 0.2 ms, and one preemption moved it by up to 2×.
	# 4 ranks: 50 and 10: with 4 busy-polling ranks on 2 cores a call
	# waits for descheduled peers (milliseconds).
	OSU2="-iters 10000"
	OSU4="-iters 50"
	# 4 handles of one process against Open MPI's 4 processes: calls of a
	# few µs, of which 50 measure mostly the first calls' wake-ups (the
	# 8-byte Allreduce read 3.6 µs at 50 and 1.4 at 1000).
	OSU4EP="-iters 1000"
fi
reps() { if [ $smoke = 1 ]; then echo 1; else echo "$1"; fi; }

# The placement probe (test/bench/p2p/floor: plain stores into 64 KiB that
# another process's core read last; about 9-12 us where the vCPUs share a
# cache, 33-37 where they do not) is read before and after each area, so
# that the page says which regime each area's figures come from (tool
# probe, case and area the area's name, size before or after).
probebin=""
if cc -O2 -o "$bin/floor" test/bench/p2p/floor/floor.c 2>/dev/null; then probebin="$bin/floor"; fi
probe() { # WHEN AREA...
	[ -n "$probebin" ] || return 0
	local when="$1" us
	shift
	us="$("$probebin" shmcopy plain 65536 2000 | awk '$1 == "RESULT" { print $4 }')" || return 0
	[ -n "$us" ] || return 0
	for a in "$@"; do
		printf '{"tool":"probe","area":"%s","case":"%s","size":"%s","metric":"regime","value":%s,"unit":"us","reps":1,"stat":"single"}\n' "$a" "$a" "$when" "$us" >>"$out/regime.json"
	done
}

step() { echo "bench-dashboard: $*" >&2; }

step "fabric: pingpong against fi_pingpong"
probe before fabric
"$bin/pingpong" -provider shm -sizes 8,64,4k,1m -path both -reps "$(reps 9)" -iters $PPI -json >"$out/fabric.json"
probe after fabric

step "endpoint: against raw fabric/, private against shared"
probe before endpoint
# The libfabric path (the targets compare it with raw fabric/); the node
# transport is measured by p2p below.
WEFT_NODE_TRANSPORT=fabric "$bin/fabrun" -n 2 --provider shm "$bin/endpoint" -bench pingpong,rate,depth -sizes 8,64 -goroutines 1,2 \
	-reps "$(reps 5)" -iters $EPI -windows $WIN -json >"$out/endpoint.json"
"$bin/fabrun" -n 1 --provider shm "$bin/endpoint" -bench inproc -goroutines 1,2 \
	-reps "$(reps 7)" -windows $((WIN * 20)) -json >"$out/endpoint-inproc.json"
probe after endpoint

step "onesided: PutSignal against fi_pingpong"
probe before onesided
"$bin/onesided" -tools weft-direct,weft-shm,fi_pingpong -sizes 8 -reps "$(reps 7)" -iters $OSI -fi_iters $FII -json >"$out/onesided.json"
"$bin/overlap" -np 2 -rows $ROWS -len $LEN -work 4 -reps "$(reps 5)" -json >"$out/overlap.json"
probe after onesided

step "p2p: endpoint against fi_pingpong, MPICH and Open MPI"
probe before p2p
# shellcheck disable=SC2086
"$bin/p2p" -fabrun "$bin/fabrun" -weft native,fabric -reps "$(reps 5)" $P2P -json >"$out/p2p.json"
probe after p2p

step "ddtpp: DDTBench layouts as typed messages against hand packing and MPI datatypes"
probe before ddtpp
# shellcheck disable=SC2086
"$bin/ddtpp" -fabrun "$bin/fabrun" -reps "$(reps 5)" $DDTPP -json >"$out/ddtpp.json"
probe after ddtpp

step "collectives: OSU loops against MPICH and Open MPI"
probe before collectives
# shellcheck disable=SC2086
"$bin/osu" -fabrun "$bin/fabrun" -np 2 -reps "$(reps 3)" -timeout 150s $OSU2 -json >"$out/osu.json"
# shellcheck disable=SC2086
"$bin/osu" -fabrun "$bin/fabrun" -np 4 -weft procs -reps "$(reps 3)" -timeout 150s $OSU4 -json >>"$out/osu.json"
# The endpoints of one process run apart, against Open MPI only (MPICH's
# 4 processes take milliseconds a call here); this run's own Open MPI
# records, which repeat the ones above, are left out.
# shellcheck disable=SC2086
"$bin/osu" -fabrun "$bin/fabrun" -np 4 -weft ep -ref openmpi -reps "$(reps 3)" -timeout 150s $OSU4EP -json |
	grep -v '"case":"openmpi-np4-' >>"$out/osu.json"
probe after collectives

step "ddt, jit: ddtbench ($DDT_RUNS runs) and commit time"
probe before ddt jit
for i in $(seq "$DDT_RUNS"); do
	# shellcheck disable=SC2086
	"$bin/ddtbench" -json $DDT -engines manual,interp,copy,jit >"$out/ddt$i.json"
done
# shellcheck disable=SC2086
go test -run '^$' -bench '^BenchmarkCommit$' $BC ./ddt >"$out/ddt-commit.bench"
probe after ddt jit

step "tables of $doc"
go run ./test/bench/dashboard -doc "$doc" "$out"
