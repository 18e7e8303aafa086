/*
 * osu: the MPI side of test/bench/osu, the collective latency loops of the
 * OSU micro-benchmarks (osu_barrier, osu_bcast, osu_reduce, osu_allreduce,
 * osu_allgather, osu_alltoall; and their nonblocking forms, osu_ibarrier
 * ... osu_ialltoall, each call started and waited for with MPI_Wait, no
 * computation between). For each collective and size: SKIP
 * untimed and ITERS timed calls, each timed alone with MPI_Wtime and
 * followed by an untimed MPI_Barrier (the barriers run back to back); a
 * rank's latency is its mean, the figure the mean over
 * the ranks (OSU's "Avg Latency"). Reductions are MPI_SUM of MPI_FLOAT
 * (size/4 elements, as OSU); Bcast and Reduce are rooted at rank 0
 * (at the last rank as bcast:last, reduce:last, ibcast:last, ireduce:last);
 * Allgather and Alltoall move SIZE bytes per rank and block. Sizes above
 * 8 KiB run ITERS/10 calls (at least 10), as OSU's large-message counts.
 *
 * Output, from rank 0, per collective and size (0 for barrier):
 *   RESULT <collective> <bytes> <avg latency, microseconds>
 *
 * Usage: osu ITERS COLLECTIVE,... SIZE...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpibench.h"

/* nodata: the barriers, which move no data (one size, 0) and are not
 * followed by a barrier. */
static int nodata(const char *coll)
{
	return strcmp(coll, "barrier") == 0 || strcmp(coll, "ibarrier") == 0;
}

static double loop(const char *name, char *sbuf, char *rbuf, int size, int np, long iters, long skip)
{
	int count = size / 4;
	/* "bcast:last" and the like: rooted at the last rank instead of 0 */
	char coll[32];
	snprintf(coll, sizeof coll, "%s", name);
	int root = 0;
	char *suffix = strstr(coll, ":last");
	if (suffix != NULL) {
		*suffix = '\0';
		root = np - 1;
	}
	double total = 0;
	/* OSU_TOUCH (osu -touch): write the send buffer before each call */
	const char *touchenv = getenv("OSU_TOUCH");
	int touch = touchenv != NULL && touchenv[0] != 0;
	for (long i = 0; i < skip + iters; i++) {
		if (touch && !nodata(coll)) {
			size_t n = strcmp(coll, "alltoall") == 0 || strcmp(coll, "ialltoall") == 0 ? (size_t)size * np : (size_t)size;
			memset(sbuf, 1 + (int)(i & 1), n);
			MPI_Barrier(MPI_COMM_WORLD);
		}
		double t0 = MPI_Wtime();
		if (strcmp(coll, "barrier") == 0)
			MPI_Barrier(MPI_COMM_WORLD);
		else if (strcmp(coll, "bcast") == 0)
			MPI_Bcast(sbuf, size, MPI_CHAR, root, MPI_COMM_WORLD);
		else if (strcmp(coll, "reduce") == 0)
			MPI_Reduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, root, MPI_COMM_WORLD);
		else if (strcmp(coll, "allreduce") == 0)
			MPI_Allreduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		else if (strcmp(coll, "allgather") == 0)
			MPI_Allgather(sbuf, size, MPI_CHAR, rbuf, size, MPI_CHAR, MPI_COMM_WORLD);
		else if (strcmp(coll, "alltoall") == 0)
			MPI_Alltoall(sbuf, size, MPI_CHAR, rbuf, size, MPI_CHAR, MPI_COMM_WORLD);
		else {
			MPI_Request req;
			if (strcmp(coll, "ibarrier") == 0)
				MPI_Ibarrier(MPI_COMM_WORLD, &req);
			else if (strcmp(coll, "ibcast") == 0)
				MPI_Ibcast(sbuf, size, MPI_CHAR, root, MPI_COMM_WORLD, &req);
			else if (strcmp(coll, "ireduce") == 0)
				MPI_Ireduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, root, MPI_COMM_WORLD, &req);
			else if (strcmp(coll, "iallreduce") == 0)
				MPI_Iallreduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
			else if (strcmp(coll, "iallgather") == 0)
				MPI_Iallgather(sbuf, size, MPI_CHAR, rbuf, size, MPI_CHAR, MPI_COMM_WORLD, &req);
			else
				MPI_Ialltoall(sbuf, size, MPI_CHAR, rbuf, size, MPI_CHAR, MPI_COMM_WORLD, &req);
			MPI_Wait(&req, MPI_STATUS_IGNORE);
		}
		double el = MPI_Wtime() - t0;
		if (i >= skip)
			total += el;
		if (!nodata(coll))
			MPI_Barrier(MPI_COMM_WORLD);
	}
	return total * 1e6 / iters;
}

int main(int argc, char **argv)
{
	int rank, np;
	mpibench_start(&argc, &argv, &rank, &np);
	if (argc < 4) {
		if (rank == 0)
			fprintf(stderr, "osu: usage: osu ITERS COLLECTIVE,... SIZE...\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	long iters = mpibench_arg("osu", argv[1], "ITERS");
	if (iters < 1)
		MPI_Abort(MPI_COMM_WORLD, 2);
	long maxsize = 4;
	for (int i = 3; i < argc; i++) {
		long s = mpibench_arg("osu", argv[i], "SIZE");
		if (s < 0)
			MPI_Abort(MPI_COMM_WORLD, 2);
		if (s > maxsize)
			maxsize = s;
	}
	char *sbuf = malloc(maxsize * np), *rbuf = malloc(maxsize * np);
	if (sbuf == NULL || rbuf == NULL)
		MPI_Abort(MPI_COMM_WORLD, 1);
	memset(sbuf, 0, maxsize * np);
	memset(rbuf, 0, maxsize * np);
	char *colls = strdup(argv[2]);
	for (char *coll = strtok(colls, ","); coll != NULL; coll = strtok(NULL, ",")) {
		const char *known[] = {"barrier", "bcast", "reduce", "allreduce", "allgather", "alltoall",
				       "ibarrier", "ibcast", "ireduce", "iallreduce", "iallgather", "ialltoall"};
		int ok = 0;
		for (int k = 0; k < 12; k++)
			ok |= strcmp(coll, known[k]) == 0;
		const char *rooted[] = {"bcast:last", "reduce:last", "ibcast:last", "ireduce:last"};
		for (int k = 0; k < 4; k++)
			ok |= strcmp(coll, rooted[k]) == 0;
		if (!ok) {
			if (rank == 0)
				fprintf(stderr, "osu: unknown collective %s\n", coll);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		for (int i = 3; i < argc; i++) {
			int size = (int)atol(argv[i]);
			if (nodata(coll)) {
				if (i > 3)
					break;
				size = 0;
			}
			long n = iters;
			if (size > 8192)
				n = iters / 10 > 10 ? iters / 10 : 10;
			long skip = n / 10 > 2 ? n / 10 : 2;
			double mine = loop(coll, sbuf, rbuf, size, np, n, skip), sum = 0;
			MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
			if (rank == 0) {
				printf("RESULT %s %d %.4f\n", coll, size, sum / np);
				fflush(stdout);
			}
		}
	}
	free(colls);
	free(sbuf);
	free(rbuf);
	MPI_Finalize();
	return 0;
}
