/*
 * typemix: collectives in which ranks pass the same type signature through
 * different datatypes, as MPI allows: a contiguous derived type on one
 * rank and basic elements on the others, a strided (vector, resized
 * column) type on one side of a bcast, gather, scatter, all-to-all(v),
 * all-gather(v) or neighbourhood call, MPI_2INT against pairs of MPI_INT,
 * MPI_DATATYPE_NULL where a datatype is not significant. Rank 0 prints a
 * digest of every rank's buffers (gaps included: a strided receive must
 * leave them alone). Built natively and with -DCOLLTEST_CUDA (buffers in
 * device memory); the two runs must print the same.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef COLLTEST_CUDA
#include "../gpu/gpu_common.h"
#endif

#define K 6 /* ints per rank's block */

#include "testlib.h"

/* a test buffer: host ints and, with COLLTEST_CUDA, their device mirror */
typedef struct {
	int *h;
	void *d;
	size_t n;
} buf;

static buf mk(size_t n, int fill)
{
	buf b = {calloc(n + 1, sizeof(int)), NULL, n};
	for (size_t i = 0; i < n; i++)
		b.h[i] = fill;
#ifdef COLLTEST_CUDA
	CUDA_OK(cudaMalloc(&b.d, (n + 1) * sizeof(int)));
#else
	b.d = b.h;
#endif
	return b;
}

/* the host ints to the device (up) or back */
static void move(buf *b, int up)
{
#ifdef COLLTEST_CUDA
	if (up)
		CUDA_OK(cudaMemcpy(b->d, b->h, b->n * sizeof(int), cudaMemcpyHostToDevice));
	else
		CUDA_OK(cudaMemcpy(b->h, b->d, b->n * sizeof(int), cudaMemcpyDeviceToHost));
#else
	(void)b, (void)up;
#endif
}
#define up(b) move(b, 1)
#define down(b) move(b, 0)

static void drop(buf *b)
{
#ifdef COLLTEST_CUDA
	cudaFree(b->d);
#endif
	free(b->h);
}

/* Rank 0 prints each rank's return code and a digest of its buffer (by
 * position, so that data in the wrong place shows), then frees it. */
static void report(const char *name, int rc, buf *b)
{
	down(b);
	long long mine[2] = {rc != MPI_SUCCESS, 0}, *all = malloc(sizeof mine * (size_t)size);
	for (size_t i = 0; i < b->n; i++)
		mine[1] = (mine[1] * 31 + b->h[i] + 7) % 1000000007LL;
	MPI_Gather(mine, 2, MPI_LONG_LONG, all, 2, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
	for (int r = 0; rank == 0 && r < size; r++)
		printf("%-24s rank %d: %s %lld\n", name, r, all[2 * r] ? "error" : "ok", all[2 * r + 1]);
	free(all);
	drop(b);
}

/* value i of rank r's data */
static int val(int r, int i) { return 1000 * (r + 1) + i; }

static MPI_Datatype commit(MPI_Datatype t)
{
	MPI_Type_commit(&t);
	return t;
}

/* every other int, n of them: a strided type spanning 2n ints */
static MPI_Datatype strided(int n)
{
	MPI_Datatype v, r;
	MPI_Type_vector(n, 1, 2, MPI_INT, &v);
	MPI_Type_create_resized(v, 0, (MPI_Aint)(2 * n * sizeof(int)), &r);
	MPI_Type_free(&v);
	return commit(r);
}

/* column of a K x size row-major matrix: K ints, size apart, one int wide */
static MPI_Datatype column(void)
{
	MPI_Datatype v, r;
	MPI_Type_vector(K, 1, size, MPI_INT, &v);
	MPI_Type_create_resized(v, 0, sizeof(int), &r);
	MPI_Type_free(&v);
	return commit(r);
}

static MPI_Datatype contig(int n)
{
	MPI_Datatype t;
	MPI_Type_contiguous(n, MPI_INT, &t);
	return commit(t);
}

/* K ints and an empty block of floats: its signature is K ints alone */
static MPI_Datatype ints_and_no_floats(void)
{
	int lens[2] = {K, 0};
	MPI_Aint displs[2] = {0, (MPI_Aint)(K * sizeof(int))};
	MPI_Datatype types[2] = {MPI_INT, MPI_FLOAT}, t;
	MPI_Type_create_struct(2, lens, displs, types, &t);
	return commit(t);
}

/* root 0 passes n of its type t, the others K ints */
static void bcast_as(const char *name, int n, MPI_Datatype t)
{
	buf b = mk(K, -1);
	for (int i = 0; rank == 0 && i < K; i++)
		b.h[i] = val(0, i);
	up(&b);
	report(name, MPI_Bcast(b.d, rank == 0 ? n : K, rank == 0 ? t : MPI_INT, 0, MPI_COMM_WORLD), &b);
}

static void bcasts(int nonblocking)
{
	MPI_Datatype c3 = contig(3), s = strided(K);
	MPI_Request req;
	buf b;
	int rc;
	if (!nonblocking) {
		bcast_as("bcast contiguous", K / 3, c3);
		bcast_as("bcast 2int", K / 2, MPI_2INT);
		MPI_Datatype e = ints_and_no_floats();
		bcast_as("bcast struct with an empty float block", 1, e);
		MPI_Type_free(&e);
	}
	/* rank 1 receives every other int from root 0; then root 1 sends
	 * every other int, which rank 0 receives so */
	static const char *const names[2][2] = {{"bcast strided", "bcast strided root"}, {"ibcast strided", "ibcast strided root"}};
	for (int root = 0; root < 2; root++) {
		const int strided_here = rank == 1 || (root == 1 && rank == 0);
		b = mk(strided_here ? 2 * K : K, -1);
		for (int i = 0; rank == root && i < K; i++)
			b.h[strided_here ? 2 * i : i] = val(root, i);
		up(&b);
		const int n = strided_here ? 1 : K;
		const MPI_Datatype t = strided_here ? s : MPI_INT;
		if (nonblocking) {
			rc = MPI_Ibcast(b.d, n, t, root, MPI_COMM_WORLD, &req);
			if (rc == MPI_SUCCESS)
				rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
		} else {
			rc = MPI_Bcast(b.d, n, t, root, MPI_COMM_WORLD);
		}
		report(names[nonblocking][root], rc, &b);
	}
	MPI_Type_free(&c3), MPI_Type_free(&s);
}

static void gathers(int nonblocking)
{
	MPI_Datatype col = column();
	MPI_Request req;
	int rc;
	/* the root gathers each rank's block into a column */
	buf sb = mk(K, 0), rb = mk((size_t)(rank == 0 ? K * size : 1), -1);
	for (int i = 0; i < K; i++)
		sb.h[i] = val(rank, i);
	up(&sb), up(&rb);
	if (nonblocking) {
		rc = MPI_Igather(sb.d, K, MPI_INT, rb.d, 1, col, 0, MPI_COMM_WORLD, &req);
		if (rc == MPI_SUCCESS)
			rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
	} else {
		/* the others pass a null receive type: it is not significant there */
		rc = MPI_Gather(sb.d, K, MPI_INT, rb.d, rank == 0 ? 1 : 0, rank == 0 ? col : MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD);
	}
	report(nonblocking ? "igather column" : "gather column", rc, &rb);
	drop(&sb);
	/* and scatters columns back, the others passing a null send type */
	sb = mk((size_t)(rank == 0 ? K * size : 1), 0), rb = mk(K, -1);
	for (int i = 0; rank == 0 && i < K * size; i++)
		sb.h[i] = val(i % size, i / size);
	up(&sb), up(&rb);
	if (nonblocking) {
		rc = MPI_Iscatter(sb.d, 1, col, rb.d, K, MPI_INT, 0, MPI_COMM_WORLD, &req);
		if (rc == MPI_SUCCESS)
			rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
	} else {
		rc = MPI_Scatter(sb.d, rank == 0 ? 1 : 0, rank == 0 ? col : MPI_DATATYPE_NULL, rb.d, K, MPI_INT, 0, MPI_COMM_WORLD);
	}
	report(nonblocking ? "iscatter column" : "scatter column", rc, &rb);
	drop(&sb);
	MPI_Type_free(&col);
}

static void allgathers(void)
{
	MPI_Datatype c3 = contig(3), s = strided(K), s2 = strided(2);
	/* rank 1 sends a contiguous type */
	buf sb = mk(K, 0), rb = mk((size_t)K * size, -1);
	for (int i = 0; i < K; i++)
		sb.h[i] = val(rank, i);
	up(&sb), up(&rb);
	int rc = MPI_Allgather(sb.d, rank == 1 ? K / 3 : K, rank == 1 ? c3 : MPI_INT, rb.d, K, MPI_INT, MPI_COMM_WORLD);
	report("allgather contiguous", rc, &rb);
	/* rank 0 receives each block strided */
	rb = mk((size_t)(rank == 0 ? 2 * K * size : K * size), -1);
	up(&rb);
	rc = MPI_Allgather(sb.d, K, MPI_INT, rb.d, rank == 0 ? 1 : K, rank == 0 ? s : MPI_INT, MPI_COMM_WORLD);
	report("allgather strided", rc, &rb);
	/* in place: the send type is not significant */
	rb = mk((size_t)K * size, -1);
	for (int i = 0; i < K; i++)
		rb.h[rank * K + i] = val(rank, i);
	up(&rb);
	rc = MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rb.d, K, MPI_INT, MPI_COMM_WORLD);
	report("allgather in place", rc, &rb);
	/* v: rank j sends 2(j+1) ints; rank 1 receives pairs of them strided */
	int *cnt = malloc(sizeof(int) * (size_t)size), *dsp = malloc(sizeof(int) * (size_t)size), total = 0;
	for (int j = 0; j < size; j++) {
		cnt[j] = rank == 1 ? j + 1 : 2 * (j + 1);
		dsp[j] = rank == 1 ? total / 2 : total;
		total += 2 * (j + 1);
	}
	buf vb = mk((size_t)(2 * (rank + 1)), 0);
	for (int i = 0; i < 2 * (rank + 1); i++)
		vb.h[i] = val(rank, i);
	rb = mk((size_t)(rank == 1 ? 2 * total : total), -1);
	up(&vb), up(&rb);
	rc = MPI_Allgatherv(vb.d, 2 * (rank + 1), MPI_INT, rb.d, cnt, dsp, rank == 1 ? s2 : MPI_INT, MPI_COMM_WORLD);
	report("allgatherv strided", rc, &rb);
	drop(&vb), drop(&sb);
	free(cnt), free(dsp);
	MPI_Type_free(&c3), MPI_Type_free(&s), MPI_Type_free(&s2);
}

static void alltoalls(void)
{
	MPI_Datatype c2 = contig(2), s3 = strided(3);
	/* rank 1 passes pairs of ints on both sides */
	buf sb = mk((size_t)K * size, 0), rb = mk((size_t)K * size, -1);
	for (int i = 0; i < K * size; i++)
		sb.h[i] = val(rank, i);
	up(&sb), up(&rb);
	int rc = MPI_Alltoall(sb.d, rank == 1 ? K / 2 : K, rank == 1 ? c2 : MPI_INT, rb.d, rank == 1 ? K / 2 : K, rank == 1 ? c2 : MPI_INT,
			      MPI_COMM_WORLD);
	report("alltoall contiguous", rc, &rb);
	drop(&sb);
	/* v: three ints to each rank; rank 0 sends every other int of 6 */
	int *sc = malloc(sizeof(int) * 4 * (size_t)size), *sd = sc + size, *rc3 = sd + size, *rd = rc3 + size;
	for (int j = 0; j < size; j++) {
		sc[j] = rank == 0 ? 1 : 3, sd[j] = rank == 0 ? j : 3 * j;
		rc3[j] = 3, rd[j] = 3 * j;
	}
	sb = mk((size_t)(rank == 0 ? 6 * size : 3 * size), 0), rb = mk((size_t)3 * size, -1);
	for (size_t i = 0; i < sb.n; i++)
		sb.h[i] = val(rank, (int)i);
	up(&sb), up(&rb);
	rc = MPI_Alltoallv(sb.d, sc, sd, rank == 0 ? s3 : MPI_INT, rb.d, rc3, rd, MPI_INT, MPI_COMM_WORLD);
	report("alltoallv strided", rc, &rb);
	drop(&sb);
	free(sc);
	MPI_Type_free(&c2), MPI_Type_free(&s3);
}

/* a line of ranks (not periodic): each receives its neighbours' blocks,
 * rank 1 strided; the missing neighbours' blocks stay as they were */
static void neighbors(void)
{
	MPI_Comm line;
	int dims[1] = {size}, periods[1] = {0};
	MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &line);
	MPI_Datatype s = strided(K);
	buf sb = mk(K, 0), rb = mk((size_t)(rank == 1 ? 4 * K : 2 * K), -1);
	for (int i = 0; i < K; i++)
		sb.h[i] = val(rank, i);
	up(&sb), up(&rb);
	int rc = MPI_Neighbor_allgather(sb.d, K, MPI_INT, rb.d, rank == 1 ? 1 : K, rank == 1 ? s : MPI_INT, line);
	report("neighbor allgather", rc, &rb);
	drop(&sb);
	MPI_Type_free(&s);
	MPI_Comm_free(&line);
}

int main(int argc, char **argv)
{
#ifdef COLLTEST_CUDA
	gpu_select();
#endif
	test_init(&argc, &argv, 0, 1);
	if (size < 2) {
		printf("typemix: needs 2 ranks or more\n");
		MPI_Finalize();
		return 1;
	}
	bcasts(0);
	bcasts(1);
	gathers(0);
	gathers(1);
	allgathers();
	alltoalls();
	neighbors();
	/* a reduction of ints, every rank alike */
	buf b = mk(K, 0);
	for (int i = 0; i < K; i++)
		b.h[i] = val(rank, i);
	up(&b);
	report("allreduce", MPI_Allreduce(MPI_IN_PLACE, b.d, K, MPI_INT, MPI_SUM, MPI_COMM_WORLD), &b);
	if (rank == 0)
		printf("typemix: %d ranks\n", size);
	MPI_Finalize();
	return 0;
}
