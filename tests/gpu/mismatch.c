/*
 * mismatch: rank 0 passes a host buffer and the other ranks a device buffer
 * to the same MPI_Allreduce, which breaks the rule collmux relies on. Under
 * COLLMUX_CHECK=1 collmux must report it, naming the ranks, and fail the
 * call instead of hanging.
 */
#include <mpi.h>

#include "gpu_common.h"

int main(int argc, char **argv)
{
	gpu_select();
	int rank;
	float host[16] = {0}, *dev;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	CUDA_OK(cudaMalloc((void **)&dev, sizeof host));
	CUDA_OK(cudaMemset(dev, 0, sizeof host));
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	float *buf = rank == 0 ? host : dev;
	int rc = MPI_Allreduce(MPI_IN_PLACE, buf, 16, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	printf("mismatch: rank %d: MPI_Allreduce returned %s\n", rank, rc == MPI_SUCCESS ? "success" : "an error");
	MPI_Finalize();
	return rc == MPI_SUCCESS ? 0 : 1;
}
