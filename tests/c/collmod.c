/*
 * collmod: a shared module linked against libmpi, as a Python extension
 * is. dlhost loads it with RTLD_LOCAL, so libmpi is invisible to global
 * symbol lookup; collmux must still find and forward to it.
 */
#include <mpi.h>
#include <stdio.h>

int collmod_run(void)
{
	int rank, size, x, sum = 0, root_val;
	MPI_Init(NULL, NULL);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	x = rank + 1;
	MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	root_val = rank == 0 ? 42 : 0;
	MPI_Bcast(&root_val, 1, MPI_INT, 0, MPI_COMM_WORLD);
	int ok = sum == size * (size + 1) / 2 && root_val == 42;
	if (rank == 0)
		printf("collmod: sum=%d bcast=%d %s\n", sum, root_val, ok ? "ok" : "WRONG");
	MPI_Finalize();
	return ok ? 0 : 1;
}
