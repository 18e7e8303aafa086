#!/usr/bin/env bash
# startup-bench.sh BIN [ROUNDS] times whole 4-rank jobs, interleaving fabrun
# and MPICH's mpiexec.hydra round by round (so machine noise hits both
# alike), and prints the median, min and max wall time of each.
#   BIN: directory holding fabrun and hello (go build -o BIN/ ./cmd/... ./examples/...)
set -euo pipefail
bin=${1:?usage: $0 BIN [ROUNDS]}
rounds=${2:-12}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for _ in $(seq "$rounds"); do
	/usr/bin/time -a -o "$out" -f "fabrun-hello %e" "$bin/fabrun" -n 4 --provider shm "$bin/hello" >/dev/null
	/usr/bin/time -a -o "$out" -f "hydra-hello %e" mpiexec.hydra -launcher fork -n 4 -env WEFT_PROVIDER shm "$bin/hello" >/dev/null
	/usr/bin/time -a -o "$out" -f "fabrun-true %e" "$bin/fabrun" -n 4 true
	/usr/bin/time -a -o "$out" -f "hydra-true %e" mpiexec.hydra -launcher fork -n 4 true
done
sort "$out" | awk '{v[$1]=v[$1]" "$2} END {for (k in v) print k, v[k]}' | while read -r name vals; do
	printf '%-14s %s\n' "$name" "$(echo "$vals" | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "n=%d median %.3f s  min %.3f  max %.3f", NR, m, a[1], a[NR]}')"
done
