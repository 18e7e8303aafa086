/*
 * mpibench.h: what the MPI programs of the side-by-side bench tools
 * (test/bench/p2p, test/bench/ddtpp) share. test/bench/internal/mpijob
 * writes it next to every program it builds (MPI.Build), so that a program
 * takes it in with #include "mpibench.h".
 */
#ifndef MPIBENCH_H
#define MPIBENCH_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* MPIBENCH_WARM is how long, in seconds, a rank keeps its core busy after
 * MPI_Init, as the weft ranks do after joining their job
 * (sidebyside.WarmCore), so that every contender's first timed call runs
 * on a warm core. */
#define MPIBENCH_WARM 0.1

/* mpibench_start initialises MPI, gives this process's rank and the
 * number of ranks, and keeps the core busy for MPIBENCH_WARM seconds. */
static inline void mpibench_start(int *argc, char ***argv, int *rank, int *np)
{
	MPI_Init(argc, argv);
	MPI_Comm_rank(MPI_COMM_WORLD, rank);
	MPI_Comm_size(MPI_COMM_WORLD, np);
	double t0 = MPI_Wtime();
	while (MPI_Wtime() - t0 < MPIBENCH_WARM)
		;
}

/* mpibench_arg reads s, the argument named what, as a non-negative integer;
 * anything else is reported on stderr after the program's name prog and
 * gives -1. */
static inline long mpibench_arg(const char *prog, const char *s, const char *what)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || v < 0) {
		fprintf(stderr, "%s: %s \"%s\": want a non-negative integer\n", prog, what, s);
		return -1;
	}
	return v;
}

/* mpibench_pingpong times round trips between rank and peer as OSU's
 * osu_latency does: a barrier, then warmup untimed and iters timed round
 * trips of count elements of type t with blocking MPI_Send and MPI_Recv
 * (tag 1). Rank 0 sends from sbuf and receives into rbuf; the other rank
 * receives into rbuf and answers from back. It returns the seconds the
 * timed round trips took. */
static inline double mpibench_pingpong(const void *sbuf, void *rbuf, const void *back, int count, MPI_Datatype t,
				       int rank, int peer, long long warmup, long long iters)
{
	double start = 0;
	MPI_Barrier(MPI_COMM_WORLD);
	for (long long k = 0; k < warmup + iters; k++) {
		if (k == warmup)
			start = MPI_Wtime();
		if (rank == 0) {
			MPI_Send(sbuf, count, t, peer, 1, MPI_COMM_WORLD);
			MPI_Recv(rbuf, count, t, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(rbuf, count, t, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(back, count, t, peer, 1, MPI_COMM_WORLD);
		}
	}
	return MPI_Wtime() - start;
}

#endif
