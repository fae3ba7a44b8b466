/*
 * p2p_bw: where the time of a staged point-to-point transfer goes. One-way
 * bandwidth of a window of 8 MPI_Isend/MPI_Irecv (OSU's osu_bw shape)
 * between ranks 0 and 1, for buffers of each kind:
 *   host     malloc: the MPI's own transport, the ceiling of any staged path
 *   pinned   cudaMallocHost: the same from page-locked memory
 *   device   cudaMalloc: through collmux (staged: copy out, MPI, copy in)
 * and the device-host copy alone (path copy: cudaMemcpy of the same bytes
 * to pinned memory). Needs one GPU: both ranks may share it. Rank 0
 * prints CSV: kind,bytes,GB_s
 *   usage: p2p_bw [max_bytes]
 */
#include <mpi.h>

#include "../tests/gpu/gpu_common.h"

enum { W = 8 };

static int rank;

static double window(char *s, char *r, size_t bytes, int reps)
{
	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = MPI_Wtime();
	for (int i = 0; i < reps; i++) {
		MPI_Request q[W];
		for (int k = 0; k < W; k++) {
			if (rank == 0)
				MPI_Isend(s, (int)bytes, MPI_BYTE, 1, 3, MPI_COMM_WORLD, &q[k]);
			else
				MPI_Irecv(r, (int)bytes, MPI_BYTE, 0, 3, MPI_COMM_WORLD, &q[k]);
		}
		MPI_Waitall(W, q, MPI_STATUSES_IGNORE);
		char ack = 0; /* the receiver has everything */
		if (rank == 1)
			MPI_Send(&ack, 1, MPI_BYTE, 0, 4, MPI_COMM_WORLD);
		else
			MPI_Recv(&ack, 1, MPI_BYTE, 1, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	}
	return (double)W * reps * (double)bytes / (MPI_Wtime() - t0) / 1e9;
}

int main(int argc, char **argv)
{
	int size;
	gpu_mpi_start(&argc, &argv, &rank, &size);
	size_t maxb = argc > 1 ? strtoull(argv[1], NULL, 10) : (64u << 20);
	if (size != 2 || maxb == 0 || maxb > INT32_MAX) {
		if (rank == 0)
			fprintf(stderr, "p2p_bw: run on 2 ranks, with 0 < max_bytes < 2 GiB\n");
		MPI_Finalize();
		return 1;
	}
	char *hs = malloc(maxb), *hr = malloc(maxb), *ps, *pr, *ds, *dr;
	CUDA_OK(cudaMallocHost((void **)&ps, maxb));
	CUDA_OK(cudaMallocHost((void **)&pr, maxb));
	CUDA_OK(cudaMalloc((void **)&ds, maxb));
	CUDA_OK(cudaMalloc((void **)&dr, maxb));
	memset(hs, 1, maxb), memset(ps, 1, maxb);
	CUDA_OK(cudaMemset(ds, 1, maxb));
	if (rank == 0)
		printf("kind,bytes,GB_s\n");
	for (size_t b = 1 << 16; b <= maxb; b *= 4) {
		int reps = b >= (16u << 20) ? 5 : 20;
		const struct {
			const char *kind;
			char *s, *r;
		} kinds[] = {{"host", hs, hr}, {"pinned", ps, pr}, {"device", ds, dr}};
		for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
			window(kinds[k].s, kinds[k].r, b, 1); /* warm up: connections, pools */
			double gbs = window(kinds[k].s, kinds[k].r, b, reps);
			if (rank == 0)
				printf("%s,%zu,%.3f\n", kinds[k].kind, b, gbs);
		}
		double t0 = MPI_Wtime();
		for (int i = 0; i < reps; i++)
			CUDA_OK(cudaMemcpy(pr, ds, b, cudaMemcpyDeviceToHost));
		if (rank == 0)
			printf("copy,%zu,%.3f\n", b, (double)reps * (double)b / (MPI_Wtime() - t0) / 1e9);
	}
	fflush(stdout);
	MPI_Finalize();
	return 0;
}
