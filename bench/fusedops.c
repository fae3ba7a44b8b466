/*
 * fusedops: the fused GEMV + all-reduce of collmux.h against its unfused
 * forms, in one run on the same GPUs (issue 18). Each rank holds the
 * column slice A_r (M x K/n, bf16) of a row-parallel linear layer and its
 * slice of the input (batch x K/n); every rank wants y = sum_r A_r x_r.
 *   a  cuBLAS GEMM (bf16 out) then ncclAllReduce, one stream
 *   b  cuBLAS GEMM then MPI_Allreduce on the device buffer (collmux's path)
 *   d  collmux_gemv_allreduce, one kernel
 *   gemv, nccl  the two halves of (a) alone; d1: (d) on one rank's
 *      communicator, the fused kernel's computation alone
 * Per shape and contender, the median over ROUNDS rounds of ITERS calls
 * queued back to back, the slowest rank's; each call reads the next of as
 * many copies of A as make 256 MiB (A then misses L2, as a model's
 * layers do). Rank 0 prints CSV:
 *   op,m,k,batch,ranks,contender,us,speedup_vs_a,max_rel_diff_vs_a
 *
 * usage: fusedops [max_m [contenders [name of d]]]   (libcollmux.so preloaded)
 *   contenders: letters of the above (1 for d1), default adb1gn; run it
 *   under COLLMUX_OPS_ALGO=fused and =cublas to see both forms of d
 * build: mpicc -O2 -I$CUDA/include -o fusedops bench/fusedops.c -L$CUDA/lib64 -lcudart -lnccl -ldl -lm
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <mpi.h>
#include <nccl.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "../include/collmux.h"
#include "../tests/gpu/gpu_common.h"
#include "ops_bench.h"

enum { ITERS = 50, ROUNDS = 7 };
static int rank, size;
static ncclComm_t nccl;
static cudaStream_t st;
static int (*gemv_ar)(int, void *, int, int, int, int, const void *, long long, const void *, long long, void *, long long);
static struct {
	int (*create)(void **);
	int (*set_stream)(void *, cudaStream_t);
	int (*gemm)(void *, int, int, int, int, int, const void *, const void *, int, int, const void *, int, int, const void *, void *,
		    int, int, int, int);
} blas;
static void *handle;

static void load(void)
{
	void *b = dlopen("libcublas.so.13", RTLD_NOW);
	if (!b)
		b = dlopen("libcublas.so.12", RTLD_NOW);
	*(void **)&gemv_ar = dlsym(RTLD_DEFAULT, "collmux_gemv_allreduce");
	if (!b || !gemv_ar) {
		fprintf(stderr, "fusedops: needs cuBLAS, and libcollmux.so preloaded\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	*(void **)&blas.create = dlsym(b, "cublasCreate_v2");
	*(void **)&blas.set_stream = dlsym(b, "cublasSetStream_v2");
	*(void **)&blas.gemm = dlsym(b, "cublasGemmEx");
	blas.create(&handle);
}

/* y (batch x m, row-major) = x (batch x k) A^T (A: m x k row-major), bf16, fp32 accumulation */
static void gemm(const void *a, const void *x, void *y, int m, int k, int batch, cudaStream_t s)
{
	enum { OP_N = 0, OP_T = 1, R_16BF = 14, COMPUTE_32F = 68, GEMM_DEFAULT = -1 };
	const float one = 1, zero = 0;
	blas.set_stream(handle, s);
	blas.gemm(handle, OP_T, OP_N, m, batch, k, &one, a, R_16BF, k, x, R_16BF, k, &zero, y, R_16BF, m, COMPUTE_32F, GEMM_DEFAULT);
}

/* copies holds `copies` identical copies of A, one after another; each
 * call takes the next, so that no call finds A in L2 (50 MB on an H200)
 * where a model, whose every layer is read once a step, would not */
typedef struct {
	void *copies, *x, *y;
	int m, k, batch, copies_n;
	unsigned turn;
	const void *a; /* this call's copy */
} prob;

/* one call of contender c */
static void call(char c, const void *v)
{
	prob *p = (prob *)v;
	p->a = (const char *)p->copies + (size_t)(p->turn++ % (unsigned)p->copies_n) * p->m * p->k * 2;
	switch (c) {
	case 'a':
		gemm(p->a, p->x, p->y, p->m, p->k, p->batch, st);
		ncclAllReduce(p->y, p->y, (size_t)p->m * p->batch, ncclBfloat16, ncclSum, nccl, st);
		break;
	case 'b': /* as an MPI program writes it: the legacy stream, then the collective */
		gemm(p->a, p->x, p->y, p->m, p->k, p->batch, 0);
		MPI_Allreduce(MPI_IN_PLACE, p->y, p->m * p->batch, MPI_UINT16_T, MPI_SUM, MPI_COMM_WORLD); /* see below */
		break;
	case 'd':
	case '1': /* a call that fails would time as no time: the job stops instead */
		if (gemv_ar(MPI_Comm_c2f(c == 'd' ? MPI_COMM_WORLD : MPI_COMM_SELF), st, COLLMUX_BFLOAT16, p->m, p->k, p->batch, p->a, p->k, p->x,
			    p->k, p->y, p->m) != 0) {
			fprintf(stderr, "fusedops: collmux_gemv_allreduce failed (the reason above): its time would be no time\n");
			MPI_Abort(MPI_COMM_WORLD, 3);
		}
		break;
	case 'g': gemm(p->a, p->x, p->y, p->m, p->k, p->batch, st); break;
	case 'n': ncclAllReduce(p->y, p->y, (size_t)p->m * p->batch, ncclBfloat16, ncclSum, nccl, st); break;
	}
}

int main(int argc, char **argv)
{
	gpu_mpi_start(&argc, &argv, &rank, &size);
	const int max_m = argc > 1 ? atoi(argv[1]) : 28672;
	const char *cs = argc > 2 ? argv[2] : "adb1gn", *dname = argc > 3 ? argv[3] : "d:collmux";
	load();
	ops_nccl_setup(&nccl, &st);
	if (rank == 0)
		printf("op,m,k,batch,ranks,contender,us,speedup_vs_a,max_rel_diff_vs_a\n");
	const int dims[] = {4096, 8192, 16384, 28672}, batches[] = {1, 4, 16};
	for (size_t di = 0; di < 4 && dims[di] <= max_m; di++)
		for (size_t bi = 0; bi < 3; bi++) {
			prob p = {NULL, NULL, NULL, dims[di], dims[di] / size, batches[bi], 1, 0, NULL};
			const size_t na = (size_t)p.m * p.k, nx = (size_t)p.batch * p.k, ny = (size_t)p.batch * p.m;
			while ((size_t)p.copies_n * na * 2 < (size_t)256 << 20) /* 256 MiB in all */
				p.copies_n++;
			uint16_t *h = malloc(na * 2);
			for (size_t i = 0; i < na; i++) /* small values: the sums stay far from bf16's limits */
				h[i] = (uint16_t)(0x3c00 + ((i * 2654435761u + rank * 40503u) >> 7 & 0x1ff)) ^ (uint16_t)((i & 1) << 15);
			CUDA_OK(cudaMalloc(&p.copies, na * 2 * p.copies_n));
			CUDA_OK(cudaMalloc(&p.x, nx * 2));
			CUDA_OK(cudaMalloc(&p.y, ny * 2));
			for (int i = 0; i < p.copies_n; i++)
				CUDA_OK(cudaMemcpy((char *)p.copies + i * na * 2, h, na * 2, cudaMemcpyHostToDevice));
			CUDA_OK(cudaMemcpy(p.x, h + 7, nx * 2, cudaMemcpyHostToDevice));
			/* correctness of d against a, once */
			uint16_t *ya = malloc(ny * 2), *yd = malloc(ny * 2);
			call('a', &p);
			CUDA_OK(cudaStreamSynchronize(st));
			CUDA_OK(cudaMemcpy(ya, p.y, ny * 2, cudaMemcpyDeviceToHost));
			CUDA_OK(cudaMemset(p.y, 0xff, ny * 2)); /* d's result, not a's left over */
			call('d', &p);
			CUDA_OK(cudaStreamSynchronize(st));
			CUDA_OK(cudaMemcpy(yd, p.y, ny * 2, cudaMemcpyDeviceToHost));
			double diff = 0, scale = 0;
			for (size_t i = 0; i < ny; i++)
				scale = fmax(scale, fabs(gpu_from_bf16(ya[i])));
			for (size_t i = 0; i < ny; i++)
				diff = fmax(diff, fabs(gpu_from_bf16(ya[i]) - gpu_from_bf16(yd[i])) / (scale > 0 ? scale : 1));
			const double ta = ops_median_us(call, 'a', &p, 3, ITERS, ROUNDS); /* every speedup is against it */
			/* b's MPI_Allreduce sums uint16 words, not bf16 values: its
			 * timing is the path's (the bytes and route are those of a bf16
			 * all-reduce; MPI has no bf16 type) and its result is not used */
			for (const char *c = cs; *c; c++) {
				const double us = *c == 'a' ? ta : ops_median_us(call, *c, &p, 3, ITERS, ROUNDS);
				const char *name = *c == 'a' ? "a:cublas+nccl"
						   : *c == 'b' ? "b:cublas+collmux-mpi"
						   : *c == 'd' ? dname
						   : *c == '1' ? "d1:compute-only"
						   : *c == 'g' ? "gemv:cublas-alone"
							       : "nccl:allreduce-alone";
				if (rank == 0)
					printf("gemv_allreduce,%d,%d,%d,%d,%s,%.2f,%.3f,%.2e\n", p.m, p.k * size, p.batch, size, name, us, ta / us,
					       *c == 'd' ? diff : 0.0);
				fflush(stdout);
			}
			cudaFree(p.copies), cudaFree(p.x), cudaFree(p.y);
			free(h), free(ya), free(yd);
		}
	ncclCommDestroy(nccl);
	MPI_Finalize();
	return 0;
}
