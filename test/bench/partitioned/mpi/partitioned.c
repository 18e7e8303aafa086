/*
 * partitioned: the MPI side of test/bench/partitioned. Two ranks; for each
 * size, a barrier, WARMUP untimed and ITERS timed rounds of
 *
 *   part:  rank 0 starts its MPI_Psend_init request, marks the PARTS
 *          partitions ready one after the other (MPI_Pready) and waits;
 *          rank 1 starts its MPI_Precv_init request and waits; rank 1 then
 *          answers with a zero-byte message;
 *   range: the same with all partitions marked by one MPI_Pready_range;
 *   whole: the same bytes as one MPI_Send / MPI_Recv, then the answer.
 *
 * Output, from rank 0, per size:
 *   RESULT part <bytes> <parts> <microseconds a round>
 *   RESULT range <bytes> <parts> <microseconds a round>
 *   RESULT whole <bytes> 1 <microseconds a round>
 *
 * Usage: partitioned ITERS WARMUP PARTS SIZE... (each SIZE a multiple of
 * PARTS)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpibench.h"

int main(int argc, char **argv)
{
	int rank, np;
	mpibench_start(&argc, &argv, &rank, &np);
	if (np != 2 || argc < 5) {
		if (rank == 0)
			fprintf(stderr, "partitioned: usage: partitioned ITERS WARMUP PARTS SIZE... on exactly 2 ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	long iters = mpibench_arg("partitioned", argv[1], "ITERS");
	long warmup = mpibench_arg("partitioned", argv[2], "WARMUP");
	long parts = mpibench_arg("partitioned", argv[3], "PARTS");
	if (iters < 1 || warmup < 0 || parts < 1)
		MPI_Abort(MPI_COMM_WORLD, 2);
	int peer = 1 - rank;
	for (int a = 4; a < argc; a++) {
		long size = mpibench_arg("partitioned", argv[a], "SIZE");
		if (size < 0 || size % parts != 0)
			MPI_Abort(MPI_COMM_WORLD, 2);
		char *buf = malloc(size + 1);
		if (buf == NULL)
			MPI_Abort(MPI_COMM_WORLD, 1);
		memset(buf, rank == 0 ? 'a' : 'b', size + 1);
		MPI_Request req;
		if (rank == 0)
			MPI_Psend_init(buf, (int)parts, (MPI_Count)(size / parts), MPI_CHAR, peer, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
		else
			MPI_Precv_init(buf, (int)parts, (MPI_Count)(size / parts), MPI_CHAR, peer, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
		double start = 0, took[2];
		for (int mode = 0; mode < 2; mode++) {
			MPI_Barrier(MPI_COMM_WORLD);
			for (long k = 0; k < warmup + iters; k++) {
				if (k == warmup)
					start = MPI_Wtime();
				MPI_Start(&req);
				if (rank == 0) {
					if (mode == 0)
						for (int i = 0; i < parts; i++)
							MPI_Pready(i, req);
					else
						MPI_Pready_range(0, (int)parts - 1, req);
					MPI_Wait(&req, MPI_STATUS_IGNORE);
					MPI_Recv(NULL, 0, MPI_CHAR, peer, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				} else {
					MPI_Wait(&req, MPI_STATUS_IGNORE);
					MPI_Send(NULL, 0, MPI_CHAR, peer, 4, MPI_COMM_WORLD);
				}
			}
			took[mode] = MPI_Wtime() - start;
		}
		MPI_Request_free(&req);
		if (size > 0 && rank == 1 && buf[size - 1] != 'a') {
			fprintf(stderr, "partitioned: %ld bytes not received\n", size);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		MPI_Barrier(MPI_COMM_WORLD);
		for (long k = 0; k < warmup + iters; k++) {
			if (k == warmup)
				start = MPI_Wtime();
			if (rank == 0) {
				MPI_Send(buf, (int)size, MPI_CHAR, peer, 5, MPI_COMM_WORLD);
				MPI_Recv(NULL, 0, MPI_CHAR, peer, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			} else {
				MPI_Recv(buf, (int)size, MPI_CHAR, peer, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				MPI_Send(NULL, 0, MPI_CHAR, peer, 4, MPI_COMM_WORLD);
			}
		}
		double whole = MPI_Wtime() - start;
		if (rank == 0) {
			printf("RESULT part %ld %ld %.4f\n", size, parts, took[0] * 1e6 / iters);
			printf("RESULT range %ld %ld %.4f\n", size, parts, took[1] * 1e6 / iters);
			printf("RESULT whole %ld 1 %.4f\n", size, whole * 1e6 / iters);
			fflush(stdout);
		}
		free(buf);
	}
	MPI_Finalize();
	return 0;
}
