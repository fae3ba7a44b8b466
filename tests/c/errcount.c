/* errcount: how many times the program's error handler runs for a call
 * on a communicator handle MPI does not know (MPICH checks handles). */
#include <mpi.h>
#include <stdio.h>

static int calls;
static void handler(MPI_Comm *comm, int *code, ...) { (void)comm, (void)code; calls++; }

int main(int argc, char **argv)
{
	int x = 1, y = 0, rank;
	MPI_Errhandler eh;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_create_errhandler(handler, &eh);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh);
	MPI_Comm_set_errhandler(MPI_COMM_SELF, eh);
	/* a communicator handle of a kind MPICH knows, never made: an indirect one
	 * (0xc...), whose unallocated block MPICH reports as MPI_ERR_COMM; MPICH
	 * 4.2 asserts (aborts) on a direct one (0x84000123) past its preallocated
	 * communicators instead of calling the handler */
	MPI_Comm bogus = (MPI_Comm)0xc4012345;
	int rc = MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, bogus);
	int cls = -1;
	MPI_Error_class(rc, &cls);
	if (rank == 0)
		printf("errcount: rc class %d, handler ran %d time(s)\n", cls, calls);
	MPI_Finalize();
	return 0;
}
