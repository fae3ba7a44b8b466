/*
 * freedsends: device sends whose requests the program frees at once
 * (MPI_Isend, then MPI_Request_free), each acknowledged by a host message
 * back, as MPI allows, and no completion call ever made on them. collmux
 * finishes such a send itself; if it waited for a completion call that
 * never comes, each would keep its pinned staging buffer. Rank 0 prints
 * how many pinned allocations the CUDA stand-in (tests/fakecuda) counts
 * as live after the sends; rank 1 checks every message. Two ranks, built
 * with -DCOLLTEST_CUDA against the stand-in (on real CUDA: no counter).
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>

#include "../gpu/gpu_common.h"
#include "testlib.h"

#define SENDS 200
#define N 1000

int main(int argc, char **argv)
{
	int total = 0;
	gpu_select();
	test_init(&argc, &argv, 0, 0);
	if (size != 2) {
		if (rank == 0)
			printf("freedsends: skipped: needs 2 ranks\n");
		MPI_Finalize();
		return 0;
	}
	int host[N], *dev;
	CUDA_OK(cudaMalloc((void **)&dev, sizeof host));
	for (int s = 0; s < SENDS; s++) {
		int ack = s;
		if (rank == 0) {
			MPI_Request r;
			for (int i = 0; i < N; i++)
				host[i] = s * N + i;
			CUDA_OK(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice));
			MPI_Isend(dev, N, MPI_INT, 1, s, MPI_COMM_WORLD, &r);
			MPI_Request_free(&r);
			MPI_Recv(&ack, 1, MPI_INT, 1, s, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(dev, N, MPI_INT, 0, s, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			CUDA_OK(cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost));
			int bad = 0;
			for (int i = 0; i < N; i++)
				bad += host[i] != s * N + i;
			CHECK(bad == 0, "send %d: %d wrong elements", s, bad);
			MPI_Send(&ack, 1, MPI_INT, 0, s, MPI_COMM_WORLD);
		}
	}
	long (*live)(void) = (long (*)(void))dlsym(RTLD_DEFAULT, "fakecuda_pinned_live");
	if (rank == 0)
		printf("freedsends: %d sends freed at once, pinned allocations live after them: %ld\n", SENDS, live ? live() : -1);
	MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("freedsends: %d ranks, %d failures\n", size, total);
	CUDA_OK(cudaFree(dev));
	MPI_Finalize();
	return 0;
}
