/*
 * setrules: changes collmux's rules at run time with collmux_set_rules
 * (found with dlsym, so the program also runs without collmux) and checks
 * the answers: a good set applies on every rank, a malformed one and one
 * that differs between ranks are refused everywhere, without a hang.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int rank, size, x, y;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int (*set_rules)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "collmux_set_rules");
	if (!set_rules) {
		if (rank == 0)
			printf("setrules: collmux not loaded\n");
		MPI_Finalize();
		return 0;
	}
	MPI_Comm dup;
	MPI_Comm_dup(MPI_COMM_WORLD, &dup); /* used before and after the change */
	x = rank + 1;
	MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, dup);
	int r1 = set_rules("allreduce:host:*:staged");
	MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, dup);
	int ok = y == size * (size + 1) / 2;
	int r2 = set_rules("allreduce:host:*:warp");
	int r3 = set_rules(rank == 0 ? "bcast:host:*:staged" : "bcast:host:*:nccl");
	int r4 = set_rules("allreduce:host:*:nccl:ranks=1-64");
	MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, dup);
	ok = ok && y == size * (size + 1) / 2;
	if (rank == 0)
		printf("setrules: good %d, malformed %d, different %d, shape %d, sums %s\n", r1, r2, r3, r4, ok ? "ok" : "WRONG");
	MPI_Comm_free(&dup);
	MPI_Finalize();
	return 0;
}
