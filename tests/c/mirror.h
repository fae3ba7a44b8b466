/*
 * mirror.h: device mirrors of a test program's buffers, with
 * -DCOLLTEST_CUDA (colltest.c, nbrtest.c, and nbtest.c and p2ptest.c
 * through reqtest.h). Every buffer from mirror_alloc has a zeroed device
 * copy (cudaMalloc); mirror_copy copies every live buffer to its mirror or
 * back, mirror_copy_one the one holding a pointer, and D maps a host
 * pointer into its mirror, so that a program's checks and digests, written
 * for host buffers, hold for the device buffers its MPI calls are given.
 * Threads may allocate and map at once.
 */
#ifndef MIRROR_H
#define MIRROR_H
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "../gpu/gpu_common.h"

#define NTRACK 256
static struct {
	char *h, *d;
	size_t n;
} track[NTRACK];
static pthread_mutex_t track_mu = PTHREAD_MUTEX_INITIALIZER;

static void *mirror_alloc(size_t n)
{
	n = n > 0 ? n : 1;
	pthread_mutex_lock(&track_mu);
	for (int i = 0; i < NTRACK; i++)
		if (!track[i].h) {
			track[i].h = calloc(1, n);
			track[i].n = n;
			if (cudaMalloc((void **)&track[i].d, n) != cudaSuccess) {
				fprintf(stderr, "cudaMalloc(%zu) failed\n", n);
				MPI_Abort(MPI_COMM_WORLD, 2);
			}
			cudaMemset(track[i].d, 0, n);
			pthread_mutex_unlock(&track_mu);
			return track[i].h;
		}
	fprintf(stderr, "too many live buffers (mirror.h holds %d)\n", NTRACK);
	MPI_Abort(MPI_COMM_WORLD, 2);
	return NULL;
}

static void mirror_free(void *p)
{
	pthread_mutex_lock(&track_mu);
	for (int i = 0; i < NTRACK; i++)
		if (p && track[i].h == p) {
			free(track[i].h);
			cudaFree(track[i].d);
			track[i].h = NULL;
		}
	pthread_mutex_unlock(&track_mu);
}

/* the entry holding p, -1 for none (MPI_IN_PLACE, NULL, host-only memory); under track_mu */
static int mirror_find(const void *p)
{
	for (int i = 0; i < NTRACK; i++)
		if (track[i].h && (const char *)p >= track[i].h && (const char *)p < track[i].h + track[i].n)
			return i;
	return -1;
}

static void *D(const void *p)
{
	pthread_mutex_lock(&track_mu);
	int i = mirror_find(p);
	void *d = i < 0 ? (void *)p : track[i].d + ((const char *)p - track[i].h);
	pthread_mutex_unlock(&track_mu);
	return d;
}

static void mirror_copy_one(const void *p, int to_device)
{
	pthread_mutex_lock(&track_mu);
	int i = mirror_find(p);
	char *h = i < 0 ? NULL : track[i].h, *d = i < 0 ? NULL : track[i].d;
	size_t n = i < 0 ? 0 : track[i].n;
	pthread_mutex_unlock(&track_mu);
	if (h)
		CUDA_OK(cudaMemcpy(to_device ? (void *)d : h, to_device ? (void *)h : d, n,
				   to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost));
}

static void mirror_copy(int to_device)
{
	pthread_mutex_lock(&track_mu);
	for (int i = 0; i < NTRACK; i++)
		if (track[i].h)
			CUDA_OK(cudaMemcpy(to_device ? (void *)track[i].d : track[i].h, to_device ? (void *)track[i].h : track[i].d,
					   track[i].n, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost));
	pthread_mutex_unlock(&track_mu);
}
#endif
