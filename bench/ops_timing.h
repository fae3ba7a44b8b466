/*
 * The fused operations' benchmarks' clock (bench/fusedops.c,
 * bench/embedding.c): how long one call of a contender takes, in µs, as
 * the median of `rounds` rounds of `iters` calls queued back to back on the
 * GPU, each round's time the slowest rank's, after `warm` calls.
 */
#ifndef OPS_TIMING_H
#define OPS_TIMING_H
#include <cuda_runtime.h>
#include <mpi.h>
#include <time.h>

enum { OPS_MAX_ROUNDS = 31 };

static double ops_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* call(c, p) queues one call of contender c on problem p */
static double ops_median_us(void (*call)(char, const void *), char c, const void *p, int warm, int iters, int rounds)
{
	double r[OPS_MAX_ROUNDS];
	if (rounds > OPS_MAX_ROUNDS)
		rounds = OPS_MAX_ROUNDS;
	for (int i = 0; i < warm; i++)
		call(c, p);
	cudaDeviceSynchronize();
	for (int k = 0; k < rounds; k++) {
		MPI_Barrier(MPI_COMM_WORLD);
		const double t0 = ops_now();
		for (int i = 0; i < iters; i++)
			call(c, p);
		cudaDeviceSynchronize();
		r[k] = (ops_now() - t0) / iters * 1e6;
		MPI_Allreduce(MPI_IN_PLACE, &r[k], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	}
	for (int i = 1; i < rounds; i++) /* insertion sort */
		for (int j = i; j > 0 && r[j] < r[j - 1]; j--) {
			const double t = r[j];
			r[j] = r[j - 1], r[j - 1] = t;
		}
	return r[rounds / 2];
}
#endif
