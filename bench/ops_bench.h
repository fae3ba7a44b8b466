/*
 * What the fused operations' benchmarks (bench/fusedops.c,
 * bench/embedding.c, bench/moe.c, bench/tp.c) share: the NCCL
 * communicator and stream of the unfused baseline, cuBLAS for its GEMMs,
 * and the clock: how long one call of a contender
 * takes, in µs, as the median of `rounds` rounds of `iters` calls queued
 * back to back on the GPU, each round's time the slowest rank's, after
 * `warm` calls.
 */
#ifndef OPS_BENCH_H
#define OPS_BENCH_H
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <mpi.h>
#include <nccl.h>
#include <time.h>

#include "../tests/gpu/gpu_common.h"

/* NCCL over MPI_COMM_WORLD and a non-blocking stream, after MPI_Init */
static void ops_nccl_setup(ncclComm_t *nccl, cudaStream_t *st)
{
	int rank, size;
	ncclUniqueId id;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (rank == 0)
		ncclGetUniqueId(&id);
	MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
	ncclCommInitRank(nccl, size, id, rank);
	CUDA_OK(cudaStreamCreateWithFlags(st, cudaStreamNonBlocking));
}

/* A benchmark of collmux's operation `name` starts: this rank's GPU
 * picked, MPI up (*rank, *size), NCCL over the world on a non-blocking
 * stream. Returns the operation, or aborts the job when libcollmux.so is
 * not preloaded. */
static void *ops_start(int *argc, char ***argv, int *rank, int *size, const char *name, ncclComm_t *nccl, cudaStream_t *st)
{
	gpu_mpi_start(argc, argv, rank, size);
	void *fn = dlsym(RTLD_DEFAULT, name);
	if (!fn) {
		fprintf(stderr, "%s not found: preload libcollmux.so\n", name);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	ops_nccl_setup(nccl, st);
	return fn;
}

/* cublasGemmEx, and its constants the benchmarks use */
typedef int (*ops_gemm_ex_t)(void *, int, int, int, int, int, const void *, const void *, int, int, const void *, int, int, const void *,
			     void *, int, int, int, int);
enum { OPS_OP_N = 0, OPS_R_32F = 0, OPS_R_16BF = 14, OPS_COMPUTE_32F = 68, OPS_GEMM_DEFAULT = -1 };

/* A cuBLAS handle on st, with collmux's own math mode (split-K sums in
 * fp32: CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION), and its
 * cublasGemmEx; NULL where cuBLAS cannot be loaded. */
static void *ops_cublas(cudaStream_t st, ops_gemm_ex_t *gemm_ex)
{
	void *h = NULL, *blas = NULL;
	for (const char **name = (const char *[]){"libcublas.so.13", "libcublas.so.12", "libcublas.so", NULL}; *name && !h; name++)
		h = dlopen(*name, RTLD_NOW);
	int (*create)(void **) = NULL, (*set_stream)(void *, void *) = NULL, (*set_math)(void *, int) = NULL;
	if (h) {
		*(void **)&create = dlsym(h, "cublasCreate_v2");
		*(void **)&set_stream = dlsym(h, "cublasSetStream_v2");
		*(void **)&set_math = dlsym(h, "cublasSetMathMode");
		*(void **)gemm_ex = dlsym(h, "cublasGemmEx");
	}
	if (!create || !set_stream || !set_math || !*gemm_ex || create(&blas) != 0)
		return NULL;
	set_stream(blas, st);
	set_math(blas, 16);
	return blas;
}

enum { OPS_MAX_ROUNDS = 31 };

static double ops_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* call(c, p) queues one call of contender c on problem p */
static double ops_median_us(void (*call)(char, const void *), char c, const void *p, int warm, int iters, int rounds)
{
	double r[OPS_MAX_ROUNDS];
	if (rounds > OPS_MAX_ROUNDS)
		rounds = OPS_MAX_ROUNDS;
	for (int i = 0; i < warm; i++)
		call(c, p);
	cudaDeviceSynchronize();
	for (int k = 0; k < rounds; k++) {
		MPI_Barrier(MPI_COMM_WORLD);
		const double t0 = ops_now();
		for (int i = 0; i < iters; i++)
			call(c, p);
		cudaDeviceSynchronize();
		r[k] = (ops_now() - t0) / iters * 1e6;
		MPI_Allreduce(MPI_IN_PLACE, &r[k], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	}
	for (int i = 1; i < rounds; i++) /* insertion sort */
		for (int j = i; j > 0 && r[j] < r[j - 1]; j--) {
			const double t = r[j];
			r[j] = r[j - 1], r[j - 1] = t;
		}
	return r[rounds / 2];
}
#endif
