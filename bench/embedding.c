/*
 * embedding: DLRM's model-parallel embedding stage, fused and unfused
 * (issue 18), in one run on the same GPUs and the same inputs. Each rank
 * owns TABLES / n of TABLES tables of ROWS x DIM fp32 rows; every sample of
 * the global batch looks each table up LO to HI times (uniform); each rank
 * wants its share of the samples with every table's pooled (sum) vector.
 *   a  pooling on this rank alone (collmux_embedding_alltoall over
 *      MPI_COMM_SELF: the same pooling loop), then NCCL's all-to-all of the
 *      pooled rows (grouped send/recv), one stream; the rows arrive grouped
 *      by source rank, which a model would still have to interleave (not
 *      counted)
 *   d  collmux_embedding_alltoall over the world: each bag written straight
 *      into its owner's memory as it is pooled
 *   pool  the pooling of a alone
 * Per contender the median over ROUNDS rounds of ITERS calls, the slowest
 * rank's. Rank 0 prints CSV: op,tables,rows,dim,batch,lookups,ranks,contender,us,speedup_vs_a
 *
 * usage: embedding [batch [lookups_lo lookups_hi [rows]]]   (libcollmux.so preloaded)
 * build: mpicc -O2 -I$CUDA/include -o embedding bench/embedding.c -L$CUDA/lib64 -lcudart -lnccl -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <nccl.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "../include/collmux.h"
#include "../tests/gpu/gpu_common.h"
#include "ops_bench.h"

enum { TABLES = 26, DIM = 128, ITERS = 10, ROUNDS = 5 };
static int rank, size;
static ncclComm_t nccl;
static cudaStream_t st;
static int (*emb)(int, void *, int, int, int, long long, int, int, int, const void *, const long long *, const long long *,
		  const long long *, void *);

typedef struct {
	long long batch, rows[TABLES + 1];
	int tables, first;
	void *w, *off, *idx, *pooled, *out, *recv;
} prob;

static void call(char c, const void *v)
{
	const prob *p = v;
	const size_t row = (size_t)p->tables * DIM * 4; /* one sample's pooled vectors here */
	switch (c) {
	case 'd':
		emb(MPI_Comm_c2f(MPI_COMM_WORLD), st, COLLMUX_FLOAT32, COLLMUX_POOL_SUM, DIM, p->batch, p->tables, p->first, TABLES, p->w,
		    p->rows, p->off, p->idx, p->out);
		break;
	case 'p':
	case 'a':
		emb(MPI_Comm_c2f(MPI_COMM_SELF), st, COLLMUX_FLOAT32, COLLMUX_POOL_SUM, DIM, p->batch, p->tables, 0, p->tables, p->w, p->rows,
		    p->off, p->idx, p->pooled);
		if (c == 'p')
			break;
		ncclGroupStart();
		for (int q = 0; q < size; q++) {
			const long long b0 = p->batch * q / size, bn = p->batch * (q + 1) / size - b0;
			const long long my = p->batch * (rank + 1) / size - p->batch * rank / size;
			const int qt = TABLES * (q + 1) / size - TABLES * q / size; /* rank q's tables */
			ncclSend((char *)p->pooled + b0 * row, bn * row / 4, ncclFloat, q, nccl, st);
			ncclRecv((char *)p->recv + (size_t)(TABLES * q / size) * my * DIM * 4, (size_t)my * qt * DIM, ncclFloat, q, nccl, st);
		}
		ncclGroupEnd();
		break;
	}
}

int main(int argc, char **argv)
{
	*(void **)&emb = ops_start(&argc, &argv, &rank, &size, "collmux_embedding_alltoall", &nccl, &st);
	prob p = {.batch = argc > 1 ? atoll(argv[1]) : 16384};
	const int lo = argc > 2 ? atoi(argv[2]) : 20, hi = argc > 3 ? atoi(argv[3]) : 80;
	const long long rows = argc > 4 ? atoll(argv[4]) : 1000000;
	p.first = TABLES * rank / size, p.tables = TABLES * (rank + 1) / size - p.first;
	for (int t = 0; t < p.tables; t++)
		p.rows[t + 1] = p.rows[t] + rows;
	/* bags: lengths uniform in [lo, hi], rows uniform */
	const size_t bags = (size_t)p.tables * p.batch;
	long long *off = malloc((bags + 1) * 8), nnz = 0;
	uint64_t x = 0x9E3779B97F4A7C15ull ^ (uint64_t)rank;
	off[0] = 0;
	for (size_t b = 0; b < bags; b++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		off[b + 1] = nnz += lo + (long long)(x % (uint64_t)(hi - lo + 1));
	}
	long long *idx = malloc((size_t)nnz * 8);
	for (long long i = 0; i < nnz; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		idx[i] = (long long)(x % (uint64_t)rows);
	}
	const long long my = p.batch * (rank + 1) / size - p.batch * rank / size;
	CUDA_OK(cudaMalloc(&p.w, (size_t)p.rows[p.tables] * DIM * 4));
	CUDA_OK(cudaMemset(p.w, 0, (size_t)p.rows[p.tables] * DIM * 4));
	CUDA_OK(cudaMalloc(&p.off, (bags + 1) * 8));
	CUDA_OK(cudaMalloc(&p.idx, (size_t)nnz * 8));
	CUDA_OK(cudaMalloc(&p.pooled, (size_t)p.batch * p.tables * DIM * 4));
	CUDA_OK(cudaMalloc(&p.out, (size_t)my * TABLES * DIM * 4 + 16));
	CUDA_OK(cudaMalloc(&p.recv, (size_t)my * TABLES * DIM * 4 + 16));
	CUDA_OK(cudaMemcpy(p.off, off, (bags + 1) * 8, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(p.idx, idx, (size_t)nnz * 8, cudaMemcpyHostToDevice));
	if (rank == 0)
		printf("op,tables,rows,dim,batch,lookups,ranks,contender,us,speedup_vs_a\n");
	const double ta = ops_median_us(call, 'a', &p, 1, ITERS, ROUNDS);
	for (const char *c = "adp"; *c; c++) {
		const double us = *c == 'a' ? ta : ops_median_us(call, *c, &p, 1, ITERS, ROUNDS);
		if (rank == 0)
			printf("embedding_alltoall,%d,%lld,%d,%lld,%d-%d,%d,%s,%.1f,%.3f\n", TABLES, rows, DIM, p.batch, lo, hi, size,
			       *c == 'a' ? "a:pool+nccl-alltoall" : *c == 'd' ? "d:collmux-fused" : "pool-alone", us, ta / us);
	}
	ncclCommDestroy(nccl);
	MPI_Finalize();
	return 0;
}
