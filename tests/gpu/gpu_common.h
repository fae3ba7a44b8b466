/* gpu_common.h: what the GPU test and benchmark programs share. */
#ifndef GPU_COMMON_H
#define GPU_COMMON_H
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

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
	return dev;
}

#define CUDA_OK(x)                                                                            \
	do {                                                                                  \
		cudaError_t e_ = (x);                                                         \
		if (e_ != cudaSuccess) {                                                      \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
			exit(3);                                                              \
		}                                                                             \
	} while (0)
#endif
