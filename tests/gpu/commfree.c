/*
 * commfree: communicators made and freed in a loop, more of them than a
 * process has fused workspaces (16): MPI_Comm_dup, then MPI_Comm_split
 * with the ranks reversed, each running device all-reduces (LL and
 * one-shot sizes), an all-gather and a bcast, every result checked
 * exactly. A freed communicator's workspace must go to the next one of the
 * same processes, whatever its rank order, so that none of these calls
 * falls back to NCCL (the harness checks the statistics). Then two
 * communicators freed in opposite orders on different ranks:
 * MPI_Comm_free is local, and this must not hang.
 * Prints "commfree: N ranks, F failures", and how long the first call on
 * a communicator took (the fused set-up: round 0 compiles or loads the
 * kernels and makes a workspace, later rounds take one over), as
 * information.
 */
#include <mpi.h>
#include <stdint.h>
#include <string.h>

#include "gpu_common.h"

#define ROUNDS 40
#define MAXN (1 << 18) /* int32 elements: 1 MiB, past the LL limit */

static int failures;
static int32_t *d_in, *d_out, *h;

static void bad(const char *what, int round, size_t at, long long got, long long want)
{
	if (failures++ < 10)
		fprintf(stderr, "commfree: %s, round %d: [%zu] = %lld, want %lld\n", what, round, at, got, want);
}

/* all-reduce of n elements (rank r gives r*7+i), all-gather and bcast of
 * n elements, checked against the values worked out here */
static void use(MPI_Comm comm, int round, size_t n)
{
	int r, p;
	MPI_Comm_rank(comm, &r);
	MPI_Comm_size(comm, &p);
	for (size_t i = 0; i < n; i++)
		h[i] = r * 7 + (int32_t)i + round;
	CUDA_OK(cudaMemcpy(d_in, h, n * 4, cudaMemcpyHostToDevice));
	MPI_Allreduce(d_in, d_out, (int)n, MPI_INT32_T, MPI_SUM, comm);
	CUDA_OK(cudaMemcpy(h, d_out, n * 4, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < n; i++)
		if (h[i] != 7 * p * (p - 1) / 2 + p * ((int32_t)i + round)) {
			bad("allreduce", round, i, h[i], 7 * p * (p - 1) / 2 + p * ((int32_t)i + round));
			break;
		}
	size_t m = n / (size_t)p; /* all-gather: m elements a rank, all r*3+round */
	for (size_t i = 0; i < m; i++)
		h[i] = r * 3 + round;
	CUDA_OK(cudaMemcpy(d_in, h, m * 4, cudaMemcpyHostToDevice));
	MPI_Allgather(d_in, (int)m, MPI_INT32_T, d_out, (int)m, MPI_INT32_T, comm);
	CUDA_OK(cudaMemcpy(h, d_out, m * (size_t)p * 4, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < m * (size_t)p; i++)
		if (h[i] != (int32_t)(i / m) * 3 + round) {
			bad("allgather", round, i, h[i], (int32_t)(i / m) * 3 + round);
			break;
		}
	const int root = round % p; /* bcast: the root's i + 100*round */
	for (size_t i = 0; i < n; i++)
		h[i] = r == root ? (int32_t)i + 100 * round : -1;
	CUDA_OK(cudaMemcpy(d_out, h, n * 4, cudaMemcpyHostToDevice));
	MPI_Bcast(d_out, (int)n, MPI_INT32_T, root, comm);
	CUDA_OK(cudaMemcpy(h, d_out, n * 4, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < n; i++)
		if (h[i] != (int32_t)i + 100 * round) {
			bad("bcast", round, i, h[i], (int32_t)i + 100 * round);
			break;
		}
}

int main(int argc, char **argv)
{
	int rank, size;
	gpu_mpi_start(&argc, &argv, &rank, &size);
	CUDA_OK(cudaMalloc((void **)&d_in, MAXN * 4));
	CUDA_OK(cudaMalloc((void **)&d_out, MAXN * 4));
	h = malloc(MAXN * 4);
	double first[ROUNDS];
	for (int round = 0; round < ROUNDS; round++) {
		MPI_Comm c;
		if (round % 2)
			MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &c); /* ranks reversed */
		else
			MPI_Comm_dup(MPI_COMM_WORLD, &c);
		first[round] = MPI_Wtime();
		use(c, round, 1024);  /* LL */
		first[round] = MPI_Wtime() - first[round];
		use(c, round, MAXN);  /* one shot through the slots */
		MPI_Comm_free(&c);
	}
	/* two communicators, freed A then B on even ranks, B then A on odd */
	MPI_Comm a, b;
	MPI_Comm_dup(MPI_COMM_WORLD, &a);
	MPI_Comm_dup(MPI_COMM_WORLD, &b);
	use(a, ROUNDS, 4096);
	use(b, ROUNDS + 1, 4096);
	if (rank % 2) {
		MPI_Comm_free(&b);
		MPI_Comm_free(&a);
	} else {
		MPI_Comm_free(&a);
		MPI_Comm_free(&b);
	}
	MPI_Comm c; /* and a communicator after them still runs */
	MPI_Comm_dup(MPI_COMM_WORLD, &c);
	use(c, ROUNDS + 2, MAXN);
	MPI_Comm_free(&c);
	int all = 0;
	MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0) {
		double most = 0;
		for (int r = 1; r < ROUNDS; r++)
			most = first[r] > most ? first[r] : most;
		printf("first use of a communicator (four calls, set-up included): round 0 %.1f ms, later rounds at most %.1f ms\n",
		       first[0] * 1e3, most * 1e3);
		printf("commfree: %d ranks, %d failures\n", size, all);
	}
	free(h);
	MPI_Finalize();
	return all != 0;
}
