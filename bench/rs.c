/*
 * rs: a row-parallel linear layer under sequence parallelism, its GEMM and
 * reduce-scatter fused and unfused (issue 18's GEMM + reduce-scatter), in
 * one run on the same GPUs and the same bf16 inputs. Every rank holds its
 * K / ranks columns of the m x K input and the matching rows of the K x n
 * weight, and gets its m / ranks rows of the product.
 *   a  cuBLAS: the rank's m x n partial (bf16), then NCCL's reduce-scatter
 *      on the same stream: what Megatron-style layers do
 *   b  the same GEMM into fp32, then MPI_Reduce_scatter_block of MPI_FLOAT
 *      on the device buffers (collmux's fastest path for it; MPI has no
 *      bfloat16 every MPI knows)
 *   d  collmux_gemm_reducescatter: each block's GEMM writes its fp32
 *      partial straight into the memory of the rank that owns the block,
 *      which sums what it got
 *   gemm  the GEMM of a alone
 * d's result is first checked against a's (to 2e-2 of a's largest value).
 * Per contender the median over ROUNDS rounds of ITERS calls, the slowest
 * rank's. Rank 0 prints CSV: op,m,k,n,ranks,contender,us,speedup_vs_a
 * (k: the whole K).
 *
 * usage: rs [m [K [n]]]   (libcollmux.so preloaded; 8192 28672 8192: a
 *        70B-class MLP's down projection)
 * build: mpicc -O2 -I$CUDA/include -o rs bench/rs.c -L$CUDA/lib64 -lcudart -lnccl -ldl -lm
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <nccl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../include/collmux.h"
#include "../tests/gpu/gpu_common.h"
#include "ops_bench.h"

enum { ITERS = 10, ROUNDS = 5 };
static int rank, size;
static ncclComm_t nccl;
static cudaStream_t st;
static int (*gemm_rs)(int, void *, int, long long, int, int, const void *, long long, const void *, long long, void *, long long);
static ops_gemm_ex_t gemm_ex;
static void *blas;

typedef struct {
	long long m;
	int k, n; /* k: this rank's columns */
	void *a, *b, *partial, *out;
} prob;

static void call(char c, const void *v)
{
	const prob *p = v;
	const float one = 1, zero = 0;
	if (c == 'd') {
		if (gemm_rs(MPI_Comm_c2f(MPI_COMM_WORLD), st, COLLMUX_BFLOAT16, p->m, p->n, p->k, p->a, p->k, p->b, p->n, p->out, p->n) != 0) {
			fprintf(stderr, "rs: collmux_gemm_reducescatter failed (the reason above): its time would be no time\n");
			MPI_Abort(MPI_COMM_WORLD, 3);
		}
		return;
	}
	/* row-major partial (m x n) = a (m x k) b (k x n): column-major b^T a^T;
	 * in fp32 for MPI (b), else bf16 */
	int rc = gemm_ex(blas, OPS_OP_N, OPS_OP_N, p->n, (int)p->m, p->k, &one, p->b, OPS_R_16BF, p->n, p->a, OPS_R_16BF, p->k, &zero,
			 p->partial, c == 'b' ? OPS_R_32F : OPS_R_16BF, p->n, OPS_COMPUTE_32F, OPS_GEMM_DEFAULT);
	const size_t mine = (size_t)(p->m / size) * (size_t)p->n;
	if (!rc && c == 'a') {
		rc = ncclReduceScatter(p->partial, p->out, mine, ncclBfloat16, ncclSum, nccl, st);
	} else if (!rc && c == 'b') {
		CUDA_OK(cudaStreamSynchronize(st)); /* MPI sees device buffers the program wrote on st */
		rc = MPI_Reduce_scatter_block(p->partial, p->out, (int)mine, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	}
	if (rc) {
		fprintf(stderr, "rs: contender %c: cuBLAS, NCCL or MPI failed (%d): its time would be no time\n", c, rc);
		MPI_Abort(MPI_COMM_WORLD, 3);
	}
}

/* d's result against a's, the largest difference relative to a's largest
 * value, every rank's largest (a sums bf16 partials, d fp32 ones) */
static double differ(prob *p)
{
	const size_t mine = (size_t)(p->m / size) * (size_t)p->n;
	uint16_t *ha = malloc(mine * 2), *hd = malloc(mine * 2);
	call('a', p);
	CUDA_OK(cudaStreamSynchronize(st));
	CUDA_OK(cudaMemcpy(ha, p->out, mine * 2, cudaMemcpyDeviceToHost));
	call('d', p);
	CUDA_OK(cudaStreamSynchronize(st));
	CUDA_OK(cudaMemcpy(hd, p->out, mine * 2, cudaMemcpyDeviceToHost));
	double top = 0, diff = 0;
	for (size_t i = 0; i < mine; i++) {
		const double x = gpu_from_bf16(ha[i]), y = gpu_from_bf16(hd[i]);
		top = fabs(x) > top ? fabs(x) : top;
		diff = fabs(x - y) > diff ? fabs(x - y) : diff;
	}
	free(ha), free(hd);
	double r = top > 0 ? diff / top : diff;
	MPI_Allreduce(MPI_IN_PLACE, &r, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return r;
}

int main(int argc, char **argv)
{
	*(void **)&gemm_rs = ops_start(&argc, &argv, &rank, &size, "collmux_gemm_reducescatter", &nccl, &st);
	const long long K = argc > 2 ? atoll(argv[2]) : 28672;
	prob p = {.m = argc > 1 ? atoll(argv[1]) : 8192, .n = argc > 3 ? atoi(argv[3]) : 8192};
	p.k = (int)(K / size);
	if (!(blas = ops_cublas(st, &gemm_ex)) || p.m % size || K % size || p.k < 1 || p.n < 1 || p.m / size * p.n > INT_MAX) {
		fprintf(stderr, "rs: needs cuBLAS, m and K multiples of the ranks, and m / ranks x n < 2^31\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	CUDA_OK(cudaMalloc(&p.a, (size_t)p.m * p.k * 2));
	CUDA_OK(cudaMalloc(&p.b, (size_t)p.k * p.n * 2));
	CUDA_OK(cudaMalloc(&p.partial, (size_t)p.m * p.n * 4)); /* b's partial is fp32 */
	CUDA_OK(cudaMalloc(&p.out, (size_t)(p.m / size) * p.n * 4));
	/* inputs of small random bf16 values (zeros would flatter the power and clocks) */
	const size_t most = (size_t)(p.m > p.n ? p.m : p.n) * p.k;
	uint16_t *fill = malloc(most * 2);
	uint64_t x = 0x9E3779B97F4A7C15ull ^ (uint64_t)rank;
	for (size_t i = 0; i < most; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		fill[i] = (uint16_t)(0x3c00 | (x & 0x7f) | (x >> 8 & 1) << 15); /* +-[2^-7, 2^-6) */
	}
	CUDA_OK(cudaMemcpy(p.a, fill, (size_t)p.m * p.k * 2, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(p.b, fill, (size_t)p.k * p.n * 2, cudaMemcpyHostToDevice));
	free(fill);
	const double diff = differ(&p);
	if (diff > 2e-2) {
		if (rank == 0)
			fprintf(stderr, "rs: collmux's result differs from cuBLAS + NCCL's by %.2e (relative)\n", diff);
		MPI_Abort(MPI_COMM_WORLD, 4);
	}
	if (rank == 0)
		printf("op,m,k,n,ranks,contender,us,speedup_vs_a\n");
	const double ta = ops_median_us(call, 'a', &p, 1, ITERS, ROUNDS);
	for (const char *c = "abdg"; *c; c++) {
		const double us = *c == 'a' ? ta : ops_median_us(call, *c, &p, 1, ITERS, ROUNDS);
		if (rank == 0)
			printf("gemm_reducescatter,%lld,%lld,%d,%d,%s,%.1f,%.3f\n", p.m, K, p.n, size,
			       *c == 'a' ? "a:cublas+nccl-reducescatter" : *c == 'b' ? "b:cublas+MPI_Reduce_scatter_block(collmux)" : *c == 'd' ? "d:collmux-fused" : "gemm-alone",
			       us, ta / us);
	}
	ncclCommDestroy(nccl);
	MPI_Finalize();
	return 0;
}
