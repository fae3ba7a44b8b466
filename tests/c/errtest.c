/*
 * errtest: bad arguments under MPI_ERRORS_RETURN. Prints the error class
 * each call returns; run with and without collmux, the output must match.
 * With -DCOLLTEST_CUDA the buffers are in device memory: collmux must hand
 * the erroneous calls to MPI for its error, never run them on a device
 * path (where a bad root would index past the ranks' workspaces).
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#ifdef COLLTEST_CUDA
#include <cuda_runtime.h>
#endif

#include "testlib.h"

static void show(const char *what, int rc) { show_rc(what, 36, rc); }

int main(int argc, char **argv)
{
	int hx = 1, hy = 0, *x = &hx, *y = &hy, hbuf[8] = {0}, *buf = hbuf;
#ifdef COLLTEST_CUDA
	cudaSetDevice(0);
	cudaMalloc((void **)&x, sizeof hx), cudaMalloc((void **)&y, sizeof hy), cudaMalloc((void **)&buf, sizeof hbuf);
	cudaMemcpy(x, &hx, sizeof hx, cudaMemcpyHostToDevice), cudaMemcpy(buf, hbuf, sizeof hbuf, cudaMemcpyHostToDevice);
#endif
	test_init(&argc, &argv, 0, 2);
	MPI_Datatype pair;
	MPI_Type_contiguous(2, MPI_INT, &pair);
	MPI_Type_commit(&pair);
	if (rank == 0) {
		/* every rank gets the same error before any communication, so
		 * rank 0 alone may make these calls without a hang */
		show("bcast root=size", MPI_Bcast(buf, 1, MPI_INT, size, MPI_COMM_WORLD));
		show("reduce root=-5", MPI_Reduce(x, y, 1, MPI_INT, MPI_SUM, -5, MPI_COMM_WORLD));
#ifndef ERRTEST_DATATYPE_NULL_ABORTS
		show("allreduce datatype_null", MPI_Allreduce(x, y, 1, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD));
#else /* MPICH 5.0.2's libmpi_abi aborts on it natively (assertion dt_ptr, mpir_datatype.h:800) */
		puts("allreduce datatype_null              not made: the MPI aborts");
#endif
		show("allreduce op_null", MPI_Allreduce(x, y, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD));
		/* predefined ops are defined on predefined datatypes only, and
		 * MAXLOC on pairs (Open MPI and MPICH both check this first;
		 * Open MPI takes MPI_SUM on MPI_BYTE, MPICH does not) */
		show("allreduce derived type, MPI_SUM", MPI_Allreduce(buf, buf + 4, 1, pair, MPI_SUM, MPI_COMM_WORLD));
		show("reduce MPI_INT, MPI_MAXLOC", MPI_Reduce(x, y, 1, MPI_INT, MPI_MAXLOC, 0, MPI_COMM_WORLD));
		show("allreduce complex, MPI_MAX", MPI_Allreduce(buf, buf + 4, 1, MPI_C_FLOAT_COMPLEX, MPI_MAX, MPI_COMM_WORLD));
		show("allreduce comm_null", MPI_Allreduce(x, y, 1, MPI_INT, MPI_SUM, MPI_COMM_NULL));
		show("allreduce recvbuf=in_place", MPI_Allreduce(x, MPI_IN_PLACE, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
		show("gather root=size", MPI_Gather(x, 1, MPI_INT, buf, 1, MPI_INT, size, MPI_COMM_WORLD));
		show("alltoall datatype_null", MPI_Alltoall(buf, 1, MPI_DATATYPE_NULL, buf, 1, MPI_INT, MPI_COMM_WORLD));
		show("barrier comm_null", MPI_Barrier(MPI_COMM_NULL));
	}
	show("allreduce ok", MPI_Allreduce(x, y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
#ifdef COLLTEST_CUDA
	cudaMemcpy(&hy, y, sizeof hy, cudaMemcpyDeviceToHost);
#endif
	if (rank == 0)
		printf("sum=%d\n", hy);
	MPI_Type_free(&pair);
	MPI_Finalize();
	return 0;
}
