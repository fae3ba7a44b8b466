/*
 * gpu_bench: device-buffer collectives through MPI (so through collmux when
 * it is preloaded) against NCCL called directly by the same program on its
 * own communicator, size by size, in one run. Rank 0 prints CSV:
 *   collective,path,bytes,time_us,algbw_GBs,busbw_GBs
 * path is "collmux" for the MPI call (or what COLLMUX_RULES forces) and
 * "nccl" for the direct call. Sizes and factors follow nccl-tests.
 *
 * usage: gpu_bench [max_bytes] [label]   (label replaces "collmux")
 */
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

static double factor(int c)
{
	switch (c) {
	case ALLREDUCE: return 2.0 * (size - 1) / size;
	case BCAST: return 1;
	default: return (double)(size - 1) / size;
	}
}

int main(int argc, char **argv)
{
	gpu_select();
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	size_t maxb = argc > 1 ? strtoull(argv[1], NULL, 10) : (1ull << 30);
	const char *label = argc > 2 ? argv[2] : "collmux";
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
	for (int c = 0; c < NCOLL; c++)
		for (size_t b = 8; b <= maxb; b *= 2) {
			size_t bytes = b < (size_t)4 * size ? (size_t)4 * size : b; /* at least one float per rank */
			int iters = bytes <= (1 << 20) ? 40 : bytes <= (64 << 20) ? 10 : 3;
			for (int direct = 1; direct >= 0; direct--) {
				for (int w = 0; w < 5; w++)
					one(c, direct, s, r, bytes);
				/* median over 7 batches of the mean time per call */
				double tb[7], t, tmax;
				for (int k = 0; k < 7; k++) {
					MPI_Barrier(MPI_COMM_WORLD);
					double t0 = MPI_Wtime();
					for (int i = 0; i < iters; i++)
						one(c, direct, s, r, bytes);
					tb[k] = (MPI_Wtime() - t0) / iters;
				}
				qsort(tb, 7, sizeof *tb, cmp_double);
				t = tb[3];
				MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
				if (rank == 0) {
					double alg = bytes / tmax / 1e9;
					printf("%s,%s,%zu,%.2f,%.2f,%.2f\n", names[c], direct ? "nccl" : label, bytes, tmax * 1e6, alg, alg * factor(c));
				}
			}
			fflush(stdout);
		}
	ncclCommDestroy(nccl);
	MPI_Finalize();
	return 0;
}
