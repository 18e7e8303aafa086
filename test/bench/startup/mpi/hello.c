/* The reference job of the start-up benchmark: MPI start-up and shut-down
 * with nothing in between but one line of output. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
	int rank, size;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	printf("rank %d of %d: hello\n", rank, size);
	MPI_Finalize();
	return 0;
}
