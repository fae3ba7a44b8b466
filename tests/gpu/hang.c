/*
 * hang: every rank makes one device all-reduce (fused or NCCL, as
 * COLLMUX_RULES says), then rank 1 skips the second. With COLLMUX_TIMEOUT
 * set, collmux must turn the second call into an error on the other ranks,
 * naming rank 1, instead of hanging: the fused kernel's own watchdog, or,
 * with the argument "multiple" (MPI_THREAD_MULTIPLE), the arrival gate.
 * With "nonblocking" the second call is MPI_Iallreduce and MPI_Wait: its
 * request must complete with an error within the timeout.
 */
#include <mpi.h>
#include <string.h>
#include <unistd.h>

#include "gpu_common.h"

int main(int argc, char **argv)
{
	gpu_select();
	int rank;
	float *dev;
	int provided;
	MPI_Init_thread(&argc, &argv, argc > 1 && strcmp(argv[1], "multiple") == 0 ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	CUDA_OK(cudaMalloc((void **)&dev, 64 * sizeof(float)));
	CUDA_OK(cudaMemset(dev, 0, 64 * sizeof(float)));
	int rc = MPI_Allreduce(MPI_IN_PLACE, dev, 64, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	printf("hang: rank %d: first allreduce %s\n", rank, rc == MPI_SUCCESS ? "ok" : "failed");
	if (rank != 1 && argc > 1 && strcmp(argv[1], "nonblocking") == 0) {
		MPI_Request req;
		rc = MPI_Iallreduce(MPI_IN_PLACE, dev, 64, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
		if (rc == MPI_SUCCESS)
			rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
		printf("hang: rank %d: second allreduce returned %s\n", rank, rc == MPI_SUCCESS ? "success" : "an error");
	} else if (rank != 1) {
		rc = MPI_Allreduce(MPI_IN_PLACE, dev, 64, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		printf("hang: rank %d: second allreduce returned %s\n", rank, rc == MPI_SUCCESS ? "success" : "an error");
	}
	fflush(stdout);
	if (rank == 1)
		sleep(15); /* outlive the others' watchdog: mpirun ends the job when a rank exits */
	/* the communicator's state is now undefined: leave without MPI_Finalize */
	_exit(rank != 1 && rc == MPI_SUCCESS ? 1 : 0);
}
