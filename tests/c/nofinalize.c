/* nofinalize: a program that ends without MPI_Finalize. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int x = 1, y = 0;
	MPI_Init(&argc, &argv);
	MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	printf("nofinalize: sum %d\n", y);
	return 0;
}
