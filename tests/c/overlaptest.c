/*
 * overlaptest: the collmux_overlap info key. A communicator made by
 * MPI_Comm_dup_with_info with the key, then MPI_Comm_set_info turning it
 * off, then ranks that disagree; an all-gather on device buffers after
 * each, checked. What collmux made of the key shows in its decisions log
 * (tests/overlap_test.go); on the GPU machine the calls run on the copy
 * engines (scripts/gpu-test.sh).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../gpu/gpu_common.h"

static int rank, size, failures;

static void allgather(MPI_Comm comm, const char *what)
{
	enum { N = 1000 };
	int *h = malloc(sizeof(int) * N * (size_t)size), *d_in, *d_out;
	cudaMalloc((void **)&d_in, sizeof(int) * N);
	cudaMalloc((void **)&d_out, sizeof(int) * N * (size_t)size);
	for (int i = 0; i < N; i++)
		h[i] = rank * N + i;
	cudaMemcpy(d_in, h, sizeof(int) * N, cudaMemcpyHostToDevice);
	MPI_Allgather(d_in, N, MPI_INT, d_out, N, MPI_INT, comm);
	cudaMemcpy(h, d_out, sizeof(int) * N * (size_t)size, cudaMemcpyDeviceToHost);
	int bad = 0;
	for (int i = 0; i < N * size; i++)
		bad += h[i] != i;
	failures += bad != 0;
	if (rank == 0)
		printf("%s: allgather %s\n", what, bad ? "WRONG" : "ok");
	cudaFree(d_in);
	cudaFree(d_out);
	free(h);
}

static MPI_Info info_of(const char *v)
{
	MPI_Info info;
	MPI_Info_create(&info);
	MPI_Info_set(info, "collmux_overlap", v);
	return info;
}

int main(int argc, char **argv)
{
	gpu_select();
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm comm;
	MPI_Info yes = info_of("true"), no = info_of("false"), mixed = info_of(rank ? "false" : "true");
	MPI_Comm_dup_with_info(MPI_COMM_WORLD, yes, &comm);
	allgather(comm, "dup_with_info collmux_overlap=true");
	MPI_Comm_set_info(comm, no);
	allgather(comm, "set_info collmux_overlap=false");
	MPI_Comm_set_info(comm, mixed);
	allgather(comm, "set_info, ranks disagree");
	MPI_Comm_free(&comm);
	MPI_Info_free(&yes);
	MPI_Info_free(&no);
	MPI_Info_free(&mixed);
	int all = 0;
	MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("overlaptest: %d ranks, %d failures\n", size, all);
	MPI_Finalize();
	return all != 0;
}
