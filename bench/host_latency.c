/*
 * host_latency: the latency of an 8-byte call on host memory, the cost
 * collmux must not add to a call that stays on MPI. Prints the median over
 * batches of the mean time per call, in microseconds, from rank 0.
 *   usage: host_latency [allreduce|iallreduce|pingpong] [batches] [per batch]
 * allreduce: MPI_Allreduce; iallreduce: MPI_Iallreduce then MPI_Wait (the
 * completion call collmux intercepts); pingpong: half a round trip of
 * MPI_Send/MPI_Recv between ranks 0 and 1.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int rank;
static double in = 1, out;

static void one(const char *mode)
{
	if (strcmp(mode, "iallreduce") == 0) {
		MPI_Request q;
		MPI_Iallreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q);
		MPI_Wait(&q, MPI_STATUS_IGNORE);
	} else if (strcmp(mode, "pingpong") == 0) {
		if (rank == 0) {
			MPI_Send(&in, 1, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD);
			MPI_Recv(&out, 1, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else if (rank == 1) {
			MPI_Recv(&out, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(&in, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD);
		}
	} else {
		MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	}
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "allreduce";
	int batches = argc > 2 ? atoi(argv[2]) : 50, per = argc > 3 ? atoi(argv[3]) : 2000;
	double *t = malloc(sizeof(double) * (size_t)batches), half = strcmp(mode, "pingpong") == 0 ? 2 : 1;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	for (int i = 0; i < per; i++) /* warm up */
		one(mode);
	for (int b = 0; b < batches; b++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		for (int i = 0; i < per; i++)
			one(mode);
		t[b] = (MPI_Wtime() - t0) / per / half * 1e6;
	}
	qsort(t, (size_t)batches, sizeof *t, cmp);
	if (rank == 0)
		printf("%.4f\n", t[batches / 2]);
	MPI_Finalize();
	free(t);
	return 0;
}
