//go:build collmux_lib

/*
 * comm.c: what collmux asks MPI about a call's handles: a communicator's
 * shape and neighbours, how many blocks a call's arrays hold, datatype
 * sizes, and agreement among a communicator's ranks.
 */
#include <stdlib.h>
#include <string.h>

#include "cmx.h"

/* Learns a communicator's shape (nodes, most ranks on a node, and, if
 * rules ask, the least NVLink class of its nodes) with one allgather. All
 * ranks reach this in the same collective call. */
int cmx_comm_shape(cmx_comm *c)
{
	typedef struct {
		char host[64];
		int nvlink;
	} rec;
	rec me, *all = malloc(sizeof(rec) * (size_t)c->size);
	if (!cmx_comm_agree(c, all != NULL)) { /* a rank without the memory must not skip the allgather its peers make */
		free(all);
		return 0;
	}
	memset(&me, 0, sizeof me);
	cmx_node_name(c->rank, c->size, me.host, sizeof me.host);
	me.nvlink = cmx_cfg.nvlink_rules ? cmx_go_node_nvlink() : -1;
	if (cmx_px.Allgather(&me, (int)sizeof me, cmx_abi.byte, all, (int)sizeof me, cmx_abi.byte, c->handle) != 0) {
		free(all);
		return 0;
	}
	int nodes = 0, rpn = 0, nvlink = me.nvlink;
	for (int i = 0; i < c->size; i++) {
		int first = 1, here = 0;
		for (int j = 0; j < c->size; j++) {
			if (strcmp(all[i].host, all[j].host) == 0) {
				here++;
				if (j < i)
					first = 0;
			}
		}
		nodes += first;
		rpn = here > rpn ? here : rpn;
		nvlink = all[i].nvlink < nvlink ? all[i].nvlink : nvlink;
	}
	free(all);
	c->nodes = nodes, c->rpn = rpn, c->nvlink = nvlink;
	return 1;
}

/* Size of one element of dtype; predefined types need no MPI call. Derived
 * types are asked of MPI only when ask is set (after MPI accepted the call),
 * so that an invalid handle is reported by MPI's own checks, on the call. */
int64_t cmx_type_size(cmx_h dtype, int ask)
{
	int kind, size;
	if (cmx_dtype_info(dtype, &kind, &size))
		return size;
	if (ask && cmx_px.Type_size(dtype, &size) == 0)
		return size;
	return -1;
}

size_t cmx_received(const void *status, size_t len)
{
	int64_t got = -1;
	int small = -1;
	if (cmx_px.Get_elements_x) { /* past INT_MAX bytes the int count is MPI_UNDEFINED */
		if (cmx_px.Get_elements_x(status, cmx_abi.byte, &got) != 0)
			got = -1;
	} else if (cmx_px.Get_count(status, cmx_abi.byte, &small) == 0) {
		got = small;
	}
	return got >= 0 && (uint64_t)got < len ? (size_t)got : len;
}

int cmx_move_size(cmx_h dtype)
{
	int kind, size;
	if (cmx_dtype_info(dtype, &kind, &size))
		return kind != CMX_KIND_PAIR ? size : 0;
	/* a derived type that is one contiguous run of bytes moves as bytes,
	 * so that a rank passing one and its peers the same signature in
	 * basic elements take the same path */
	cmx_aint lb = 0, ext = 0, tlb = 0, text = 0;
	if (!dtype || dtype == cmx_abi.dtype_null || cmx_px.Type_size(dtype, &size) != 0 || cmx_px.Type_get_extent(dtype, &lb, &ext) != 0 ||
	    cmx_px.Type_get_true_extent(dtype, &tlb, &text) != 0)
		return 0;
	return size > 0 && lb == 0 && tlb == 0 && ext == size && text == size ? size : 0;
}

int cmx_type_extents(cmx_h dtype, cmx_aint *ext, cmx_aint *tlb, cmx_aint *text)
{
	int kind, size;
	cmx_aint lb;
	*tlb = 0;
	if (cmx_dtype_info(dtype, &kind, &size) && kind != CMX_KIND_PAIR) {
		*ext = *text = size;
		return 1;
	}
	return cmx_px.Type_get_extent(dtype, &lb, ext) == 0 && cmx_px.Type_get_true_extent(dtype, tlb, text) == 0;
}

/* A datatype handle as MPI_Type_free takes it: an int in the MPICH ABI. */
static void type_free(cmx_h t)
{
	union {
		cmx_h h;
		int i;
	} slot;
	if (cmx_abi.int_handles)
		slot.i = (int)t;
	else
		slot.h = t;
	cmx_px.Type_free(&slot);
}

/* A derived datatype's envelope lists datatypes; a predefined one's,
 * named or Fortran parameterized, lists none. */
int cmx_type_derived(cmx_h t)
{
	int k, size, ni, na, nd, comb;
	return !cmx_dtype_info(t, &k, &size) && cmx_px.Type_get_envelope(t, &ni, &na, &nd, &comb) == 0 && nd > 0;
}

/* Folds the kinds of dtype's signature into *kind (-1: none yet). Returns
 * 0 once they differ or a part is unknown (a predefined type collmux does
 * not know, a pair of two kinds). */
static int sig_fold(cmx_h dtype, int depth, int *kind)
{
	int k, size, ni, na, nd, comb;
	if (cmx_dtype_info(dtype, &k, &size)) {
		if (k == CMX_KIND_PAIR)
			k = cmx_norm(dtype) == cmx_norm(cmx_abi.two_int) ? CMX_KIND_INT32 : CMX_KIND_OTHER;
		if (k == CMX_KIND_OTHER || (*kind >= 0 && *kind != k))
			return 0;
		*kind = k;
		return 1;
	}
	if (depth > 16 || cmx_px.Type_get_envelope(dtype, &ni, &na, &nd, &comb) != 0 || nd <= 0 || ni < 0 || na < 0)
		return 0;
	int *ints = malloc(sizeof(int) * (size_t)(ni + 1));
	cmx_aint *aints = malloc(sizeof(cmx_aint) * (size_t)(na + 1));
	cmx_h *types = malloc(sizeof(cmx_h) * (size_t)nd); /* wide enough for either ABI's handles */
	const int got = ints && aints && types && cmx_px.Type_get_contents(dtype, ni, na, nd, ints, aints, types) == 0;
	/* a struct (the one combiner with several types: count, then a block
	 * length a type) leaves the types of its empty blocks out of its
	 * signature, whatever the ABI numbers the combiner */
	const int is_struct = got && nd > 1 && ni == nd + 1 && ints[0] == nd;
	int ok = got;
	for (int i = 0; got && i < nd; i++) {
		const cmx_h part = cmx_type_at(types, i);
		ok = ok && ((is_struct && ints[1 + i] == 0) || sig_fold(part, depth + 1, kind));
		if (cmx_type_derived(part)) /* a new handle get_contents made */
			type_free(part);
	}
	free(ints), free(aints), free(types);
	return ok;
}

int cmx_sig_kind(cmx_h dtype)
{
	int kind = -1;
	return sig_fold(dtype, 0, &kind) && kind >= 0 ? kind : CMX_KIND_OTHER;
}

int cmx_comm_agree(const cmx_comm *c, int ok)
{
	int all = 0;
	return cmx_px.Allreduce(&ok, &all, 1, cmx_abi.int_, cmx_abi.op_min, c->handle) == 0 && all;
}

int cmx_peers(const cmx_args *a, int *nin, int *nout)
{
	int n = 0, inter = 0, topo = 0, me = 0, weighted = 0, rc;
	*nin = *nout = 0;
	if (cmx_families[a->coll].flags & CMX_FAM_NEIGHBORS) {
		if ((rc = cmx_px.Topo_test(a->comm, &topo)) != 0)
			return rc;
		if (topo == cmx_abi.cart) {
			rc = cmx_px.Cartdim_get(a->comm, &n);
			*nin = *nout = 2 * n;
		} else if (topo == cmx_abi.graph) {
			if ((rc = cmx_px.Comm_rank(a->comm, &me)) == 0)
				rc = cmx_px.Graph_neighbors_count(a->comm, me, &n);
			*nin = *nout = n;
		} else if (topo == cmx_abi.dist_graph) {
			rc = cmx_px.Dist_graph_neighbors_count(a->comm, nin, nout, &weighted);
		} else {
			rc = -1; /* no topology: erroneous, MPI says so on the call itself */
		}
		return rc;
	}
	if ((rc = cmx_px.Comm_test_inter(a->comm, &inter)) == 0)
		rc = (inter ? cmx_px.Comm_remote_size : cmx_px.Comm_size)(a->comm, &n);
	*nin = *nout = n;
	/* MPI_Reduce_scatter's counts are of the local group's ranks, also on
	 * an intercommunicator (the result of the other group's data is
	 * scattered over this one) */
	if (rc == 0 && inter && a->coll == CMX_COLL_REDUCE_SCATTER)
		rc = cmx_px.Comm_size(a->comm, nin);
	return rc;
}

int cmx_neighbors(const cmx_args *a, int nin, int nout, int *src, int *dst, int *cart)
{
	int topo = 0, me = 0, rc;
	*cart = 0;
	if ((rc = cmx_px.Topo_test(a->comm, &topo)) != 0)
		return rc;
	if (topo == cmx_abi.cart) {
		*cart = 1;
		for (int d = 0; d < nin / 2 && rc == 0; d++) {
			rc = cmx_px.Cart_shift(a->comm, d, 1, &src[2 * d], &src[2 * d + 1]);
			dst[2 * d] = src[2 * d], dst[2 * d + 1] = src[2 * d + 1];
		}
		return rc;
	}
	if (topo == cmx_abi.graph) {
		if ((rc = cmx_px.Comm_rank(a->comm, &me)) == 0)
			rc = cmx_px.Graph_neighbors(a->comm, me, nin, src);
		for (int j = 0; j < nout && rc == 0; j++)
			dst[j] = src[j];
		return rc;
	}
	if (topo == cmx_abi.dist_graph) {
		/* weights are not wanted, but MPI_UNWEIGHTED differs by ABI: room
		 * for them is always valid */
		int *w = malloc(sizeof(int) * (size_t)(nin + nout + 2));
		rc = w ? cmx_px.Dist_graph_neighbors(a->comm, nin, src, w, nout, dst, w + nin + 1) : -1;
		free(w);
		return rc;
	}
	return -1;
}
