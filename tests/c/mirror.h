/*
 * mirror.h: device mirrors of a test program's buffers (colltest.c,
 * nbrtest.c), with -DCOLLTEST_CUDA. Every buffer from mirror_alloc has a
 * device copy (cudaMalloc); mirror_copy copies every live buffer to its
 * mirror or back, and D maps a host pointer into its mirror, so that a
 * program's checks and digests, written for host buffers, hold for the
 * device buffers its MPI calls are given.
 */
#ifndef MIRROR_H
#define MIRROR_H
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "../gpu/gpu_common.h"

#define NTRACK 16
static struct {
	char *h, *d;
	size_t n;
} track[NTRACK];

static void *mirror_alloc(size_t n)
{
	n = n > 0 ? n : 1;
	for (int i = 0; i < NTRACK; i++)
		if (!track[i].h) {
			track[i].h = calloc(1, n);
			track[i].n = n;
			if (cudaMalloc((void **)&track[i].d, n) != cudaSuccess) {
				fprintf(stderr, "cudaMalloc(%zu) failed\n", n);
				MPI_Abort(MPI_COMM_WORLD, 2);
			}
			return track[i].h;
		}
	fprintf(stderr, "too many live buffers (mirror.h holds %d)\n", NTRACK);
	MPI_Abort(MPI_COMM_WORLD, 2);
	return NULL;
}

static void mirror_free(void *p)
{
	for (int i = 0; i < NTRACK; i++)
		if (p && track[i].h == p) {
			free(track[i].h);
			cudaFree(track[i].d);
			track[i].h = NULL;
		}
}

static void *D(const void *p)
{
	for (int i = 0; i < NTRACK; i++)
		if (track[i].h && (const char *)p >= track[i].h && (const char *)p < track[i].h + track[i].n)
			return track[i].d + ((const char *)p - track[i].h);
	return (void *)p; /* MPI_IN_PLACE, NULL */
}

static void mirror_copy(int to_device)
{
	for (int i = 0; i < NTRACK; i++)
		if (track[i].h)
			cudaMemcpy(to_device ? (void *)track[i].d : track[i].h, to_device ? (void *)track[i].h : track[i].d, track[i].n,
				   to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
}
#endif
