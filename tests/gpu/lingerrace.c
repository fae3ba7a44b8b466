/*
 * lingerrace: a nonblocking device all-reduce rung just as rank 0's
 * resident kernel stops for want of jobs (COLLMUX_FUSED_LINGER) must still
 * run, although rank 0 then waits in host MPI, not in collmux, until its
 * peers finish the all-reduce. Rank 0 rings each job at a time after the
 * previous one finished swept in 0.1 us steps over 100 us, past the linger
 * time (run with COLLMUX_FUSED_LINGER=30: the kernel reads its clock every
 * 32 looks at the doorbell, so it stops some tens of microseconds after
 * the linger time), so that some jobs arrive within the PCIe round trip in
 * which the kernel decides to stop. Were such a job
 * missed by both the kernel and the host (fused/kernels.cu, take_job), the
 * peers would wait in their blocking all-reduce for rank 0 until their
 * watchdog (COLLMUX_TIMEOUT) failed it. Every result is checked.
 * Prints "lingerrace: N ranks, I jobs, F failures".
 */
#include <mpi.h>
#include <time.h>

#include "gpu_common.h"

#define JOBS 20000

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
	int rank, size, failures = 0, i;
	gpu_mpi_start(&argc, &argv, &rank, &size);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	double done = now_us(); /* rank 0: when its last job finished */
	int *d, h[2];
	CUDA_OK(cudaMalloc((void **)&d, 4 * sizeof(int)));
	for (i = 0; i < JOBS; i++) {
		h[0] = rank + i, h[1] = rank * i;
		CUDA_OK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
		int rc, bad = 0, stop = 0;
		if (rank == 0) {
			const double t = done + (i % 1000) * 0.1;
			while (now_us() < t)
				;
			MPI_Request req;
			rc = MPI_Iallreduce(d, d + 2, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
			for (int p = 1; p < size; p++) { /* in host MPI: collmux is not called until MPI_Wait */
				MPI_Recv(&bad, 1, MPI_INT, p, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				stop |= bad;
			}
			if (rc == MPI_SUCCESS)
				rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
			done = now_us();
		} else {
			rc = MPI_Allreduce(d, d + 2, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
		}
		CUDA_OK(cudaMemcpy(h, d + 2, sizeof h, cudaMemcpyDeviceToHost));
		/* sum over ranks r of r + i and r * i */
		bad = rc != MPI_SUCCESS || h[0] != size * (size - 1) / 2 + size * i || h[1] != size * (size - 1) / 2 * i;
		if (bad)
			fprintf(stderr, "lingerrace: rank %d, job %d: %s (got %d %d)\n", rank, i, rc != MPI_SUCCESS ? "failed" : "wrong result", h[0], h[1]);
		if (rank == 0) {
			stop |= bad;
			for (int p = 1; p < size; p++)
				MPI_Send(&stop, 1, MPI_INT, p, 1, MPI_COMM_WORLD);
		} else {
			MPI_Send(&bad, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
			MPI_Recv(&stop, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		}
		failures += bad;
		if (stop) {
			i++;
			break;
		}
	}
	int all = 0;
	MPI_Reduce(&failures, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("lingerrace: %d ranks, %d jobs, %d failures\n", size, i, all);
	CUDA_OK(cudaFree(d));
	MPI_Finalize();
	return all != 0;
}
