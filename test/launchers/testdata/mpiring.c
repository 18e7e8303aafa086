/* mpiring.c: an MPICH program for test/launchers: passes a token around a
 * ring with MPI_Send/MPI_Recv and prints one line per rank. It checks that
 * fabrun's PMI-1 server works for MPICH's own PMI client. With the argument
 * "abort", rank 1 calls MPI_Abort with error code 7 instead. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	int rank, size, token = 0;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc > 1 && strcmp(argv[1], "abort") == 0 && rank == 1)
		MPI_Abort(MPI_COMM_WORLD, 7);
	if (size > 1) {
		if (rank == 0) {
			token = 1;
			MPI_Send(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
			MPI_Recv(&token, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(&token, 1, MPI_INT, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			token++;
			MPI_Send(&token, 1, MPI_INT, (rank + 1) % size, 0, MPI_COMM_WORLD);
		}
	}
	MPI_Barrier(MPI_COMM_WORLD);
	printf("mpi rank %d of %d: token %d\n", rank, size, token);
	MPI_Finalize();
	return 0;
}
