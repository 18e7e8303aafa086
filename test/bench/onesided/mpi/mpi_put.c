/*
 * mpi_put: MPI_Put latency and bandwidth in the manner of OSU's
 * osu_put_latency and osu_put_bw (passive target, MPI_Win_lock_all, one
 * MPI_Win_flush per put for latency, a window of 64 puts per flush for
 * bandwidth), for comparison with weft's onesided package. Two ranks; rank 0
 * puts into rank 1's window allocated with MPI_Win_allocate.
 *
 * Output, from rank 0, one line per measurement:
 *   RESULT put_lat <bytes> <microseconds>
 *   RESULT put_bw <bytes> <MB/s (10^6 bytes)>
 *
 * Usage: mpi_put [sizes...]   (default 8 64 512 4096 32768 262144 1048576)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 64

static int iters_for(long size, int base)
{
	int it = base;
	if (size >= 32768)
		it = base / 10;
	if (size >= 262144)
		it = base / 50;
	return it < 20 ? 20 : it;
}

int main(int argc, char **argv)
{
	long defaults[] = {8, 64, 512, 4096, 32768, 262144, 1048576};
	long sizes[64];
	int nsizes = 0, rank, np;
	long maxsize = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &np);
	if (np != 2) {
		if (rank == 0)
			fprintf(stderr, "mpi_put: needs exactly 2 ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	for (int i = 1; i < argc && nsizes < 64; i++)
		sizes[nsizes++] = atol(argv[i]);
	if (nsizes == 0) {
		nsizes = (int)(sizeof defaults / sizeof defaults[0]);
		memcpy(sizes, defaults, sizeof defaults);
	}
	for (int i = 0; i < nsizes; i++)
		if (sizes[i] > maxsize)
			maxsize = sizes[i];

	char *src = malloc(maxsize);
	memset(src, 'a', maxsize);
	char *base;
	MPI_Win win;
	MPI_Win_allocate(maxsize * WINDOW, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
	MPI_Win_lock_all(0, win);

	for (int s = 0; s < nsizes; s++) {
		long size = sizes[s];
		int iters = iters_for(size, 10000), warm = iters / 10;
		MPI_Barrier(MPI_COMM_WORLD);
		if (rank == 0) {
			double t0 = 0;
			for (int i = 0; i < iters + warm; i++) {
				if (i == warm)
					t0 = MPI_Wtime();
				MPI_Put(src, (int)size, MPI_CHAR, 1, 0, (int)size, MPI_CHAR, win);
				MPI_Win_flush(1, win);
			}
			double t = MPI_Wtime() - t0;
			printf("RESULT put_lat %ld %.4f\n", size, t * 1e6 / iters);
		}
		MPI_Barrier(MPI_COMM_WORLD);
		iters = iters_for(size, 1000);
		warm = iters / 10;
		if (rank == 0) {
			double t0 = 0;
			for (int i = 0; i < iters + warm; i++) {
				if (i == warm)
					t0 = MPI_Wtime();
				for (int j = 0; j < WINDOW; j++)
					MPI_Put(src, (int)size, MPI_CHAR, 1, j * size, (int)size, MPI_CHAR, win);
				MPI_Win_flush(1, win);
			}
			double t = MPI_Wtime() - t0;
			printf("RESULT put_bw %ld %.2f\n", size, (double)size * WINDOW * iters / t / 1e6);
			fflush(stdout);
		}
	}
	MPI_Win_unlock_all(win);
	MPI_Win_free(&win);
	free(src);
	MPI_Finalize();
	return 0;
}
