/*
 * nopinned: device receives posted on MPI_COMM_SELF until pinned host
 * memory runs out (the CUDA stand-in's FAKECUDA_PINNED_MAX): a receive
 * collmux cannot stage fails with an error (MPI_ERRORS_RETURN) and a
 * message, and never reaches the MPI with its device buffer; the receives
 * posted before complete with their messages. Built with -DCOLLTEST_CUDA
 * against the stand-in (tests/fakecuda).
 */
#include <mpi.h>
#include <stdio.h>

#include "../gpu/gpu_common.h"

#define K 8
#define N 256

int main(int argc, char **argv)
{
	int *dev[K], host[N], posted = 0, refused = 0, failures = 0;
	MPI_Request q[K];
	gpu_select();
	MPI_Init(&argc, &argv);
	MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
	for (int k = 0; k < K; k++) {
		CUDA_OK(cudaMalloc((void **)&dev[k], sizeof host));
		if (MPI_Irecv(dev[k], N, MPI_INT, 0, k, MPI_COMM_SELF, &q[k]) == MPI_SUCCESS)
			posted++;
		else
			refused++, q[k] = MPI_REQUEST_NULL;
	}
	for (int k = 0; k < K; k++) {
		if (q[k] == MPI_REQUEST_NULL)
			continue;
		for (int i = 0; i < N; i++)
			host[i] = k * 1000 + i;
		MPI_Send(host, N, MPI_INT, 0, k, MPI_COMM_SELF);
	}
	MPI_Waitall(K, q, MPI_STATUSES_IGNORE);
	for (int k = 0; k < K; k++) {
		if (k >= posted)
			break;
		CUDA_OK(cudaMemcpy(host, dev[k], sizeof host, cudaMemcpyDeviceToHost));
		for (int i = 0; i < N; i++)
			if (host[i] != k * 1000 + i) {
				failures++;
				break;
			}
		CUDA_OK(cudaFree(dev[k]));
	}
	printf("nopinned: %d receives posted, %d refused, %d failures\n", posted, refused, failures);
	MPI_Finalize();
	return 0;
}
