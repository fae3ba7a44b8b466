/*
 * killrank: fault injection. Every rank runs device all-reduces back to
 * back (fused or NCCL, as COLLMUX_RULES says); one second after its first
 * call, rank 1 is killed (SIGKILL, raised by a second thread while its
 * main thread is in the loop's calls, so the kill lands in the middle of
 * one). Every other rank must get an error from its call within
 * COLLMUX_TIMEOUT plus a few seconds, and no hang; collmux's message on
 * stderr names the missing rank where it can tell (the script checks).
 * The buffer sits between two guard regions that must come out intact:
 * nothing is written outside the program's buffers.
 *
 * The argument picks the thread level: "single" (MPI_THREAD_SINGLE) or
 * "multiple" (MPI_THREAD_MULTIPLE, where device calls pass the arrival
 * gate). Run under Open MPI with --mca orte_abort_on_non_zero_status 0, or
 * mpirun ends the job as soon as rank 1 dies.
 */
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu_common.h"

#define N (1 << 20) /* floats: 4 MiB, within the fused path's limit */
#define GUARD 4096  /* floats each side */
#define VICTIM 1

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *killer(void *arg)
{
	(void)arg;
	sleep(1);
	raise(SIGKILL);
	return NULL;
}

static int timeout_s(void)
{
	const char *t = getenv("COLLMUX_TIMEOUT");
	return t ? atoi(t) : 1800;
}

int main(int argc, char **argv)
{
	gpu_select();
	int rank, size, provided;
	const int multiple = argc > 1 && strcmp(argv[1], "multiple") == 0;
	MPI_Init_thread(&argc, &argv, multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	if (size < 2) {
		printf("killrank: skipped: needs 2 ranks\n");
		MPI_Finalize();
		return 0;
	}
	const size_t total = (size_t)N + 2 * GUARD;
	float *dev, *host = malloc(total * sizeof(float));
	CUDA_OK(cudaMalloc((void **)&dev, total * sizeof(float)));
	for (size_t i = 0; i < total; i++)
		host[i] = i < GUARD || i >= GUARD + (size_t)N ? -7.0f : 1.0f;
	CUDA_OK(cudaMemcpy(dev, host, total * sizeof(float), cudaMemcpyHostToDevice));
	float *buf = dev + GUARD;
	/* the first call sets the path up (compiling kernels, NCCL's set-up):
	 * the clock starts after it */
	int rc = MPI_Allreduce(MPI_IN_PLACE, buf, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS) {
		printf("killrank: rank %d: the first call failed\n", rank);
		fflush(stdout);
		_exit(1);
	}
	if (rank == VICTIM) {
		printf("killrank: rank %d: killed in 1 s\n", rank);
		fflush(stdout);
		pthread_t t;
		pthread_create(&t, NULL, killer, NULL);
	}
	const double t0 = now(), limit = timeout_s() + 5.0;
	double start = t0;
	long calls = 0;
	/* survivors: until a call fails, or (wrongly) long after the kill */
	while (rc == MPI_SUCCESS && now() - t0 < limit + 30) {
		start = now();
		rc = MPI_Allreduce(MPI_IN_PLACE, buf, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		calls++;
	}
	const double took = now() - start;
	char err[MPI_MAX_ERROR_STRING] = "";
	int len = 0;
	if (rc != MPI_SUCCESS)
		MPI_Error_string(rc, err, &len);
	/* the guards, if the device can still be read */
	int bad = 0;
	cudaError_t ce = cudaMemcpy(host, dev, total * sizeof(float), cudaMemcpyDeviceToHost);
	for (size_t i = 0; ce == cudaSuccess && i < total; i++)
		if ((i < GUARD || i >= GUARD + (size_t)N) && host[i] != -7.0f)
			bad++;
	printf("killrank: rank %d: call %ld %s after %.2f s (about %.2f s since the kill), limit %.0f s: %s; guards %s\n", rank, calls,
	       rc == MPI_SUCCESS ? "never failed" : "failed", took, now() - t0 - 1.0, limit, rc == MPI_SUCCESS ? "-" : err,
	       ce != cudaSuccess ? "unreadable (CUDA context lost)" : bad ? "OVERWRITTEN" : "intact");
	fflush(stdout);
	/* a peer is gone: MPI_Finalize would wait for it */
	_exit(rc != MPI_SUCCESS && took <= limit && !bad ? 0 : 1);
}
