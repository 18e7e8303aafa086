#!/bin/sh
# bench.sh BINDIR [ROUNDS]: run inside node 1 of a two-node test cluster
# (test/cluster/tcrun, which sets TC_SSH). Each round runs hybridbench as
# one-node jobs (2 ranks on the node transport, 2 ranks on libfabric shm,
# 4 ranks on the node transport) and as the hybrid job (2 ranks on each of
# n1 and n2, tcp;ofi_rxm between the nodes). Take the median of each
# line's value over the rounds.
set -e
B=${1:?usage: bench.sh BINDIR [ROUNDS]}
for i in $(seq "${2:-3}"); do
	"$B/fabrun" -n 2 --timeout 60s --env WEFT_BENCH_LABEL=one-node "$B/hybridbench"
	"$B/fabrun" -n 2 --timeout 60s --provider shm --env WEFT_NODE_TRANSPORT=fabric --env WEFT_BENCH_LABEL=one-node-shm "$B/hybridbench"
	"$B/fabrun" -n 4 --timeout 60s --env WEFT_BENCH_LABEL=one-node-x4 "$B/hybridbench"
	"$B/fabrun" --ssh "$TC_SSH" --hosts n1:2,n2:2 -n 4 --timeout 90s --env 'WEFT_PROVIDER=tcp;ofi_rxm' \
		--env WEFT_BENCH_LABEL=hybrid "$B/hybridbench"
done
