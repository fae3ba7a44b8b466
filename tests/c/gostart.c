/*
 * gostart.c: how many threads the process has before MPI_Init and after
 * it, and a collective's sum, one line a rank (tests/heap_test.go):
 * collmux's Go runtime starts only once the MPI has initialised
 * (internal/cmx/gostart.c).
 */
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>

static int threads(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	int before = threads(), rank, x = 1, sum = 0;
	MPI_Init(&argc, &argv);
	int after = threads();
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	printf("rank %d: before %d after %d sum %d\n", rank, before, after, sum);
	MPI_Finalize();
	return 0;
}
