//go:build collmux_lib

/*
 * requests.c: the completion calls (MPI_Wait ... MPI_Testsome,
 * MPI_Request_get_status, MPI_Cancel, MPI_Request_free, MPI_Start(all)).
 * While collmux holds no request they are the MPI's own, after two loads
 * and no stack frame; otherwise mpi/request.c finishes what collmux holds.
 */
#include "cmx.h"

/* The rest of completion call op, once collmux holds a request or is not
 * set up yet. */
static CMX_NOINLINE int completion(int op, int n, void *reqs, int *flag, int *idx, int *outcount, int *indices, void *statuses)
{
	cmx_req_owns_any(); /* sets collmux up */
	return cmx_req_completion(op, n, reqs, flag, idx, outcount, indices, statuses);
}

CMX_EXPORT int MPI_Wait(void *req, void *status)
{
	if (CMX_LIKELY(cmx_req_none_owned()))
		return cmx_px.Wait(req, status);
	return completion(CMX_REQ_WAIT, 1, req, NULL, NULL, NULL, NULL, status);
}

CMX_EXPORT int MPI_Test(void *req, int *flag, void *status)
{
	if (CMX_LIKELY(cmx_req_none_owned()))
		return cmx_px.Test(req, flag, status);
	return completion(CMX_REQ_TEST, 1, req, flag, NULL, NULL, NULL, status);
}

CMX_EXPORT int MPI_Waitall(int n, void *reqs, void *statuses)
{
	if (CMX_LIKELY(cmx_req_none_owned()))
		return cmx_px.Waitall(n, reqs, statuses);
	return completion(CMX_REQ_WAITALL, n, reqs, NULL, NULL, NULL, NULL, statuses);
}

CMX_EXPORT int MPI_Testall(int n, void *reqs, int *flag, void *statuses)
{
	if (CMX_LIKELY(cmx_req_none_owned()))
		return cmx_px.Testall(n, reqs, flag, statuses);
	return completion(CMX_REQ_TESTALL, n, reqs, flag, NULL, NULL, NULL, statuses);
}

CMX_EXPORT int MPI_Waitany(int n, void *reqs, int *idx, void *status)
{
	if (CMX_LIKELY(cmx_req_none_owned()))
		return cmx_px.Waitany(n, reqs, idx, status);
	return completion(CMX_REQ_WAITANY, n, reqs, NULL, idx, NULL, NULL, status);
}

CMX_EXPORT int MPI_Testany(int n, void *reqs, int *idx, int *flag, void *status)
{
	if (CMX_LIKELY(cmx_req_none_owned()))
		return cmx_px.Testany(n, reqs, idx, flag, status);
	return completion(CMX_REQ_TESTANY, n, reqs, flag, idx, NULL, NULL, status);
}

CMX_EXPORT int MPI_Waitsome(int n, void *reqs, int *outcount, int *indices, void *statuses)
{
	if (CMX_LIKELY(cmx_req_none_owned()))
		return cmx_px.Waitsome(n, reqs, outcount, indices, statuses);
	return completion(CMX_REQ_WAITSOME, n, reqs, NULL, NULL, outcount, indices, statuses);
}

CMX_EXPORT int MPI_Testsome(int n, void *reqs, int *outcount, int *indices, void *statuses)
{
	if (CMX_LIKELY(cmx_req_none_owned()))
		return cmx_px.Testsome(n, reqs, outcount, indices, statuses);
	return completion(CMX_REQ_TESTSOME, n, reqs, NULL, NULL, outcount, indices, statuses);
}

CMX_EXPORT int MPI_Request_get_status(cmx_h req, int *flag, void *status)
{
	if (CMX_LIKELY(!cmx_req_owns_any()))
		return cmx_px.Request_get_status(req, flag, status);
	return cmx_req_get_status(req, flag, status);
}

CMX_EXPORT int MPI_Cancel(void *req)
{
	if (CMX_LIKELY(!cmx_req_owns_any()))
		return cmx_px.Cancel(req);
	return cmx_req_cancel(req);
}

CMX_EXPORT int MPI_Request_free(void *req)
{
	if (CMX_LIKELY(!cmx_req_owns_any()))
		return cmx_px.Request_free(req);
	return cmx_req_free(req);
}

CMX_EXPORT int MPI_Start(void *req)
{
	if (CMX_LIKELY(!cmx_req_owns_any()))
		return cmx_px.Start(req);
	return cmx_req_start(req);
}

CMX_EXPORT int MPI_Startall(int n, void *reqs)
{
	if (CMX_LIKELY(!cmx_req_owns_any()))
		return cmx_px.Startall(n, reqs);
	for (int i = 0; i < n; i++) {
		int rc = cmx_req_start(cmx_req_at(reqs, i));
		if (rc != 0)
			return rc;
	}
	return 0;
}
