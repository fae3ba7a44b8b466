/* gpu_common.h: what the GPU test and benchmark programs share. */
#ifndef GPU_COMMON_H
#define GPU_COMMON_H
#include <cuda_runtime.h>
#include <execinfo.h>
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* GPU_TEST_BACKTRACE=1: print a backtrace on SIGSEGV (the Go runtime in
 * libcollmux owns that signal, so MPI prints none); debugging only. */
static void gpu_on_crash(int sig)
{
	void *pc[64];
	int n = backtrace(pc, 64);
	fprintf(stderr, "signal %d, backtrace:\n", sig);
	backtrace_symbols_fd(pc, n, 2);
	_exit(128 + sig);
}

/* Picks this rank's GPU (local rank modulo GPU count) before MPI starts. */
static inline int gpu_select(void)
{
	const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
	int nd = 1;
	if (!lr)
		lr = getenv("MPI_LOCALRANKID");
	cudaGetDeviceCount(&nd);
	int dev = (lr ? atoi(lr) : 0) % (nd > 0 ? nd : 1);
	cudaSetDevice(dev);
	if (getenv("GPU_TEST_BACKTRACE"))
		signal(SIGSEGV, gpu_on_crash);
	return dev;
}

/* A GPU program's start: this rank's GPU picked, then MPI up, with the
 * rank and size of MPI_COMM_WORLD. */
static inline void gpu_mpi_start(int *argc, char ***argv, int *rank, int *size)
{
	gpu_select();
	MPI_Init(argc, argv);
	MPI_Comm_rank(MPI_COMM_WORLD, rank);
	MPI_Comm_size(MPI_COMM_WORLD, size);
}

/* Whether two ranks of comm share a GPU (MPS: scripts/gpu-test.sh MPS=1),
 * where NCCL refuses the communicator. Collective. */
static inline int gpu_shared(MPI_Comm comm)
{
	char bus[32] = "", *all;
	int dev = 0, n, shared = 0;
	MPI_Comm_size(comm, &n);
	cudaGetDevice(&dev);
	cudaDeviceGetPCIBusId(bus, sizeof bus, dev);
	if (!(all = calloc((size_t)n, sizeof bus)))
		MPI_Abort(comm, 3);
	MPI_Allgather(bus, sizeof bus, MPI_CHAR, all, sizeof bus, MPI_CHAR, comm);
	for (int p = 0; p < n; p++)
		for (int q = 0; q < p; q++)
			shared |= strcmp(all + p * sizeof bus, all + q * sizeof bus) == 0;
	free(all);
	return shared;
}

#define CUDA_OK(x)                                                                            \
	do {                                                                                  \
		cudaError_t e_ = (x);                                                         \
		if (e_ != cudaSuccess) {                                                      \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
			exit(3);                                                              \
		}                                                                             \
	} while (0)

/* a bfloat16 (its bits) as a float: the upper half of the float's bits */
static inline float gpu_from_bf16(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}
#endif
