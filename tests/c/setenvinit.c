/*
 * setenvinit: sets COLLMUX_LOG=info itself before MPI_Init, as an mpi4py
 * script assigning os.environ before it imports MPI does; collmux must
 * read it (tests/report_test.go).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int x = 1, sum = 0;
	setenv("COLLMUX_LOG", "info", 1);
	MPI_Init(&argc, &argv);
	MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	printf("sum=%d\n", sum);
	MPI_Finalize();
	return 0;
}
