/*
 * allreduce_latency: 8-byte MPI_Allreduce latency, the cost collmux must
 * not add to a call that stays on MPI. Prints the median over batches of
 * the mean time per call, in microseconds, from rank 0.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int batches = argc > 1 ? atoi(argv[1]) : 50, per = argc > 2 ? atoi(argv[2]) : 2000, rank;
	double in = 1, out, *t = malloc(sizeof(double) * (size_t)batches);
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	for (int i = 0; i < per; i++) /* warm up */
		MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	for (int b = 0; b < batches; b++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		for (int i = 0; i < per; i++)
			MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		t[b] = (MPI_Wtime() - t0) / per * 1e6;
	}
	qsort(t, (size_t)batches, sizeof *t, cmp);
	if (rank == 0)
		printf("%.4f\n", t[batches / 2]);
	MPI_Finalize();
	free(t);
	return 0;
}
