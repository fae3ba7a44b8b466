/*
 * tp: the two linear layers of tensor parallelism under sequence
 * parallelism (issue 18), each fused and unfused, in one run on the same
 * GPUs and the same bf16 inputs.
 *
 * rs: a row-parallel layer, GEMM + reduce-scatter. Every rank holds its
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
 * ag: a column-parallel layer, all-gather + GEMM. Every rank holds its
 * m / ranks rows of the m x K input and its n / ranks columns of the K x n
 * weight, and gets the m x n / ranks product of the whole input.
 *   a  NCCL's all-gather of the input, then one cuBLAS GEMM, on one stream
 *   b  MPI_Allgather of the device buffers (collmux's fastest path), then
 *      the GEMM
 *   d  collmux_allgather_gemm: the copy engines push each rank's rows to
 *      its peers while cuBLAS computes the rows already there
 * gemm: the GEMM of a alone, in both.
 * d's result is first checked against a's (to 2e-2 of a's largest value).
 * Per contender the median over ROUNDS rounds of ITERS calls, the slowest
 * rank's. Rank 0 prints CSV: op,m,k,n,ranks,contender,us,speedup_vs_a
 * (k and n: the whole K and n).
 *
 * usage: tp [rs|ag [m [K [n]]]]   (libcollmux.so preloaded; rs 8192 28672
 *        8192: a 70B-class MLP's down projection; ag 8192 8192 28672: its
 *        up projection)
 * build: mpicc -O2 -I$CUDA/include -o tp bench/tp.c -L$CUDA/lib64 -lcudart -lnccl -ldl -lm
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
static int (*ag_gemm)(int, void *, int, long long, int, int, const void *, long long, const void *, long long, void *, long long, void *,
		      long long);
static ops_gemm_ex_t gemm_ex;
static void *blas;

typedef struct {
	int ag;      /* all-gather + GEMM; else GEMM + reduce-scatter */
	long long m; /* rs: the rows of every rank's input; ag: of one rank's */
	int k, n;    /* rs: this rank's k columns, the whole n; ag: the whole k, this rank's n */
	void *a, *b, *mid, *out; /* mid: rs's partial (fp32 for b), ag's gathered input */
} prob;

/* row-major c (rows x n) = a (rows x k) b (k x n): column-major b^T a^T */
static int gemm(const prob *p, long long rows, const void *a, void *c, int ctype)
{
	const float one = 1, zero = 0;
	return gemm_ex(blas, OPS_OP_N, OPS_OP_N, p->n, (int)rows, p->k, &one, p->b, OPS_R_16BF, p->n, a, OPS_R_16BF, p->k, &zero, c, ctype,
		       p->n, OPS_COMPUTE_32F, OPS_GEMM_DEFAULT);
}

static void call(char c, const void *v)
{
	const prob *p = v;
	const int f = MPI_Comm_c2f(MPI_COMM_WORLD);
	int rc = 0;
	if (c == 'd') {
		if ((p->ag ? ag_gemm(f, st, COLLMUX_BFLOAT16, p->m, p->n, p->k, p->a, p->k, p->b, p->n, p->out, p->n, NULL, 0)
			   : gemm_rs(f, st, COLLMUX_BFLOAT16, p->m, p->n, p->k, p->a, p->k, p->b, p->n, p->out, p->n)) != 0) {
			fprintf(stderr, "tp: collmux's operation failed (the reason above): its time would be no time\n");
			MPI_Abort(MPI_COMM_WORLD, 3);
		}
		return;
	}
	if (p->ag) {
		const size_t block = (size_t)p->m * (size_t)p->k;
		if (c == 'a')
			rc = ncclAllGather(p->a, p->mid, block, ncclBfloat16, nccl, st);
		else if (c == 'b') {
			CUDA_OK(cudaStreamSynchronize(st)); /* the GEMM before may still read mid */
			rc = MPI_Allgather(p->a, (int)block, MPI_UINT16_T, p->mid, (int)block, MPI_UINT16_T, MPI_COMM_WORLD);
		}
		rc = rc ? rc : gemm(p, p->m * size, p->mid, p->out, OPS_R_16BF);
	} else {
		/* in fp32 for MPI (b), else bf16 */
		rc = gemm(p, p->m, p->a, p->mid, c == 'b' ? OPS_R_32F : OPS_R_16BF);
		const size_t mine = (size_t)(p->m / size) * (size_t)p->n;
		if (!rc && c == 'a') {
			rc = ncclReduceScatter(p->mid, p->out, mine, ncclBfloat16, ncclSum, nccl, st);
		} else if (!rc && c == 'b') {
			CUDA_OK(cudaStreamSynchronize(st)); /* MPI sees device buffers the program wrote on st */
			rc = MPI_Reduce_scatter_block(p->mid, p->out, (int)mine, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		}
	}
	if (rc) {
		fprintf(stderr, "tp: contender %c: cuBLAS, NCCL or MPI failed (%d): its time would be no time\n", c, rc);
		MPI_Abort(MPI_COMM_WORLD, 3);
	}
}

/* d's result against a's, the largest difference relative to a's largest
 * value, every rank's largest (rs: a sums bf16 partials, d fp32 ones) */
static double differ(prob *p)
{
	const size_t outs = p->ag ? (size_t)p->m * size * p->n : (size_t)(p->m / size) * (size_t)p->n;
	uint16_t *ha = malloc(outs * 2), *hd = malloc(outs * 2);
	call('a', p);
	CUDA_OK(cudaStreamSynchronize(st));
	CUDA_OK(cudaMemcpy(ha, p->out, outs * 2, cudaMemcpyDeviceToHost));
	call('d', p);
	CUDA_OK(cudaStreamSynchronize(st));
	CUDA_OK(cudaMemcpy(hd, p->out, outs * 2, cudaMemcpyDeviceToHost));
	double top = 0, diff = 0;
	for (size_t i = 0; i < outs; i++) {
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
	*(void **)&ag_gemm = dlsym(RTLD_DEFAULT, "collmux_allgather_gemm");
	const int ag = argc > 1 && strcmp(argv[1], "ag") == 0;
	const long long m = argc > 2 ? atoll(argv[2]) : 8192, K = argc > 3 ? atoll(argv[3]) : ag ? 8192 : 28672,
			N = argc > 4 ? atoll(argv[4]) : ag ? 28672 : 8192;
	prob p = {.ag = ag, .m = ag ? m / size : m, .k = (int)(ag ? K : K / size), .n = (int)(ag ? N / size : N)};
	if (!(blas = ops_cublas(st, &gemm_ex)) || (argc > 1 && !ag && strcmp(argv[1], "rs") != 0) || (ag && !ag_gemm) || m % size ||
	    K % size || N % size || p.k < 1 || p.n < 1 || m * (ag ? K : N) > INT_MAX) {
		fprintf(stderr, "tp: needs rs or ag, cuBLAS (and collmux_allgather_gemm for ag), m, K and n multiples of the ranks, "
				"and m x (ag: K, rs: n) < 2^31\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	const size_t rows = (size_t)(ag ? m : p.m), outs = ag ? (size_t)m * p.n : (size_t)(m / size) * p.n;
	CUDA_OK(cudaMalloc(&p.a, (size_t)p.m * p.k * 2));
	CUDA_OK(cudaMalloc(&p.b, (size_t)p.k * p.n * 2));
	CUDA_OK(cudaMalloc(&p.mid, rows * (ag ? (size_t)p.k * 2 : (size_t)p.n * 4))); /* rs: b's partial is fp32 */
	CUDA_OK(cudaMalloc(&p.out, outs * (ag ? 2 : 4)));
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
			fprintf(stderr, "tp: collmux's result differs from cuBLAS + NCCL's by %.2e (relative)\n", diff);
		MPI_Abort(MPI_COMM_WORLD, 4);
	}
	if (rank == 0)
		printf("op,m,k,n,ranks,contender,us,speedup_vs_a\n");
	const double ta = ops_median_us(call, 'a', &p, 1, ITERS, ROUNDS);
	for (const char *c = "abdg"; *c; c++) {
		const double us = *c == 'a' ? ta : ops_median_us(call, *c, &p, 1, ITERS, ROUNDS);
		const char *name = *c == 'a' ? (ag ? "a:nccl-allgather+cublas" : "a:cublas+nccl-reducescatter")
				 : *c == 'b' ? (ag ? "b:MPI_Allgather(collmux)+cublas" : "b:cublas+MPI_Reduce_scatter_block(collmux)")
				 : *c == 'd' ? "d:collmux-fused"
					     : "gemm-alone";
		if (rank == 0)
			printf("%s,%lld,%lld,%lld,%d,%s,%.1f,%.3f\n", ag ? "allgather_gemm" : "gemm_reducescatter", m, K, N, size, name, us, ta / us);
	}
	ncclCommDestroy(nccl);
	MPI_Finalize();
	return 0;
}
