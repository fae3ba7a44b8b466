/*
 * emptyrank: collectives on device memory in which one rank has nothing
 * to send or receive and passes NULL, as CuPy and PyTorch do for an empty
 * array, while its peers pass device buffers (mpi4py's suite hung on the
 * first of them, a gatherv on a new communicator, at two ranks: the root
 * set up a GPU path the empty rank, which took the MPI, never entered).
 * Rank 1 is the empty one. On a new communicator (nothing agreed yet) and
 * on one whose ranks have already run a device all-reduce together: a
 * gatherv and a scatterv rooted at 0, an alltoallv and its nonblocking
 * form, and a dist-graph neighbour all-gather in which rank 1 has no
 * neighbours, and a persistent gatherv started three times. Then, on the
 * second communicator, a gatherv whose leaves pass host memory while the
 * root passes device memory. Every result is
 * checked. Run with -DCOLLTEST_CUDA (the GPU, or the CPU stand-in), on 2
 * or more ranks (7 at most), also under COLLMUX_CHECK=1. Prints
 * "emptyrank: N ranks, F failures".
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "../gpu/gpu_common.h"
#include "testlib.h"

#define EMPTY 1 /* the rank with nothing to exchange */

/* n ints on the device, value(i) each, or NULL for none */
static int *dev_ints(int n, int base)
{
	if (n == 0)
		return NULL;
	int *h = malloc(sizeof(int) * (size_t)n), *d;
	for (int i = 0; i < n; i++)
		h[i] = base + i;
	CUDA_OK(cudaMalloc((void **)&d, sizeof(int) * (size_t)n));
	CUDA_OK(cudaMemcpy(d, h, sizeof(int) * (size_t)n, cudaMemcpyHostToDevice));
	free(h);
	return d;
}

/* the device ints back on the host (freed by the caller) */
static int *host_copy(const int *d, int n)
{
	int *h = calloc((size_t)n + 1, sizeof(int));
	if (n)
		CUDA_OK(cudaMemcpy(h, d, sizeof(int) * (size_t)n, cudaMemcpyDeviceToHost));
	return h;
}

/* what rank r contributes: r == EMPTY nothing, else r + 1 ints from 100 r */
static int share(int r) { return r == EMPTY ? 0 : r + 1; }

static void gatherv(MPI_Comm comm, const char *when, int host_leaves)
{
	int n = share(rank), total = 0, *counts = calloc((size_t)size, sizeof(int)), *displs = calloc((size_t)size, sizeof(int));
	for (int r = 0; r < size; r++)
		counts[r] = share(r), displs[r] = total, total += counts[r];
	int *h = malloc(sizeof(int) * ((size_t)n + 1)), *s = NULL;
	for (int i = 0; i < n; i++)
		h[i] = 100 * rank + i;
	if (rank == 0 || !host_leaves)
		s = dev_ints(n, 100 * rank);
	else if (n)
		s = h;
	int *recv = rank == 0 ? dev_ints(total, -1000) : NULL;
	/* nothing of MPI_BYTE, as mpi4py passes for None */
	int rc = MPI_Gatherv(s, n, n ? MPI_INT : MPI_BYTE, recv, counts, displs, MPI_INT, 0, comm);
	CHECK(rc == MPI_SUCCESS, "gatherv %s: rc %d", when, rc);
	if (rank == 0) {
		int *got = host_copy(recv, total);
		for (int r = 0; r < size; r++)
			for (int i = 0; i < counts[r]; i++)
				CHECK(got[displs[r] + i] == 100 * r + i, "gatherv %s: element %d of rank %d is %d", when, i, r, got[displs[r] + i]);
		free(got);
		cudaFree(recv);
	}
	if (s != h)
		cudaFree(s);
	free(h), free(counts), free(displs);
}

static void scatterv(MPI_Comm comm, const char *when)
{
	int n = share(rank), total = 0, *counts = calloc((size_t)size, sizeof(int)), *displs = calloc((size_t)size, sizeof(int));
	for (int r = 0; r < size; r++)
		counts[r] = share(r), displs[r] = total, total += counts[r];
	int *send = rank == 0 ? dev_ints(total, 7) : NULL, *recv = dev_ints(n, -1);
	int rc = MPI_Scatterv(send, counts, displs, MPI_INT, recv, n, MPI_INT, 0, comm);
	CHECK(rc == MPI_SUCCESS, "scatterv %s: rc %d", when, rc);
	int *got = host_copy(recv, n);
	for (int i = 0; i < n; i++)
		CHECK(got[i] == 7 + displs[rank] + i, "scatterv %s: element %d is %d", when, i, got[i]);
	free(got), cudaFree(send), cudaFree(recv), free(counts), free(displs);
}

/* every rank but EMPTY sends rank + 1 ints to every rank but EMPTY */
static void alltoallv(MPI_Comm comm, const char *when, int nonblocking)
{
	int *sc = calloc((size_t)size, sizeof(int)), *sd = calloc((size_t)size, sizeof(int));
	int *rcn = calloc((size_t)size, sizeof(int)), *rd = calloc((size_t)size, sizeof(int)), st = 0, rt = 0;
	for (int r = 0; r < size; r++) {
		sc[r] = rank == EMPTY || r == EMPTY ? 0 : rank + 1, sd[r] = st, st += sc[r];
		rcn[r] = rank == EMPTY || r == EMPTY ? 0 : r + 1, rd[r] = rt, rt += rcn[r];
	}
	int *send = dev_ints(st, 1000 * rank), *recv = dev_ints(rt, -1), rc;
	if (nonblocking) {
		MPI_Request req;
		rc = MPI_Ialltoallv(send, sc, sd, MPI_INT, recv, rcn, rd, MPI_INT, comm, &req);
		if (rc == MPI_SUCCESS)
			rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
	} else {
		rc = MPI_Alltoallv(send, sc, sd, MPI_INT, recv, rcn, rd, MPI_INT, comm);
	}
	CHECK(rc == MPI_SUCCESS, "alltoallv %s: rc %d", when, rc);
	int *got = host_copy(recv, rt);
	for (int r = 0; r < size; r++)
		for (int i = 0; i < rcn[r]; i++) /* rank r's block for this rank starts at its sd[rank] = (rank's place) * (r + 1) */
			CHECK(got[rd[r] + i] == 1000 * r + (rank - (rank > EMPTY)) * (r + 1) + i, "alltoallv %s: element %d from rank %d is %d", when, i, r, got[rd[r] + i]);
	free(got), cudaFree(send), cudaFree(recv), free(sc), free(sd), free(rcn), free(rd);
}

/* a ring of the ranks but EMPTY, which has no neighbours: each sends its
 * rank + 1 ints to the next and gets the previous one's */
static void neighbors(MPI_Comm comm, const char *when)
{
	int others = size - 1, me = rank - (rank > EMPTY), next = -1, prev = -1, deg = 0;
	if (rank != EMPTY && others > 1) {
		int n = (me + 1) % others, p = (me + others - 1) % others;
		next = n + (n >= EMPTY), prev = p + (p >= EMPTY), deg = 1;
	}
	MPI_Comm g;
	int src[1] = {prev}, dst[1] = {next}, weight[1] = {1};
	MPI_Dist_graph_create_adjacent(comm, deg, src, weight, deg, dst, weight, MPI_INFO_NULL, 0, &g);
	int n = deg ? 4 : 0, *send = dev_ints(n, 10 * rank), *recv = dev_ints(n, -1);
	int rc = MPI_Neighbor_allgather(send, n, MPI_INT, recv, n, MPI_INT, g);
	CHECK(rc == MPI_SUCCESS, "neighbor_allgather %s: rc %d", when, rc);
	int *got = host_copy(recv, n);
	for (int i = 0; i < n; i++)
		CHECK(got[i] == 10 * prev + i, "neighbor_allgather %s: element %d is %d", when, i, got[i]);
	free(got), cudaFree(send), cudaFree(recv);
	MPI_Comm_free(&g);
}

/* MPI_Gatherv_init, from the header where it is MPI-4's, else from the
 * dynamic linker, which finds collmux's (Open MPI 4.1 has none) */
typedef int (*gatherv_init_fn)(const void *, int, MPI_Datatype, void *, const int *, const int *, MPI_Datatype, int, MPI_Comm, MPI_Info,
			       MPI_Request *);
static gatherv_init_fn gatherv_init_fn_of(void)
{
#if defined(MPI_VERSION) && MPI_VERSION >= 4
	return MPI_Gatherv_init;
#else
	gatherv_init_fn f;
	*(void **)&f = dlsym(RTLD_DEFAULT, "MPI_Gatherv_init");
	return f;
#endif
}

/* a persistent gatherv started three times, new data at each start */
static void persistent_gatherv(MPI_Comm comm, const char *when)
{
	gatherv_init_fn init = gatherv_init_fn_of();
	CHECK(init != NULL, "no MPI_Gatherv_init");
	if (!init)
		return;
	int n = share(rank), total = 0, *counts = calloc((size_t)size, sizeof(int)), *displs = calloc((size_t)size, sizeof(int));
	for (int r = 0; r < size; r++)
		counts[r] = share(r), displs[r] = total, total += counts[r];
	int *s = dev_ints(n, 0), *recv = rank == 0 ? dev_ints(total, -1) : NULL, h[8];
	MPI_Request req;
	int rc = init(s, n, MPI_INT, recv, counts, displs, MPI_INT, 0, comm, MPI_INFO_NULL, &req);
	CHECK(rc == MPI_SUCCESS, "gatherv_init %s: rc %d", when, rc);
	for (int start = 0; rc == MPI_SUCCESS && start < 3; start++) {
		for (int i = 0; i < n; i++)
			h[i] = 100 * rank + 10 * start + i;
		if (n)
			CUDA_OK(cudaMemcpy(s, h, sizeof(int) * (size_t)n, cudaMemcpyHostToDevice));
		rc = MPI_Start(&req);
		if (rc == MPI_SUCCESS)
			rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
		CHECK(rc == MPI_SUCCESS, "persistent gatherv %s, start %d: rc %d", when, start, rc);
		if (rank == 0 && rc == MPI_SUCCESS) {
			int *got = host_copy(recv, total);
			for (int r = 0; r < size; r++)
				for (int i = 0; i < counts[r]; i++)
					CHECK(got[displs[r] + i] == 100 * r + 10 * start + i, "persistent gatherv %s, start %d: element %d of rank %d is %d", when, start,
					      i, r, got[displs[r] + i]);
			free(got);
		}
	}
	if (rc == MPI_SUCCESS)
		MPI_Request_free(&req);
	cudaFree(s), cudaFree(recv), free(counts), free(displs);
}

static void round_of(MPI_Comm comm, const char *when)
{
	gatherv(comm, when, 0);
	scatterv(comm, when);
	alltoallv(comm, when, 0);
	alltoallv(comm, when, 1);
	neighbors(comm, when);
}

int main(int argc, char **argv)
{
	gpu_mpi_start(&argc, &argv, &rank, &size);
	MPI_Comm fresh, warm;
	MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
	round_of(fresh, "on a new communicator");
	persistent_gatherv(fresh, "on a new communicator");
	MPI_Comm_free(&fresh);

	MPI_Comm_dup(MPI_COMM_WORLD, &warm);
	int *v = dev_ints(4, rank), *sum = dev_ints(4, 0);
	CHECK(MPI_Allreduce(v, sum, 4, MPI_INT, MPI_SUM, warm) == MPI_SUCCESS, "allreduce failed");
	int *got = host_copy(sum, 4);
	for (int i = 0; i < 4; i++)
		CHECK(got[i] == size * (size - 1) / 2 + size * i, "allreduce: element %d is %d", i, got[i]);
	free(got), cudaFree(v), cudaFree(sum);
	round_of(warm, "after a device all-reduce");
	persistent_gatherv(warm, "after a device all-reduce");
	gatherv(warm, "from host leaves to a device root", 1);
	MPI_Comm_free(&warm);

	int all = 0;
	PMPI_Reduce(&failures, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("emptyrank: %d ranks, %d failures\n", size, all);
	MPI_Finalize();
	return 0;
}
