/*
 * reqerr: a device request whose work fails reports it as MPI reports a
 * failed request. Run on two ranks under collmux with the CUDA stand-in
 * told to fail every copy to the device of FAIL bytes
 * (FAKECUDA_FAIL_TO_DEVICE=4004), so that the data of each receive and
 * collective below of N ints cannot reach the device: MPI_Wait returns
 * an error of class MPI_ERR_OTHER, as do MPI_Waitany (with the failed
 * request's index) and MPI_Request_get_status (and the MPI_Wait after
 * it); MPI_Waitall and MPI_Testsome return MPI_ERR_IN_STATUS with that
 * error in the failed request's MPI_ERROR and MPI_SUCCESS in the others'
 * (whose data arrive); the communicator's error handler is called once
 * per call, with the code the call returns; a persistent call fails at
 * every start and can be started again; a request of N + 1 ints does not
 * fail; a receive whose communicator was freed before it completed fails
 * without a handler called. Built with -DCOLLTEST_CUDA against the
 * stand-in. Prints "reqerr: 2 ranks, F failures".
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>

#include "../gpu/gpu_common.h"
#include "testlib.h"

#define N 1001 /* ints: 4004 bytes, the size whose copies fail */

static int calls, last_code;

static void on_error(MPI_Comm *comm, int *code, ...)
{
	(void)comm;
	calls++, last_code = *code;
}

static int class_of(int code)
{
	int c = -1;
	MPI_Error_class(code, &c);
	return c;
}

/* the handler was called once since the last look, with code */
static void handled(const char *what, int code)
{
	CHECK(calls == 1 && last_code == code, "%s: error handler called %d times, last with %d; want once with %d", what, calls, last_code, code);
	calls = 0;
}

int main(int argc, char **argv)
{
	MPI_Comm comm;
	MPI_Errhandler eh;
	gpu_mpi_start(&argc, &argv, &rank, &size);
	MPI_Comm_dup(MPI_COMM_WORLD, &comm);
	MPI_Comm_create_errhandler(on_error, &eh);
	MPI_Comm_set_errhandler(comm, eh);
	int *dev, *dev2, host[N + 1];
	CUDA_OK(cudaMalloc((void **)&dev, sizeof host));
	CUDA_OK(cudaMalloc((void **)&dev2, sizeof host));
	for (int i = 0; i <= N; i++)
		host[i] = i;
	const int peer = 1 - rank;

	/* MPI_Wait on a receive whose data cannot reach the device */
	MPI_Request r[2];
	MPI_Status st[2];
	if (rank == 0) {
		MPI_Irecv(dev, N, MPI_INT, peer, 1, comm, &r[0]);
		int rc = MPI_Wait(&r[0], &st[0]);
		CHECK(class_of(rc) == MPI_ERR_OTHER && r[0] == MPI_REQUEST_NULL, "Wait: returned %d (class %d), request %s", rc, class_of(rc),
		      r[0] == MPI_REQUEST_NULL ? "freed" : "kept");
		handled("Wait", rc);
	} else {
		MPI_Send(host, N, MPI_INT, peer, 1, comm);
	}

	/* MPI_Waitall and MPI_Testsome: the failed receive beside one that
	 * succeeds, in both orders */
	for (int order = 0; order < 2; order++)
		for (int testsome = 0; testsome < 2; testsome++) {
			if (rank == 1) {
				MPI_Send(host, N, MPI_INT, peer, 2, comm);
				MPI_Send(host, N + 1, MPI_INT, peer, 3, comm);
				continue;
			}
			const int bad = order, good = 1 - order;
			for (int k = 0; k < 2; k++)
				st[k].MPI_ERROR = -7, st[k].MPI_SOURCE = -7;
			MPI_Irecv(dev, N, MPI_INT, peer, 2, comm, &r[bad]);
			MPI_Irecv(dev2, N + 1, MPI_INT, peer, 3, comm, &r[good]);
			int rc, seen = 0, err_at = -1, out, idx[2];
			if (!testsome) {
				rc = MPI_Waitall(2, r, st);
				seen = 2, err_at = rc == MPI_ERR_IN_STATUS ? 0 : -2;
			} else {
				while (seen < 2) {
					out = MPI_UNDEFINED;
					rc = MPI_Testsome(2, r, &out, idx, st);
					if (out == MPI_UNDEFINED || (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS))
						break;
					for (int k = 0; k < out; k++)
						CHECK(st[k].MPI_SOURCE == peer, "Testsome: status %d has source %d", k, st[k].MPI_SOURCE);
					if (rc == MPI_ERR_IN_STATUS)
						for (int k = 0; k < out; k++)
							if (idx[k] == bad)
								err_at = k;
					if (rc == MPI_ERR_IN_STATUS)
						for (int k = 0; k < out; k++)
							CHECK(class_of(st[k].MPI_ERROR) == (idx[k] == bad ? MPI_ERR_OTHER : MPI_SUCCESS),
							      "Testsome: request %d's MPI_ERROR %d", idx[k], st[k].MPI_ERROR);
					else
						CHECK(rc == MPI_SUCCESS && (out == 0 || idx[0] == good), "Testsome returned %d for request %d", rc, out ? idx[0] : -1);
					seen += out;
				}
			}
			if (!testsome) {
				CHECK(rc == MPI_ERR_IN_STATUS, "Waitall returned %d, want MPI_ERR_IN_STATUS", rc);
				CHECK(class_of(st[bad].MPI_ERROR) == MPI_ERR_OTHER && st[good].MPI_ERROR == MPI_SUCCESS,
				      "Waitall: MPI_ERROR %d (failed) and %d (succeeded)", st[bad].MPI_ERROR, st[good].MPI_ERROR);
				CHECK(st[good].MPI_SOURCE == peer && st[bad].MPI_SOURCE == peer, "Waitall: sources %d %d", st[0].MPI_SOURCE, st[1].MPI_SOURCE);
			}
			CHECK(seen == 2 && err_at >= 0, "%s: %d completed, failure %s", testsome ? "Testsome" : "Waitall", seen, err_at >= 0 ? "reported" : "not reported");
			handled(testsome ? "Testsome" : "Waitall", MPI_ERR_IN_STATUS);
			int got[N + 1];
			CUDA_OK(cudaMemcpy(got, dev2, sizeof got, cudaMemcpyDeviceToHost));
			for (int i = 0; i <= N; i++)
				if (got[i] != i) {
					CHECK(0, "the receive that succeeded beside the failed one has [%d] = %d", i, got[i]);
					break;
				}
		}

	/* MPI_Waitany returns the failed request's error with its index;
	 * MPI_Request_get_status reports the failure (and leaves the request
	 * to the MPI_Wait after it, which reports it again) */
	int rc;
	if (rank == 0) {
		MPI_Irecv(dev2, N + 1, MPI_INT, peer, 5, comm, &r[0]);
		MPI_Irecv(dev, N, MPI_INT, peer, 6, comm, &r[1]);
		int idx = -1, got = 0;
		for (int k = 0; k < 2; k++) {
			rc = MPI_Waitany(2, r, &idx, &st[0]);
			if (idx == 1) {
				CHECK(class_of(rc) == MPI_ERR_OTHER, "Waitany: the failed request %d returned %d", idx, rc);
				handled("Waitany", rc);
			} else {
				CHECK(rc == MPI_SUCCESS && idx == 0 && st[0].MPI_SOURCE == peer, "Waitany: request %d returned %d", idx, rc);
			}
			got |= 1 << idx;
		}
		CHECK(got == 3 && r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL, "Waitany completed requests %#x", got);
		MPI_Irecv(dev, N, MPI_INT, peer, 7, comm, &r[0]);
		int flag = 0;
		do
			rc = MPI_Request_get_status(r[0], &flag, &st[0]);
		while (!flag && rc == MPI_SUCCESS);
		CHECK(flag && class_of(rc) == MPI_ERR_OTHER && r[0] != MPI_REQUEST_NULL, "Request_get_status: flag %d, returned %d", flag, rc);
		handled("Request_get_status", rc);
		rc = MPI_Wait(&r[0], MPI_STATUS_IGNORE);
		CHECK(class_of(rc) == MPI_ERR_OTHER && r[0] == MPI_REQUEST_NULL, "Wait after Request_get_status returned %d", rc);
		handled("Wait after Request_get_status", rc);
	} else {
		MPI_Send(host, N + 1, MPI_INT, peer, 5, comm);
		MPI_Send(host, N, MPI_INT, peer, 6, comm);
		MPI_Send(host, N, MPI_INT, peer, 7, comm);
	}

	/* a nonblocking all-reduce of N ints fails on every rank; of N + 1, not */
	CUDA_OK(cudaMemcpy(dev2, host, (N + 1) * sizeof(int), cudaMemcpyHostToDevice));
	rc = MPI_Iallreduce(dev2, dev, N, MPI_INT, MPI_SUM, comm, &r[0]);
	CHECK(rc == MPI_SUCCESS, "Iallreduce of %d ints returned %d", N, rc);
	rc = MPI_Wait(&r[0], MPI_STATUS_IGNORE);
	CHECK(class_of(rc) == MPI_ERR_OTHER, "Iallreduce of %d ints: Wait returned %d", N, rc);
	handled("Iallreduce", rc);
	rc = MPI_Iallreduce(dev2, dev, N + 1, MPI_INT, MPI_SUM, comm, &r[0]);
	if (rc == MPI_SUCCESS)
		rc = MPI_Wait(&r[0], MPI_STATUS_IGNORE);
	CHECK(rc == MPI_SUCCESS, "Iallreduce of %d ints: Wait returned %d", N + 1, rc);
	CHECK(calls == 0, "the error handler was called for a call that succeeded");

	/* a persistent all-reduce (collmux's, on device buffers): every start
	 * fails, and the request can be started again */
	int (*allreduce_init)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Info, MPI_Request *);
	*(void **)&allreduce_init = dlsym(RTLD_DEFAULT, "MPI_Allreduce_init");
	CHECK(allreduce_init != NULL, "no MPI_Allreduce_init under collmux");
	if (allreduce_init && allreduce_init(dev2, dev, N, MPI_INT, MPI_SUM, comm, MPI_INFO_NULL, &r[0]) == MPI_SUCCESS) {
		for (int k = 0; k < 3; k++) {
			rc = MPI_Start(&r[0]);
			CHECK(rc == MPI_SUCCESS, "Start %d returned %d", k, rc);
			rc = MPI_Wait(&r[0], MPI_STATUS_IGNORE);
			CHECK(class_of(rc) == MPI_ERR_OTHER && r[0] != MPI_REQUEST_NULL, "persistent start %d: Wait returned %d", k, rc);
			handled("persistent Wait", rc);
		}
		MPI_Request_free(&r[0]);
	}

	/* a receive whose communicator is freed before it completes (legal):
	 * its failure returns the error, with no handler to call through the
	 * freed handle */
	MPI_Comm gone;
	MPI_Comm_dup(comm, &gone);
	if (rank == 0) {
		MPI_Irecv(dev, N, MPI_INT, peer, 4, gone, &r[0]);
		MPI_Comm_free(&gone);
		rc = MPI_Wait(&r[0], MPI_STATUS_IGNORE);
		CHECK(class_of(rc) == MPI_ERR_OTHER && calls == 0, "receive on a freed communicator: Wait returned %d, handler called %d times", rc, calls);
		calls = 0;
	} else {
		MPI_Send(host, N, MPI_INT, peer, 4, gone);
		MPI_Comm_free(&gone);
	}

	MPI_Barrier(comm);
	MPI_Reduce(rank ? &failures : MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("reqerr: %d ranks, %d failures\n", size, failures);
	MPI_Comm_free(&comm);
	MPI_Errhandler_free(&eh);
	CUDA_OK(cudaFree(dev));
	CUDA_OK(cudaFree(dev2));
	MPI_Finalize();
	return 0;
}
