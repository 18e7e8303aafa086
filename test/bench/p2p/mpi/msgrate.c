/*
 * msgrate: the MPI side of test/bench/p2p's message rate, measured as OSU's
 * osu_mbw_mr measures it. The first half of the ranks send, the second half
 * receive: rank i sends to rank i + np/2. Per window, a sender posts WINDOW
 * MPI_Isend of SIZE bytes and waits for them all, then receives a zero-byte
 * acknowledgement; the receiver posts WINDOW MPI_Irecv into distinct
 * buffers, waits for them all and sends the acknowledgement. WARMUP untimed
 * windows, a barrier, WINDOWS timed windows, a barrier.
 *
 * Output, from rank 0:
 *   RESULT msgrate <bytes> <messages of all pairs per second>
 *
 * Usage: msgrate WINDOW WINDOWS WARMUP SIZE   (an even number of ranks)
 */
#include <stdio.h>
#include <stdlib.h>

#include "mpibench.h"

int main(int argc, char **argv)
{
	int rank, np;
	mpibench_start(&argc, &argv, &rank, &np);
	if (np < 2 || np % 2 != 0 || argc != 5) {
		if (rank == 0)
			fprintf(stderr, "msgrate: usage: msgrate WINDOW WINDOWS WARMUP SIZE on an even number of ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	long window = mpibench_arg("msgrate", argv[1], "WINDOW"), windows = mpibench_arg("msgrate", argv[2], "WINDOWS");
	long warmup = mpibench_arg("msgrate", argv[3], "WARMUP"), size = mpibench_arg("msgrate", argv[4], "SIZE");
	if (window < 1 || windows < 1 || warmup < 0 || size < 0)
		MPI_Abort(MPI_COMM_WORLD, 2);
	int pairs = np / 2, sender = rank < pairs;
	int peer = sender ? rank + pairs : rank - pairs;
	char *buf = calloc(window, size + 1);
	MPI_Request *reqs = malloc(window * sizeof *reqs);
	if (buf == NULL || reqs == NULL)
		MPI_Abort(MPI_COMM_WORLD, 1);
	double start = 0;
	for (long w = 0; w < warmup + windows; w++) {
		if (w == warmup) {
			MPI_Barrier(MPI_COMM_WORLD);
			start = MPI_Wtime();
		}
		if (sender) {
			for (long k = 0; k < window; k++)
				MPI_Isend(buf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, &reqs[k]);
			MPI_Waitall((int)window, reqs, MPI_STATUSES_IGNORE);
			MPI_Recv(NULL, 0, MPI_CHAR, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			for (long k = 0; k < window; k++)
				MPI_Irecv(buf + k * (size + 1), (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, &reqs[k]);
			MPI_Waitall((int)window, reqs, MPI_STATUSES_IGNORE);
			MPI_Send(NULL, 0, MPI_CHAR, peer, 2, MPI_COMM_WORLD);
		}
	}
	MPI_Barrier(MPI_COMM_WORLD);
	double el = MPI_Wtime() - start;
	if (rank == 0) {
		printf("RESULT msgrate %ld %.1f\n", size, (double)pairs * window * windows / el);
		fflush(stdout);
	}
	free(buf);
	free(reqs);
	MPI_Finalize();
	return 0;
}
