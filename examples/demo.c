/*
 * demo: a plain MPI program (it knows nothing of collmux) making a mix of
 * collectives of different sizes, blocking and nonblocking, and a ring of
 * point-to-point messages. Run it with collmux preloaded and
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
		MPI_Request q[3];
		MPI_Iallreduce(a, b, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q[0]);
		double from = -1, mine = rank;
		MPI_Irecv(&from, 1, MPI_DOUBLE, (rank + size - 1) % size, 7, MPI_COMM_WORLD, &q[1]);
		MPI_Isend(&mine, 1, MPI_DOUBLE, (rank + 1) % size, 7, MPI_COMM_WORLD, &q[2]);
		MPI_Waitall(3, q, MPI_STATUSES_IGNORE);
		if (rank == 0)
			printf("demo: allreduce of %7zu doubles: %g (expect %g); ring message from rank %g\n", n, b[0],
			       size * (size + 1) / 2.0, from);
		free(a), free(b);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Finalize();
	return 0;
}
