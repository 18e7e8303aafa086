/*
 * halo.c: the MPI side of test/bench/halo. NP ranks on a PY×PX grid
 * (MPI_Dims_create, MPI_Cart_create, not periodic) exchange the four edges
 * of an N×N block of doubles with one ghost layer by MPI_Neighbor_alltoallw:
 * rows as N contiguous doubles, columns as an MPI_Type_vector, in place.
 *
 *	halo N:ITERS,...
 *
 * For each size it checks one exchange (every ghost cell holds the
 * neighbour's edge, or 0 past the grid's border), then times ITERS
 * exchanges after ITERS/10 untimed ones; rank 0 prints
 * "RESULT mpi N SECONDS" (the slowest rank's seconds per exchange), and
 * "CHECK ok" at the end.
 */
#include <string.h>
#include "mpibench.h"

static double cell(int rank, int y, int x) { return (double)rank * 1000000 + y * 1000 + x; }

static int check(const double *a, int n, const int *nb, int rank)
{
	int w = n + 2;
	for (int i = 1; i <= n; i++) {
		int c[4][5] = {{0, 0, i, n, i}, {1, n + 1, i, 1, i}, {2, i, 0, i, n}, {3, i, n + 1, i, 1}};
		for (int k = 0; k < 4; k++) {
			double want = nb[c[k][0]] == MPI_PROC_NULL ? 0 : cell(nb[c[k][0]], c[k][3], c[k][4]);
			double got = a[c[k][1] * w + c[k][2]];
			if (got != want) {
				fprintf(stderr, "rank %d: N=%d: ghost cell (%d, %d) = %g, want %g\n", rank, n, c[k][1], c[k][2], got, want);
				return 0;
			}
		}
	}
	return 1;
}

int main(int argc, char **argv)
{
	int rank, np;
	mpibench_start(&argc, &argv, &rank, &np);
	if (argc != 2) {
		if (rank == 0)
			fprintf(stderr, "usage: halo N:ITERS,...\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	int dims[2] = {0, 0}, periods[2] = {0, 0};
	MPI_Dims_create(np, 2, dims);
	MPI_Comm cart;
	MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
	int me, nb[4];
	MPI_Comm_rank(cart, &me);
	MPI_Cart_shift(cart, 0, 1, &nb[0], &nb[1]);
	MPI_Cart_shift(cart, 1, 1, &nb[2], &nb[3]);
	char *spec = strdup(argv[1]);
	for (char *tok = strtok(spec, ","); tok; tok = strtok(NULL, ",")) {
		char *colon = strchr(tok, ':');
		if (!colon) {
			fprintf(stderr, "halo: bad size %s\n", tok);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		*colon = '\0';
		long n = mpibench_arg("halo", tok, "N"), iters = mpibench_arg("halo", colon + 1, "ITERS");
		if (n < 1 || iters < 1)
			MPI_Abort(MPI_COMM_WORLD, 2);
		int w = (int)n + 2;
		double *a = calloc((size_t)w * w, sizeof(double));
		for (int y = 1; y <= n; y++)
			for (int x = 1; x <= n; x++)
				a[y * w + x] = cell(me, y, x);
		MPI_Datatype row, col;
		MPI_Type_contiguous((int)n, MPI_DOUBLE, &row);
		MPI_Type_vector((int)n, 1, w, MPI_DOUBLE, &col);
		MPI_Type_commit(&row);
		MPI_Type_commit(&col);
		MPI_Datatype types[4] = {row, row, col, col};
		int counts[4] = {1, 1, 1, 1};
		MPI_Aint sd[4] = {8 * (w + 1), 8 * ((MPI_Aint)n * w + 1), 8 * (w + 1), 8 * (w + n)};
		MPI_Aint rd[4] = {8 * 1, 8 * ((MPI_Aint)(n + 1) * w + 1), 8 * w, 8 * (w + n + 1)};
		MPI_Neighbor_alltoallw(a, counts, sd, types, a, counts, rd, types, cart);
		int ok = check(a, (int)n, nb, me), all;
		MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, cart);
		if (!all)
			MPI_Abort(MPI_COMM_WORLD, 1);
		long warm = iters / 10 > 0 ? iters / 10 : 1;
		for (long k = 0; k < warm; k++)
			MPI_Neighbor_alltoallw(a, counts, sd, types, a, counts, rd, types, cart);
		MPI_Barrier(cart);
		double t0 = MPI_Wtime();
		for (long k = 0; k < iters; k++)
			MPI_Neighbor_alltoallw(a, counts, sd, types, a, counts, rd, types, cart);
		double t = (MPI_Wtime() - t0) / (double)iters, worst;
		MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, cart);
		if (me == 0)
			printf("RESULT mpi %ld %.9g\n", n, worst);
		MPI_Type_free(&row);
		MPI_Type_free(&col);
		free(a);
	}
	free(spec);
	if (me == 0)
		printf("CHECK ok\n");
	MPI_Comm_free(&cart);
	MPI_Finalize();
	return 0;
}
