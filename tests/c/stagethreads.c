/*
 * stagethreads: threads that come and go, each making blocking
 * point-to-point calls on device buffers (staged through pinned host
 * memory, one buffer per thread). Each round starts THREADS threads that
 * exchange messages with the same thread of the peer rank, then joins
 * them. Prints, per rank, how many pinned allocations the CUDA stand-in
 * (tests/fakecuda) counts as live after the rounds and after MPI_Finalize:
 * a thread's buffer must go when the thread does, and the last ones at
 * MPI_Finalize. Built with -DCOLLTEST_CUDA against the stand-in; on real
 * CUDA (no counter) it checks the messages only.
 */
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "../gpu/gpu_common.h"

#define ROUNDS 20
#define THREADS 4
#define N 1000

static int rank, size, failures;

static void *worker(void *arg)
{
	const int t = (int)(long)arg, peer = rank ^ 1;
	int host[N], *dev;
	if (cudaMalloc((void **)&dev, sizeof host) != cudaSuccess) {
		__atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	for (int i = 0; i < N; i++)
		host[i] = rank * 1000000 + t * 1000 + i;
	cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice);
	/* both ranks send and receive with one call: no order to agree on */
	MPI_Sendrecv_replace(dev, N, MPI_INT, peer, t, peer, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost);
	for (int i = 0; i < N; i++)
		if (host[i] != peer * 1000000 + t * 1000 + i) {
			__atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);
			break;
		}
	cudaFree(dev);
	return NULL;
}

int main(int argc, char **argv)
{
	int provided;
	gpu_select();
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (provided < MPI_THREAD_MULTIPLE || size != 2) {
		if (rank == 0)
			printf("stagethreads: skipped: needs MPI_THREAD_MULTIPLE and 2 ranks\n");
		MPI_Finalize();
		return 0;
	}
	long (*live)(void) = (long (*)(void))dlsym(RTLD_DEFAULT, "fakecuda_pinned_live");
	long most = 0;
	for (int r = 0; r < ROUNDS; r++) {
		pthread_t th[THREADS];
		for (int t = 0; t < THREADS; t++)
			pthread_create(&th[t], NULL, worker, (void *)(long)t);
		for (int t = 0; t < THREADS; t++)
			pthread_join(th[t], NULL);
		if (live && live() > most)
			most = live();
	}
	/* the main thread stages a call too: its buffer lives until MPI_Finalize */
	worker((void *)(long)THREADS);
	long before = live ? live() : -1;
	int total = 0;
	MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	MPI_Finalize();
	long after = live ? live() : -1;
	printf("stagethreads: rank %d: %d rounds of %d threads, pinned allocations live: at most %ld after a round, %ld before "
	       "MPI_Finalize, %ld after\n",
	       rank, ROUNDS, THREADS, most, before, after);
	if (rank == 0)
		printf("stagethreads: %d ranks, %d failures\n", size, total);
	return 0;
}
