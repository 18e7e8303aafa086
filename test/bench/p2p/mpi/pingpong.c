/*
 * pingpong: the MPI side of test/bench/p2p's ping-pong, measured as OSU's
 * osu_latency measures it (mpibench_pingpong). Two ranks; for each size, a
 * barrier, WARMUP untimed round trips, then ITERS timed ones: rank 0 sends
 * and then receives, rank 1 receives and then sends back, with blocking
 * MPI_Send/MPI_Recv.
 *
 * Output, from rank 0, per size:
 *   RESULT lat <bytes> <half round trip, microseconds>
 *   RESULT bw <bytes> <bytes / half round trip, MB/s (10^6 bytes)>
 *
 * Usage: pingpong ITERS WARMUP SIZE...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpibench.h"

int main(int argc, char **argv)
{
	int rank, np;
	mpibench_start(&argc, &argv, &rank, &np);
	if (np != 2 || argc < 4) {
		if (rank == 0)
			fprintf(stderr, "pingpong: usage: pingpong ITERS WARMUP SIZE... on exactly 2 ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	long iters = mpibench_arg("pingpong", argv[1], "ITERS"), warmup = mpibench_arg("pingpong", argv[2], "WARMUP");
	long maxsize = 0;
	for (int i = 3; i < argc; i++) {
		long s = mpibench_arg("pingpong", argv[i], "SIZE");
		if (s < 0)
			MPI_Abort(MPI_COMM_WORLD, 2);
		if (s > maxsize)
			maxsize = s;
	}
	if (iters < 1 || warmup < 0)
		MPI_Abort(MPI_COMM_WORLD, 2);
	char *sbuf = malloc(maxsize + 1), *rbuf = malloc(maxsize + 1);
	if (sbuf == NULL || rbuf == NULL)
		MPI_Abort(MPI_COMM_WORLD, 1);
	memset(sbuf, 'a', maxsize + 1);
	memset(rbuf, 'b', maxsize + 1);
	int peer = 1 - rank;
	for (int i = 3; i < argc; i++) {
		int size = (int)atol(argv[i]);
		double el = mpibench_pingpong(sbuf, rbuf, sbuf, size, MPI_CHAR, rank, peer, warmup, iters);
		if (size > 0 && rbuf[size - 1] != 'a') {
			fprintf(stderr, "pingpong: rank %d: payload of %d bytes not received\n", rank, size);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		if (rank == 0) {
			double half = el * 1e6 / (2.0 * iters);
			printf("RESULT lat %d %.4f\n", size, half);
			printf("RESULT bw %d %.4f\n", size, size / half);
			fflush(stdout);
		}
	}
	free(sbuf);
	free(rbuf);
	MPI_Finalize();
	return 0;
}
