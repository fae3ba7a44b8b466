/*
 * edges: device all-reduces and all-gathers at the fused kernels' edges,
 * checked exactly against values computed on the host: offsets 1, 4 and 8
 * bytes into an allocation, the same on every rank or differing between
 * ranks (a rank must never choose another protocol for its alignment),
 * counts that are not a multiple of the vector width, the LL limit and one
 * past it, in place; and two communicators used at once by two threads
 * (MPI_THREAD_MULTIPLE), each with its own resident kernel, with
 * cudaFree (which waits for the whole device) between calls, and copies
 * on the legacy default stream; 200 bcasts in a row, the receivers starting
 * late. Run it with NCCL forced as well.
 * Prints "edges: N ranks, F failures".
 */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "gpu_common.h"

static int rank, size, dev, failures;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void fail(const char *what, size_t off, size_t n, size_t at, long long got, long long want)
{
	pthread_mutex_lock(&mu);
	if (failures++ < 10)
		fprintf(stderr, "edges: rank %d: %s offset %zu count %zu: [%zu] = %lld, want %lld\n", rank, what, off, n, at, got, want);
	pthread_mutex_unlock(&mu);
}

/* allreduce (sum of rank*k+i, int32) of n elements at byte offset off of
 * base, out of place or in place, on comm; then allgather of n bytes a rank */
static void check(MPI_Comm comm, char *base, char *out, size_t off, size_t n, int in_place, int salt)
{
	int r, p;
	MPI_Comm_rank(comm, &r);
	MPI_Comm_size(comm, &p);
	int32_t *h = malloc(n * 4);
	for (size_t i = 0; i < n; i++)
		h[i] = r * 1000 + (int32_t)i + salt;
	char *in = base + off;
	CUDA_OK(cudaMemcpy(in, h, n * 4, cudaMemcpyHostToDevice));
	MPI_Allreduce(in_place ? MPI_IN_PLACE : in, in_place ? in : out + off, (int)n, MPI_INT32_T, MPI_SUM, comm);
	CUDA_OK(cudaMemcpy(h, in_place ? in : out + off, n * 4, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < n; i++) {
		int32_t want = 1000 * p * (p - 1) / 2 + p * ((int32_t)i + salt);
		if (h[i] != want) {
			fail(in_place ? "allreduce in place" : "allreduce", off, n, i, h[i], want);
			break;
		}
	}
	/* a device-wide wait (cudaFree) in one thread while the other may be
	 * in a collective whose peer is in cudaFree too: this must not hang */
	if (comm != MPI_COMM_WORLD) {
		void *t;
		CUDA_OK(cudaMalloc(&t, 256));
		CUDA_OK(cudaFree(t));
	}
	/* allgather: n bytes from each rank, rank r's bytes all r+salt */
	unsigned char *g = malloc(n * (size_t)p);
	CUDA_OK(cudaMemset(in, r + salt, n));
	MPI_Allgather(in, (int)n, MPI_BYTE, out + off, (int)n, MPI_BYTE, comm);
	CUDA_OK(cudaMemcpy(g, out + off, n * (size_t)p, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < n * (size_t)p; i++)
		if (g[i] != (unsigned char)(i / n + (size_t)salt)) {
			fail("allgather", off, n, i, g[i], (unsigned char)(i / n + (size_t)salt));
			break;
		}
	free(g);
	free(h);
}

static const size_t counts[] = {1, 2, 3, 7, 33, 1000, 65536, 65537};
static const size_t offsets[] = {0, 1, 4, 8, 99}; /* 99: 0 on even ranks, 4 on odd ones */

static void sweep(MPI_Comm comm, int salt)
{
	char *a, *b;
	size_t max = 65537 * 4 * (size_t)size + 64;
	CUDA_OK(cudaMalloc((void **)&a, max));
	CUDA_OK(cudaMalloc((void **)&b, max));
	for (size_t i = 0; i < sizeof counts / sizeof *counts; i++)
		for (size_t j = 0; j < sizeof offsets / sizeof *offsets; j++)
			for (int ip = 0; ip < 2; ip++)
				check(comm, a, b, offsets[j] == 99 ? (size_t)(rank % 2) * 4 : offsets[j], counts[i], ip, salt);
	cudaFree(a);
	cudaFree(b);
}

/* 200 bcasts in a row from rank 0, the other ranks starting late: a root
 * hears from no one in a bcast, and must not run ahead of its receivers
 * (overwriting what they have not read yet) */
static void bcasts(void)
{
	enum { K = 200, B = 64 };
	char *d;
	unsigned char *h = malloc(K * B);
	CUDA_OK(cudaMalloc((void **)&d, K * B));
	CUDA_OK(cudaMemset(d, 0, K * B));
	if (rank != 0)
		usleep(200000);
	for (int k = 0; k < K; k++) {
		if (rank == 0)
			CUDA_OK(cudaMemset(d + k * B, k + 1, B));
		MPI_Bcast(d + k * B, B, MPI_BYTE, 0, MPI_COMM_WORLD);
	}
	CUDA_OK(cudaMemcpy(h, d, K * B, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < K * B; i++)
		if (h[i] != (unsigned char)(i / B + 1)) {
			fail("bcasts in a row", 0, B, i, h[i], (unsigned char)(i / B + 1));
			break;
		}
	cudaFree(d);
	free(h);
}

static void *thread_main(void *arg)
{
	MPI_Comm comm = *(MPI_Comm *)arg;
	CUDA_OK(cudaSetDevice(dev)); /* a new thread starts on device 0 */
	for (int k = 0; k < 3; k++)
		sweep(comm, 7 + k);
	return NULL;
}

int main(int argc, char **argv)
{
	int provided;
	dev = gpu_select();
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	sweep(MPI_COMM_WORLD, 0);
	bcasts();
	if (provided == MPI_THREAD_MULTIPLE) {
		MPI_Comm c[2];
		pthread_t t[2];
		MPI_Comm_dup(MPI_COMM_WORLD, &c[0]);
		MPI_Comm_dup(MPI_COMM_WORLD, &c[1]);
		for (int i = 0; i < 2; i++)
			pthread_create(&t[i], NULL, thread_main, &c[i]);
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		MPI_Comm_free(&c[0]);
		MPI_Comm_free(&c[1]);
	} else if (rank == 0) {
		fprintf(stderr, "edges: MPI_THREAD_MULTIPLE not provided: the two-communicator part skipped\n");
	}
	int total = 0;
	MPI_Reduce(&failures, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("edges: %d ranks, %d failures%s\n", size, total, provided == MPI_THREAD_MULTIPLE ? "" : " (single communicator only)");
	MPI_Finalize();
	return total != 0;
}
