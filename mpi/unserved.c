//go:build collmux_lib

/*
 * unserved.c: the MPI functions with buffers that collmux does not serve
 * on device memory (capi/unserved.tab; their wrappers are capi/zunserved.c).
 * A device buffer, or a function the MPI lacks, fails the call here with
 * an error through the right error handler and a message naming the call,
 * instead of reaching an MPI that would fault on the pointer.
 */
#include <stdio.h>

#include "cmx.h"

void *cmx_upmpi[CMX_NUFN];

void cmx_unserved_resolve(void)
{
	char name[64];
	for (int i = 0; i < CMX_NUFN; i++) {
		snprintf(name, sizeof name, "P%s", cmx_ufn[i].name);
		cmx_upmpi[i] = cmx_mpi_sym(name);
	}
}

int cmx_unserved_fail(int ufn, cmx_h obj, void *req, int code)
{
	if (req)
		cmx_req_put(req, cmx_abi.request_null);
	int (*call)(cmx_h, int) = NULL;
	switch (cmx_ufn[ufn].errh) {
	case CMX_ERRH_COMM:
		call = cmx_px.Comm_call_errhandler;
		break;
	case CMX_ERRH_WORLD:
		call = cmx_px.Comm_call_errhandler, obj = cmx_abi.comm_world;
		break;
	case CMX_ERRH_WIN:
		call = cmx_px.Win_call_errhandler;
		break;
	case CMX_ERRH_FILE:
		call = cmx_px.File_call_errhandler;
		break;
	case CMX_ERRH_SESSION:
		call = cmx_px.Session_call_errhandler;
		break;
	}
	if (call && cmx_mpi_usable()) /* an error handler can be called only between MPI_Init and MPI_Finalize */
		call(obj, code);
	return code;
}

static unsigned char reported[CMX_NUFN];

int cmx_unserved_refuse(int ufn, cmx_h obj, void *req, int why)
{
	const cmx_ufn_info *f = &cmx_ufn[ufn];
	if (!__atomic_exchange_n(&reported[ufn], 1, __ATOMIC_RELAXED)) {
		if (why == CMX_REFUSE_DEVICE)
			fprintf(stderr,
				"collmux: %s: device memory is not supported for %s (%s): the call fails with MPI_ERR_OTHER; "
				"give it host memory (reported once per function)\n",
				f->name, cmx_ucat_reasons[f->category], cmx_ucat_names[f->category]);
		else
			fprintf(stderr, "collmux: %s: the MPI library %s has no P%s%s%s: the call fails with MPI_ERR_OTHER (reported once per function)\n",
				f->name, cmx_abi.lib ? cmx_abi.lib : "?", f->name, f->base >= 0 ? " nor P" : "",
				f->base >= 0 ? cmx_ufn[f->base].name : "");
	}
	return cmx_unserved_fail(ufn, obj, req, cmx_abi.err_other);
}
