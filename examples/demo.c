/*
 * demo: a plain MPI program (it knows nothing of collmux) making a mix of
 * collectives of different sizes. Run it with collmux preloaded and
 * COLLMUX_STATS=1 to see where each call was dispatched.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int rank, size;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	for (size_t n = 1; n <= (1u << 20); n *= 32) {
		double *a = malloc(n * sizeof *a), *b = malloc(n * size * sizeof *b);
		for (size_t i = 0; i < n; i++)
			a[i] = rank + 1;
		for (int it = 0; it < 10; it++) {
			MPI_Allreduce(a, b, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
			MPI_Bcast(a, (int)n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
			MPI_Allgather(a, (int)n, MPI_DOUBLE, b, (int)n, MPI_DOUBLE, MPI_COMM_WORLD);
		}
		for (size_t i = 0; i < n; i++) /* the bcasts overwrote a */
			a[i] = rank + 1;
		MPI_Allreduce(a, b, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		if (rank == 0)
			printf("demo: allreduce of %7zu doubles: %g (expect %g)\n", n, b[0], size * (size + 1) / 2.0);
		free(a), free(b);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Finalize();
	return 0;
}
