/* Reads lines "size rank ndims order g... dist... darg... p..." (dist:
 * 1 block, 2 cyclic, 3 none; darg -1 the default; order 0 C, 1 Fortran)
 * and answers each with MPICH's MPI_Type_create_darray of MPI_INT:
 * "lb extent n i0 i1 ..." where i are the global indices of the elements
 * the type selects, in its order. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
	int size, rank, nd, order;
	MPI_Init(&argc, &argv);
	while (scanf("%d %d %d %d", &size, &rank, &nd, &order) == 4) {
		int g[8], dist[8], darg[8], p[8], total = 1;
		for (int i = 0; i < nd; i++) { scanf("%d", &g[i]); total *= g[i]; }
		for (int i = 0; i < nd; i++) {
			scanf("%d", &dist[i]);
			dist[i] = dist[i] == 1 ? MPI_DISTRIBUTE_BLOCK : dist[i] == 2 ? MPI_DISTRIBUTE_CYCLIC : MPI_DISTRIBUTE_NONE;
		}
		for (int i = 0; i < nd; i++) {
			scanf("%d", &darg[i]);
			if (darg[i] < 0) darg[i] = MPI_DISTRIBUTE_DFLT_DARG;
		}
		for (int i = 0; i < nd; i++) scanf("%d", &p[i]);
		MPI_Datatype t;
		MPI_Type_create_darray(size, rank, nd, g, dist, darg, p, order ? MPI_ORDER_FORTRAN : MPI_ORDER_C, MPI_INT, &t);
		MPI_Type_commit(&t);
		MPI_Aint lb, extent;
		int tsize, pos = 0;
		MPI_Type_get_extent(t, &lb, &extent);
		MPI_Type_size(t, &tsize);
		int *global = malloc(sizeof(int) * total), *packed = malloc(tsize + 4);
		for (int i = 0; i < total; i++) global[i] = i;
		MPI_Pack(global, 1, t, packed, tsize + 4, &pos, MPI_COMM_SELF);
		printf("%ld %ld %d", (long)lb, (long)extent, tsize / 4);
		for (int i = 0; i < tsize / 4; i++) printf(" %d", packed[i]);
		printf("\n");
		fflush(stdout);
		free(global);
		free(packed);
		MPI_Type_free(&t);
	}
	MPI_Finalize();
	return 0;
}
