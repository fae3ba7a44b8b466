/*
 * moe: a mixture-of-experts layer's expert GEMMs and combine all-to-all,
 * fused and unfused (issue 18's GEMM + All-to-All), in one run on the same
 * GPUs and the same bf16 inputs. Every rank holds EXPERTS experts (k x n
 * weights) and sent `tokens` tokens out at dispatch, spread evenly over
 * every rank's experts, so each expert holds tokens / (EXPERTS x ranks)
 * rows from each rank (the last expert the remainder); the combine returns
 * each token's k -> n product to the rank it came from.
 *   a  cuBLAS, one GEMM per (expert, source) block into a send buffer laid
 *      out by destination, then NCCL's all-to-all(v) (grouped send/recv),
 *      one stream: what Megatron-style MoE layers do
 *   b  the same GEMMs, then MPI_Alltoallv on the device buffers (collmux's
 *      fastest path for it)
 *   d  collmux_gemm_alltoall: each block's GEMM writes straight into the
 *      memory of the rank it goes to (collmux's workspace, copied into out)
 *   e  the same into an out in symmetric memory (collmux_symm_alloc),
 *      which the GEMMs write directly
 *   gemm  the GEMMs of a alone
 * Per contender the median over ROUNDS rounds of ITERS calls, the slowest
 * rank's. Rank 0 prints CSV: op,tokens,k,n,experts,ranks,contender,us,speedup_vs_a
 *
 * usage: moe [tokens [k [n [experts]]]]   (libcollmux.so preloaded; 8192 4096 4096 8)
 * build: mpicc -O2 -I$CUDA/include -o moe bench/moe.c -L$CUDA/lib64 -lcudart -lnccl -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <nccl.h>
#include <stdint.h>
#include <string.h>

#include "../include/collmux.h"
#include "../tests/gpu/gpu_common.h"
#include "ops_bench.h"

enum { ITERS = 10, ROUNDS = 5, MAX_BLOCKS = 64 * 8 };
static int rank, size;
static ncclComm_t nccl;
static cudaStream_t st;
static int (*gemm_a2a)(int, void *, int, int, int, int, const void *, long long, const void *, const long long *, const long long *, void *,
		       long long, long long);
static void *(*symm_alloc)(int, size_t);
/* cuBLAS, as collmux loads it: the unfused contenders' GEMMs */
static ops_gemm_ex_t gemm_ex;
static void *blas;

typedef struct {
	long long tokens, rows[MAX_BLOCKS], dest[MAX_BLOCKS], capacity;
	int k, n, experts;
	void *a, *b, *send, *out, *symm_out;
	int scount[8], sdispl[8]; /* rows to and from each rank (every rank's blocks are alike) */
	MPI_Datatype row_t;       /* one row of the output */
} prob;

/* block (e, p)'s product into the send buffer, laid out by destination */
static void gemms(const prob *p)
{
	const float one = 1, zero = 0;
	long long arow = 0;
	for (int e = 0; e < p->experts; e++)
		for (int q = 0; q < size; q++) {
			const long long r = p->rows[e * size + q];
			/* rank q's rows in its send buffer: expert-major within q's part */
			long long at = p->sdispl[q];
			for (int ee = 0; ee < e; ee++)
				at += p->rows[ee * size + q];
			if (r)
				gemm_ex(blas, OPS_OP_N, OPS_OP_N, p->n, (int)r, p->k, &one, (const char *)p->b + (size_t)e * p->k * p->n * 2,
					OPS_R_16BF, p->n, (const char *)p->a + (size_t)arow * p->k * 2, OPS_R_16BF, p->k, &zero,
					(char *)p->send + (size_t)at * p->n * 2, OPS_R_16BF, p->n, OPS_COMPUTE_32F, OPS_GEMM_DEFAULT);
			arow += r;
		}
}

static void call(char c, const void *v)
{
	const prob *p = v;
	const size_t row = (size_t)p->n * 2;
	switch (c) {
	case 'd':
	case 'e':
		if (gemm_a2a(MPI_Comm_c2f(MPI_COMM_WORLD), st, COLLMUX_BFLOAT16, p->k, p->n, p->experts, p->a, p->k, p->b, p->rows, p->dest,
			     c == 'd' ? p->out : p->symm_out, p->capacity, p->capacity) != 0) {
			fprintf(stderr, "moe: collmux_gemm_alltoall failed (the reason above): its time would be no time\n");
			MPI_Abort(MPI_COMM_WORLD, 3);
		}
		break;
	case 'g':
	case 'a':
	case 'b':
		gemms(p);
		if (c == 'a') {
			ncclGroupStart();
			for (int q = 0; q < size; q++) {
				ncclSend((char *)p->send + (size_t)p->sdispl[q] * row, (size_t)p->scount[q] * p->n, ncclBfloat16, q, nccl, st);
				ncclRecv((char *)p->out + (size_t)p->sdispl[q] * row, (size_t)p->scount[q] * p->n, ncclBfloat16, q, nccl, st);
			}
			ncclGroupEnd();
		} else if (c == 'b') {
			/* MPI_Alltoallv sees device buffers the program wrote on st */
			CUDA_OK(cudaStreamSynchronize(st));
			MPI_Alltoallv(p->send, p->scount, p->sdispl, p->row_t, p->out, p->scount, p->sdispl, p->row_t, MPI_COMM_WORLD);
		}
		break;
	}
}

int main(int argc, char **argv)
{
	*(void **)&gemm_a2a = ops_start(&argc, &argv, &rank, &size, "collmux_gemm_alltoall", &nccl, &st);
	prob p = {.tokens = argc > 1 ? atoll(argv[1]) : 8192};
	p.k = argc > 2 ? atoi(argv[2]) : 4096;
	p.n = argc > 3 ? atoi(argv[3]) : 4096;
	p.experts = argc > 4 ? atoi(argv[4]) : 8;
	if (!(blas = ops_cublas(st, &gemm_ex)) || size > 8 || p.experts < 1 || p.experts * size > MAX_BLOCKS) {
		fprintf(stderr, "moe: needs cuBLAS, at most 8 ranks and 1 to 64 experts a rank\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	MPI_Type_contiguous(p.n * 2, MPI_BYTE, &p.row_t);
	MPI_Type_commit(&p.row_t);
	/* every rank sends tokens / (experts x size) rows to each expert of
	 * each rank (the last expert of each rank the remainder), so every
	 * rank's blocks are alike and so are its counts to and from each rank */
	const long long per = p.tokens / ((long long)p.experts * size), last = p.tokens / size - per * (p.experts - 1);
	for (int e = 0; e < p.experts; e++)
		for (int q = 0; q < size; q++)
			p.rows[e * size + q] = e == p.experts - 1 ? last : per;
	for (int q = 0; q < size; q++) {
		p.scount[q] = (int)(p.tokens / size);
		p.sdispl[q] = q * p.scount[q];
	}
	/* block (e, q) goes back to rank q: holder `rank`'s part of q's out,
	 * expert-major within it */
	for (int e = 0; e < p.experts; e++)
		for (int q = 0; q < size; q++)
			p.dest[e * size + q] = (long long)rank * p.scount[q] + (e ? e * per : 0);
	p.capacity = (long long)p.scount[0] * size;
	const size_t arows = (size_t)p.scount[0] * size;
	CUDA_OK(cudaMalloc(&p.a, arows * p.k * 2));
	CUDA_OK(cudaMalloc(&p.b, (size_t)p.experts * p.k * p.n * 2));
	CUDA_OK(cudaMalloc(&p.send, arows * p.n * 2));
	CUDA_OK(cudaMalloc(&p.out, (size_t)p.capacity * p.n * 2));
	*(void **)&symm_alloc = dlsym(RTLD_DEFAULT, "collmux_symm_alloc");
	if (!symm_alloc || !(p.symm_out = symm_alloc(MPI_Comm_c2f(MPI_COMM_WORLD), (size_t)p.capacity * p.n * 2))) {
		fprintf(stderr, "moe: no symmetric memory (collmux_symm_alloc)\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	/* inputs of small random bf16 values (zeros would flatter the power and clocks) */
	uint16_t *fill = malloc((size_t)p.k * p.n * 2);
	uint64_t x = 0x9E3779B97F4A7C15ull ^ (uint64_t)rank;
	for (size_t i = 0; i < (size_t)p.k * p.n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		fill[i] = (uint16_t)(0x3c00 | (x & 0x7f) | (x >> 8 & 1) << 15); /* +-[2^-7, 2^-6) */
	}
	for (size_t r = 0; r < arows; r += (size_t)p.n) /* a's rows from the same pool */
		CUDA_OK(cudaMemcpy((char *)p.a + r * p.k * 2, fill, (arows - r < (size_t)p.n ? arows - r : (size_t)p.n) * p.k * 2, cudaMemcpyHostToDevice));
	for (int e = 0; e < p.experts; e++)
		CUDA_OK(cudaMemcpy((char *)p.b + (size_t)e * p.k * p.n * 2, fill, (size_t)p.k * p.n * 2, cudaMemcpyHostToDevice));
	free(fill);
	if (rank == 0)
		printf("op,tokens,k,n,experts,ranks,contender,us,speedup_vs_a\n");
	const double ta = ops_median_us(call, 'a', &p, 1, ITERS, ROUNDS);
	for (const char *c = "abdeg"; *c; c++) {
		const double us = *c == 'a' ? ta : ops_median_us(call, *c, &p, 1, ITERS, ROUNDS);
		if (rank == 0)
			printf("gemm_alltoall,%lld,%d,%d,%d,%d,%s,%.1f,%.3f\n", p.tokens, p.k, p.n, p.experts, size,
			       *c == 'a' ? "a:cublas+nccl-alltoallv" : *c == 'b' ? "b:cublas+MPI_Alltoallv(collmux)" : *c == 'd' ? "d:collmux-fused" : *c == 'e' ? "d:collmux-fused-symmetric" : "gemm-alone",
			       us, ta / us);
	}
	MPI_Type_free(&p.row_t);
	ncclCommDestroy(nccl);
	MPI_Finalize();
	return 0;
}
