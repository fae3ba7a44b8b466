//go:build collmux_lib

/*
 * forward.c: handing a call to the real MPI, including the MPI-4
 * large-count (_c) functions an MPI lacks, emulated with its int-count
 * ones where the counts fit.
 */
#include <limits.h>
#include <stdlib.h>

#include "cmx.h"

/* narrow copies a large-count array into an int array of n entries. */
static int *narrow(const void *arr, int n, int *ok)
{
	if (!arr)
		return NULL;
	int *out = malloc((size_t)(n > 0 ? n : 1) * sizeof *out);
	if (!out) {
		*ok = 0;
		return NULL;
	}
	for (int i = 0; i < n; i++) {
		int64_t v = ((const cmx_count *)arr)[i];
		if (v > INT_MAX || v < INT_MIN)
			*ok = 0;
		out[i] = (int)v;
	}
	return out;
}

/* A program built against an MPI-4 header may call MPI_X_c on a library
 * without it (collmux exports every _c name). Counts that fit in an int go
 * to MPI_X; others fail with MPI_ERR_COUNT, as an MPI without large-count
 * support could only fail. */
static int forward_narrowed(const cmx_args *a)
{
	cmx_args b = *a;
	b.fn = a->fn - 1;
	b.large = 0;
	int nin = 0, nout = 0, me = 0, inter = 0, ok = a->scount <= INT_MAX && a->rcount <= INT_MAX, r;
	/* the communicator is checked before the counts, as MPI checks it: a
	 * bad one fails in these calls (its error handler called once), and
	 * a neighborhood call without a topology goes to MPI for its error */
	if (a->scounts || a->rcounts || !ok) {
		if ((r = cmx_peers(a, &nin, &nout)) > 0 || (r == 0 && (r = cmx_px.Comm_rank(a->comm, &me)) != 0) ||
		    (r == 0 && (r = cmx_px.Comm_test_inter(a->comm, &inter)) != 0))
			return r;
		if (r < 0) {
			b.scounts = b.sdispls = b.rcounts = b.rdispls = NULL;
			return cmx_forward_fn(&b);
		}
	}
	/* only the arrays significant on this rank are read */
	const int root = cmx_is_root(a, inter, me), ssig = cmx_arrays_read(a, 0, root), rsig = cmx_arrays_read(a, 1, root);
	const int aint = cmx_displs_aint(&b); /* displacements that stay MPI_Aint in the int-count function */
	int *sc = ssig ? narrow(a->scounts, nout, &ok) : NULL, *sd = ssig && !aint ? narrow(a->sdispls, nout, &ok) : NULL;
	int *rc = rsig ? narrow(a->rcounts, nin, &ok) : NULL, *rd = rsig && !aint ? narrow(a->rdispls, nin, &ok) : NULL;
	if (ssig)
		b.scounts = sc, b.sdispls = aint ? a->sdispls : sd;
	if (rsig)
		b.rcounts = rc, b.rdispls = aint ? a->rdispls : rd;
	int ret = ok ? cmx_forward(&b) : cmx_error(a->comm, CMX_ERR_COUNT);
	if (ret == 0 && a->form == CMX_FORM_NONBLOCKING && (sc || sd || rc || rd)) {
		/* the MPI reads the arrays until the call completes: they go with
		 * the request the caller is building, or one of their own */
		cmx_req *e = a->entry ? a->entry : cmx_req_new(a);
		if (!e)
			cmx_fatal("%s: out of memory", cmx_fn_names[a->fn]);
		cmx_req_keep(e, sc), cmx_req_keep(e, sd), cmx_req_keep(e, rc), cmx_req_keep(e, rd);
		if (!a->entry)
			cmx_req_file(e, a->req);
		return ret;
	}
	free(sc), free(sd), free(rc), free(rd);
	return ret;
}

int cmx_forward(const cmx_args *a)
{
	if (CMX_LIKELY(cmx_pmpi[a->fn] != NULL))
		return cmx_forward_fn(a);
	return forward_narrowed(a);
}

