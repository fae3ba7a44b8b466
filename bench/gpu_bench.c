/*
 * gpu_bench: device-buffer collectives through MPI (so through collmux when
 * it is preloaded) against NCCL called directly by the same program on its
 * own communicator, size by size, in one run. Rank 0 prints CSV:
 *   collective,path,bytes,time_us,algbw_GBs,busbw_GBs
 * path is "nccl" for the direct call, otherwise the policy's name. Sizes
 * and factors follow nccl-tests.
 *
 * usage: gpu_bench [max_bytes] [policy...]
 * A policy is NAME (the MPI call as the environment routes it; default
 * "collmux") or NAME=RULES[@MAX_BYTES]: collmux_set_rules(RULES) before
 * the policy's turn ("" restores the defaults and tuning table), measured
 * up to MAX_BYTES. With several, every size is measured under each policy
 * in turn, so that they compare within one run.
 */
#include <dlfcn.h>
#include <mpi.h>
#include <nccl.h>
#include <string.h>

#include "../tests/gpu/gpu_common.h"

enum { ALLREDUCE, ALLGATHER, ALLTOALL, BCAST, REDUCE_SCATTER, NCOLL };
static const char *names[NCOLL] = {"allreduce", "allgather", "alltoall", "bcast", "reduce_scatter"};
static int rank, size;
static ncclComm_t nccl;
static cudaStream_t stream;

/* one call of collective c on `bytes` (nccl-tests' size), via MPI or NCCL */
static void one(int c, int direct, char *s, char *r, size_t bytes)
{
	size_t n = bytes / 4, per = n / (size_t)size; /* floats; per-rank block */
	if (!direct) {
		switch (c) {
		case ALLREDUCE: MPI_Allreduce(s, r, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
		case ALLGATHER: MPI_Allgather(s, (int)per, MPI_FLOAT, r, (int)per, MPI_FLOAT, MPI_COMM_WORLD); break;
		case ALLTOALL: MPI_Alltoall(s, (int)per, MPI_FLOAT, r, (int)per, MPI_FLOAT, MPI_COMM_WORLD); break;
		case BCAST: MPI_Bcast(s, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
		case REDUCE_SCATTER: MPI_Reduce_scatter_block(s, r, (int)per, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
		}
		return;
	}
	switch (c) {
	case ALLREDUCE: ncclAllReduce(s, r, n, ncclFloat, ncclSum, nccl, stream); break;
	case ALLGATHER: ncclAllGather(s, r, per, ncclFloat, nccl, stream); break;
	case ALLTOALL:
		ncclGroupStart();
		for (int j = 0; j < size; j++) {
			ncclSend(s + j * per * 4, per, ncclFloat, j, nccl, stream);
			ncclRecv(r + j * per * 4, per, ncclFloat, j, nccl, stream);
		}
		ncclGroupEnd();
		break;
	case BCAST: ncclBroadcast(s, s, n, ncclFloat, 0, nccl, stream); break;
	case REDUCE_SCATTER: ncclReduceScatter(s, r, per, ncclFloat, ncclSum, nccl, stream); break;
	}
	cudaStreamSynchronize(stream); /* a blocking MPI call returns with the data in place */
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return v[n / 2];
}

static double factor(int c)
{
	switch (c) {
	case ALLREDUCE: return 2.0 * (size - 1) / size;
	case BCAST: return 1;
	default: return (double)(size - 1) / size;
	}
}

typedef struct {
	const char *name;
	char *rules; /* NULL: leave the rules alone */
	size_t max;
} policy;

/* parses NAME[=RULES[@MAX]] in place */
static policy parse_policy(char *arg, size_t maxb)
{
	policy p = {arg, NULL, maxb};
	char *eq = strchr(arg, '='), *at;
	if (eq) {
		*eq = 0, p.rules = eq + 1;
		if ((at = strrchr(p.rules, '@')) != NULL) {
			*at = 0;
			p.max = strtoull(at + 1, NULL, 10);
		}
	}
	return p;
}

int main(int argc, char **argv)
{
	gpu_mpi_start(&argc, &argv, &rank, &size);
	size_t maxb = argc > 1 ? strtoull(argv[1], NULL, 10) : (1ull << 30);
	policy pol[16] = {{"collmux", NULL, maxb}}; /* tb below has a row for each, and one for NCCL */
	int npol = argc > 2 ? argc - 2 : 1;
	if (npol > 16)
		npol = 16;
	for (int i = 0; i < npol && argc > 2; i++)
		pol[i] = parse_policy(argv[i + 2], maxb);
	int (*set_rules)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "collmux_set_rules");
	for (int i = 0; i < npol; i++)
		if (pol[i].rules && !set_rules) {
			if (rank == 0)
				fprintf(stderr, "gpu_bench: policy %s needs collmux preloaded (collmux_set_rules)\n", pol[i].name);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	ncclUniqueId id;
	if (rank == 0)
		ncclGetUniqueId(&id);
	MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
	ncclCommInitRank(&nccl, size, id, rank);
	cudaStreamCreate(&stream);
	char *s, *r;
	CUDA_OK(cudaMalloc((void **)&s, maxb));
	CUDA_OK(cudaMalloc((void **)&r, maxb));
	CUDA_OK(cudaMemset(s, 0, maxb));
	/* warm both paths up (NCCL channels, collmux's communicator state)
	 * so that the first measured size is not the first call */
	for (int c = 0; c < NCOLL; c++)
		for (int i = 0; i < 50; i++)
			one(c, i % 2, s, r, 64);
	if (rank == 0)
		printf("collective,path,bytes,time_us,algbw_GBs,busbw_GBs\n");
	const char *only = getenv("GPU_BENCH_ONLY"); /* one collective by name */
	for (int c = 0; c < NCOLL; c++)
		for (size_t b = 8; b <= maxb && (!only || strcmp(only, names[c]) == 0); b *= 2) {
			size_t bytes = b < (size_t)4 * size ? (size_t)4 * size : b; /* at least one float per rank */
			int iters = bytes <= (1 << 20) ? 50 : bytes <= (64 << 20) ? 10 : 3;
			/* BATCHES batches of iters calls per path (NCCL directly, then
			 * each policy that reaches this size), the paths taking turns
			 * batch by batch so that drift hits them alike; the median
			 * batch's mean time per call, the slowest rank's */
			enum { BATCHES = 11 };
			double tb[17][BATCHES];
			for (int k = 0; k < BATCHES; k++)
				for (int p = -1; p < npol; p++) {
					if (p >= 0 && bytes > pol[p].max)
						continue;
					if (p >= 0 && pol[p].rules && set_rules(pol[p].rules) != 0)
						MPI_Abort(MPI_COMM_WORLD, 2);
					for (int w = 0; w < (k ? 2 : 5); w++)
						one(c, p < 0, s, r, bytes);
					MPI_Barrier(MPI_COMM_WORLD);
					double t0 = MPI_Wtime();
					for (int i = 0; i < iters; i++)
						one(c, p < 0, s, r, bytes);
					tb[p + 1][k] = (MPI_Wtime() - t0) / iters;
				}
			for (int p = -1; p < npol; p++) {
				if (p >= 0 && bytes > pol[p].max)
					continue;
				double t = median(tb[p + 1], BATCHES), tmax;
				MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
				if (rank == 0) {
					double alg = bytes / tmax / 1e9;
					printf("%s,%s,%zu,%.2f,%.2f,%.2f\n", names[c], p < 0 ? "nccl" : pol[p].name, bytes, tmax * 1e6, alg, alg * factor(c));
				}
			}
			fflush(stdout);
		}
	ncclCommDestroy(nccl);
	MPI_Finalize();
	return 0;
}
