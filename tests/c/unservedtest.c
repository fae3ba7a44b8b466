/*
 * unservedtest: calls with buffers that collmux does not serve on device
 * memory (capi/unserved.tab), under MPI_ERRORS_RETURN: packing, a window
 * on the buffer, a put from it into a host window and a get into it,
 * MPI-IO reads and writes, a buffered-send buffer. Rank 0 prints each
 * call's error class and what the calls left behind.
 *
 *   unservedtest FILE         the calls; FILE is a scratch file for MPI-IO
 *   unservedtest FILE twins [overflow]
 *                             host buffers through functions an MPI may
 *                             lack (MPI_Put_c, MPI_Pack_c, MPI_Isendrecv),
 *                             looked up with dlsym: "absent" where none is;
 *                             overflow: also MPI_Pack_c with 2^40 elements
 *
 * On host buffers the output is the same natively and under collmux. With
 * -DCOLLTEST_CUDA the buffers are in device memory: an MPI without CUDA
 * support would fault on them; under collmux each call must fail with
 * MPI_ERR_OTHER (printed first, as err_other) and nothing else change.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#ifdef COLLTEST_CUDA
#include <cuda_runtime.h>
#endif

#define N 4

#include "testlib.h"

static void show(const char *what, int rc) { show_rc(what, 22, rc); }

static void show_ints(const char *what, const int *v, int n)
{
	if (rank != 0)
		return;
	printf("%-22s", what);
	for (int i = 0; i < n; i++)
		printf(" %d", v[i]);
	printf("\n");
}

/* buf holds N ints rank*10+i: on the host, or a device copy of them */
static int *buf_new(int *host)
{
	for (int i = 0; i < N; i++)
		host[i] = rank * 10 + i;
#ifdef COLLTEST_CUDA
	int *d = NULL;
	cudaMalloc((void **)&d, N * sizeof(int));
	cudaMemcpy(d, host, N * sizeof(int), cudaMemcpyHostToDevice);
	return d;
#else
	return host;
#endif
}

static void buf_get(int *host, const int *buf)
{
#ifdef COLLTEST_CUDA
	cudaMemcpy(host, buf, N * sizeof(int), cudaMemcpyDeviceToHost);
#else
	memmove(host, buf, N * sizeof(int));
#endif
}

static void calls(const char *path)
{
	int hbuf[N], *buf = buf_new(hbuf), back[N];
	char packed[64];
	int pos = 0;

	/* packing */
	show("pack", MPI_Pack(buf, N, MPI_INT, packed, sizeof packed, &pos, MPI_COMM_WORLD));
	if (rank == 0)
		printf("pack_position          %d\n", pos);
	int src[N] = {7, 8, 9, 10};
	pos = 0;
	MPI_Pack(src, N, MPI_INT, packed, sizeof packed, &pos, MPI_COMM_WORLD);
	pos = 0;
	show("unpack", MPI_Unpack(packed, sizeof packed, &pos, buf, N, MPI_INT, MPI_COMM_WORLD));
	buf_get(back, buf);
	show_ints("after unpack", back, N);

	/* one-sided: a window on the buffer, then a host window */
	MPI_Win w = MPI_WIN_NULL;
	int rc = MPI_Win_create(buf, N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &w);
	show("win_create", rc);
	if (rc == MPI_SUCCESS)
		MPI_Win_free(&w);
	int hwin[N] = {-1, -1, -1, -1};
	MPI_Win hw;
	MPI_Win_create(hwin, N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &hw);
	MPI_Win_set_errhandler(hw, MPI_ERRORS_RETURN);
	MPI_Win_fence(0, hw);
	rc = MPI_Put(buf, N, MPI_INT, (rank + 1) % size, 0, N, MPI_INT, hw);
	MPI_Win_fence(0, hw);
	show("put", rc);
	show_ints("window after put", hwin, N);
	hwin[0] = 100 + rank;
	MPI_Win_fence(0, hw);
	rc = MPI_Get(buf, 1, MPI_INT, (rank + 1) % size, 0, 1, MPI_INT, hw);
	MPI_Win_fence(0, hw);
	show("get", rc);
	buf_get(back, buf);
	show_ints("after get", back, N);
	MPI_Win_free(&hw);

	/* MPI-IO: every rank writes its block of the file, then reads it all */
	MPI_File fh;
	rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
	show("file_open", rc);
	if (rc != MPI_SUCCESS)
		return;
	MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
	MPI_File_set_size(fh, 0);
	MPI_Status st;
	show("file_write_at", MPI_File_write_at(fh, (MPI_Offset)rank * N * sizeof(int), buf, N, MPI_INT, &st));
	MPI_Request req = MPI_REQUEST_NULL;
	show("file_iwrite_at", MPI_File_iwrite_at(fh, (MPI_Offset)(size + rank) * N * sizeof(int), buf, N, MPI_INT, &req));
	show("wait", MPI_Wait(&req, MPI_STATUS_IGNORE));
	show("file_write_all", MPI_File_write_at_all(fh, (MPI_Offset)(2 * size + rank) * N * sizeof(int), buf, N, MPI_INT, &st));
	MPI_File_sync(fh);
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_File_sync(fh);
	MPI_Offset bytes = -1;
	MPI_File_get_size(fh, &bytes);
	if (rank == 0)
		printf("file size              %lld\n", (long long)bytes);
	show("file_read_at", MPI_File_read_at(fh, 0, buf, N, MPI_INT, &st));
	show("file_iread_at", MPI_File_iread_at(fh, 0, buf, N, MPI_INT, &req));
	show("wait", MPI_Wait(&req, MPI_STATUS_IGNORE));
	buf_get(back, buf);
	show_ints("after file reads", back, N);
	MPI_File_close(&fh);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		MPI_File_delete(path, MPI_INFO_NULL);

	/* the buffer of buffered sends */
	int bsize = 4096;
	char hb[4096], *bbuf = hb;
#ifdef COLLTEST_CUDA
	cudaMalloc((void **)&bbuf, bsize);
#endif
	rc = MPI_Buffer_attach(bbuf, bsize);
	show("buffer_attach", rc);
	if (rc == MPI_SUCCESS) {
		int to = (rank + 1) % size, from = (rank + size - 1) % size, got = -1;
		MPI_Bsend(&hbuf[0], 1, MPI_INT, to, 3, MPI_COMM_WORLD);
		MPI_Recv(&got, 1, MPI_INT, from, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		if (rank == 0)
			printf("bsend got              %d\n", got);
		MPI_Buffer_detach(&bbuf, &bsize);
	}
}

/* host buffers through functions an MPI may lack, looked up by name */
static void twins(int overflow)
{
	int (*put_c)(const void *, MPI_Count, MPI_Datatype, int, MPI_Aint, MPI_Count, MPI_Datatype, MPI_Win) =
	    (int (*)(const void *, MPI_Count, MPI_Datatype, int, MPI_Aint, MPI_Count, MPI_Datatype, MPI_Win))dlsym(RTLD_DEFAULT, "MPI_Put_c");
	int (*pack_c)(const void *, MPI_Count, MPI_Datatype, void *, MPI_Count, MPI_Count *, MPI_Comm) =
	    (int (*)(const void *, MPI_Count, MPI_Datatype, void *, MPI_Count, MPI_Count *, MPI_Comm))dlsym(RTLD_DEFAULT, "MPI_Pack_c");
	int (*isendrecv)(const void *, int, MPI_Datatype, int, int, void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *) =
	    (int (*)(const void *, int, MPI_Datatype, int, int, void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *))dlsym(
		RTLD_DEFAULT, "MPI_Isendrecv");
	int v[N], hwin[N] = {-1, -1, -1, -1};
	for (int i = 0; i < N; i++)
		v[i] = rank * 10 + i;

	MPI_Win hw;
	MPI_Win_create(hwin, N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &hw);
	MPI_Win_set_errhandler(hw, MPI_ERRORS_RETURN);
	MPI_Win_fence(0, hw);
	int rc = put_c ? put_c(v, N, MPI_INT, (rank + 1) % size, 0, N, MPI_INT, hw) : MPI_SUCCESS;
	MPI_Win_fence(0, hw);
	if (put_c) {
		show("MPI_Put_c", rc);
		show_ints("window after put_c", hwin, N);
	} else if (rank == 0) {
		printf("MPI_Put_c absent\n");
	}
	MPI_Win_free(&hw);

	if (pack_c) {
		char packed[64];
		MPI_Count pos = 4;
		show("MPI_Pack_c", pack_c(v, N, MPI_INT, packed, sizeof packed, &pos, MPI_COMM_WORLD));
		if (rank == 0)
			printf("pack_c position        %lld\n", (long long)pos);
		/* a count no int holds, where collmux narrows to MPI_Pack (an MPI
		 * with MPI_Pack_c would read past the buffer) */
		pos = 0;
		if (overflow)
			show("MPI_Pack_c overflow", pack_c(v, (MPI_Count)1 << 40, MPI_INT, packed, sizeof packed, &pos, MPI_COMM_WORLD));
	} else if (rank == 0) {
		printf("MPI_Pack_c absent\n");
	}

	if (isendrecv) {
		int got = -1;
		MPI_Request req = MPI_REQUEST_NULL;
		int to = (rank + 1) % size, from = (rank + size - 1) % size;
		show("MPI_Isendrecv", isendrecv(&v[0], 1, MPI_INT, to, 5, &got, 1, MPI_INT, from, 5, MPI_COMM_WORLD, &req));
		show("wait", MPI_Wait(&req, MPI_STATUS_IGNORE));
		if (rank == 0)
			printf("isendrecv got          %d\n", got);
	} else if (rank == 0) {
		printf("MPI_Isendrecv absent\n");
	}
}

int main(int argc, char **argv)
{
#ifdef COLLTEST_CUDA
	cudaSetDevice(0);
#endif
	test_init(&argc, &argv, 0, 2);
	if (argc < 2) {
		if (rank == 0)
			fprintf(stderr, "usage: unservedtest FILE [twins]\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	int cls = -1;
	MPI_Error_class(MPI_ERR_OTHER, &cls);
	if (rank == 0)
		printf("err_other=%d err_count=%d\n", cls, MPI_ERR_COUNT);
	if (argc > 2 && strcmp(argv[2], "twins") == 0)
		twins(argc > 3 && strcmp(argv[3], "overflow") == 0);
	else
		calls(argv[1]);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("unservedtest: %d ranks, done\n", size);
	MPI_Finalize();
	return 0;
}
