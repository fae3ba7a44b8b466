/*
 * dispatch.c: the path of a call that does not pass straight through.
 * It decodes the call (communicator state, message size, memory kind),
 * picks a backend, runs it, and records statistics.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "_cgo_export.h"

#include "cmx.h"

cmx_stat cmx_stats[CMX_NCOLL][CMX_NBACKEND][CMX_NBUCKET];
int32_t cmx_stat_rule[CMX_NCOLL][CMX_NBACKEND][CMX_NBUCKET];
cmx_route_table_t cmx_route_table;
volatile unsigned cmx_routes_gen;
int cmx_live_comms;

/* Re-entry guard: an MPI library may implement a collective with other
 * MPI_* calls; those must go straight to MPI. */
static __thread int depth;

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
	if (!all)
		return 0;
	memset(&me, 0, sizeof me);
	cmx_node_name(c->rank, c->size, me.host, sizeof me.host);
	me.nvlink = cmx_cfg.nvlink_rules ? collmux_go_node_nvlink() : -1;
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

/* Routes for a communicator's shape, learnt when it is first used. */
static int shape_routes(cmx_comm *c)
{
	if (!cmx_comm_shape(c))
		return 0;
	c->routes = (cmx_route_table_t *)collmux_go_routes_for(c->size, c->nodes, c->rpn, c->nvlink < 0 ? 0 : c->nvlink);
	return c->routes != NULL;
}

/* After collmux_set_rules, a communicator takes the new tables at its next
 * call (learning its shape then if the new rules need it and it never did). */
static void refresh_routes(cmx_comm *c)
{
	unsigned gen = __atomic_load_n(&cmx_routes_gen, __ATOMIC_ACQUIRE);
	if (!cmx_cfg.shape_rules || c->inter)
		c->routes = &cmx_route_table;
	else if (c->nodes && (c->nvlink >= 0 || !cmx_cfg.nvlink_rules))
		c->routes = (cmx_route_table_t *)collmux_go_routes_for(c->size, c->nodes, c->rpn, c->nvlink < 0 ? 0 : c->nvlink);
	else if (!shape_routes(c))
		c->routes = &cmx_route_table;
	c->routes_gen = gen;
}

cmx_comm *cmx_comm_get(cmx_h comm)
{
	if (comm == cmx_abi.comm_null)
		return NULL;
	cmx_comm *c = NULL;
	int flag = 0;
	if (cmx_px.Comm_get_attr(comm, cmx_state.comm_keyval, &c, &flag) != 0)
		return NULL;
	if (flag)
		return c;
	c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->handle = comm;
	cmx_px.Comm_size(comm, &c->size);
	cmx_px.Comm_rank(comm, &c->rank);
	cmx_px.Comm_test_inter(comm, &c->inter);
	c->routes = &cmx_route_table;
	c->nvlink = -1;
	c->routes_gen = __atomic_load_n(&cmx_routes_gen, __ATOMIC_ACQUIRE);
	if (cmx_cfg.shape_rules && !c->inter && !shape_routes(c)) {
		free(c);
		return NULL;
	}
	if (cmx_px.Comm_set_attr(comm, cmx_state.comm_keyval, c) != 0) {
		free(c);
		return NULL;
	}
	__atomic_fetch_add(&cmx_live_comms, 1, __ATOMIC_RELAXED);
	return c;
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

int cmx_move_size(cmx_h dtype)
{
	int kind, size;
	return cmx_dtype_info(dtype, &kind, &size) && kind != CMX_KIND_PAIR ? size : 0;
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
	switch (a->coll) {
	case CMX_COLL_NEIGHBOR_ALLGATHER:
	case CMX_COLL_NEIGHBOR_ALLGATHERV:
	case CMX_COLL_NEIGHBOR_ALLTOALL:
	case CMX_COLL_NEIGHBOR_ALLTOALLV:
	case CMX_COLL_NEIGHBOR_ALLTOALLW:
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

/* What a vector collective (alltoallw, the neighborhood ones) receives,
 * in bytes; -1 when unknown. */
static int64_t vector_bytes(const cmx_args *a, int ask)
{
	int nin, nout;
	if (cmx_peers(a, &nin, &nout) != 0)
		return -1;
	int64_t sum = 0;
	for (int j = 0; j < nin; j++) {
		int64_t size = cmx_type_size(a->rtypes ? cmx_type_at(a->rtypes, j) : a->rtype, ask);
		if (size < 0)
			return -1;
		sum += (a->rcounts ? cmx_at(a->rcounts, j, a->large) : a->rcount) * size;
	}
	return sum;
}

/* Message size of a call as nccl-tests counts it: the full buffer of
 * allgather/alltoall/reduce_scatter and of the root of gather/scatter.
 * Returns -1 when a derived datatype's size is not known yet. */
static int64_t call_bytes(const cmx_args *a, const cmx_comm *c, int ask)
{
	if (a->coll == CMX_COLL_BARRIER)
		return 0;
	if (cmx_coll_class[a->coll] != CMX_CLASS_COLLECTIVE) { /* what this rank sends, or else receives */
		const int recv = a->coll == CMX_COLL_RECV;
		int64_t size = cmx_type_size(recv ? a->rtype : a->stype, ask);
		return size < 0 ? -1 : (recv ? a->rcount : a->scount) * size;
	}
	switch (a->coll) { /* per-rank datatypes, or counts of neighbours */
	case CMX_COLL_ALLTOALLW:
	case CMX_COLL_NEIGHBOR_ALLGATHER:
	case CMX_COLL_NEIGHBOR_ALLGATHERV:
	case CMX_COLL_NEIGHBOR_ALLTOALL:
	case CMX_COLL_NEIGHBOR_ALLTOALLV:
	case CMX_COLL_NEIGHBOR_ALLTOALLW:
		return vector_bytes(a, ask);
	}
	int n = c ? c->size : 1;
	int64_t rs = cmx_type_size(a->rtype, ask);
	int root = c && a->root == c->rank;
	if (rs < 0)
		return -1;
	switch (a->coll) {
	case CMX_COLL_ALLGATHER:
	case CMX_COLL_ALLTOALL:
	case CMX_COLL_REDUCE_SCATTER_BLOCK:
		return a->rcount * rs * n;
	case CMX_COLL_ALLGATHERV:
	case CMX_COLL_REDUCE_SCATTER:
		return cmx_count_sum(a->rcounts, n, a->large) * rs;
	case CMX_COLL_GATHER:
	case CMX_COLL_SCATTER: {
		int sending = (a->coll == CMX_COLL_GATHER) != root;
		int64_t ss = sending ? cmx_type_size(a->stype, ask) : rs;
		return ss < 0 ? -1 : (sending ? a->scount : a->rcount) * ss * n;
	}
	case CMX_COLL_GATHERV:
		return root ? cmx_count_sum(a->rcounts, n, a->large) * rs : a->scount * cmx_type_size(a->stype, ask);
	case CMX_COLL_SCATTERV:
		return root ? cmx_count_sum(a->scounts, n, a->large) * cmx_type_size(a->stype, ask) : a->rcount * rs;
	case CMX_COLL_ALLTOALLV:
		return cmx_count_sum(a->rcounts, n, a->large) * rs;
	default: /* allreduce, reduce, bcast, scan, exscan: one count, one type */
		return a->rcount * rs;
	}
}

static int bucket_of(uint64_t bytes)
{
	int b = bytes ? 64 - __builtin_clzll(bytes) : 0;
	return b < CMX_NBUCKET ? b : CMX_NBUCKET - 1;
}

static void record(const cmx_args *a, const cmx_comm *c, int backend, int rule, uint64_t ns)
{
	int64_t bytes = call_bytes(a, c, 1);
	int k = bucket_of(bytes < 0 ? 0 : (uint64_t)bytes);
	cmx_stat *s = &cmx_stats[a->coll][backend][k];
	__atomic_store_n(&cmx_stat_rule[a->coll][backend][k], rule + 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->calls, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->bytes, bytes < 0 ? 0 : (uint64_t)bytes, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ns, ns, __ATOMIC_RELAXED);
}

/* The memory kind of a call: that of the buffers significant on this rank.
 * Every rank must reach the same kind for the same call (the rule CUDA-aware
 * MPIs also rely on); COLLMUX_CHECK verifies it. */
static int call_mem(const cmx_args *a, const cmx_comm *c)
{
	if ((!cmx_cuda_up && !cmx_cuda_probe()) || a->coll == CMX_COLL_BARRIER)
		return CMX_MEM_HOST;
	int root = c && a->root == c->rank;
	int s_sig = a->sbuf && a->sbuf != cmx_abi.in_place &&
		    !((a->coll == CMX_COLL_SCATTER || a->coll == CMX_COLL_SCATTERV) && !root);
	int r_sig = a->rbuf && a->rbuf != cmx_abi.in_place &&
		    !((a->coll == CMX_COLL_GATHER || a->coll == CMX_COLL_GATHERV || a->coll == CMX_COLL_REDUCE) && !root);
	int sk = s_sig ? cmx_mem_kind(a->sbuf) : -1, rk = r_sig ? cmx_mem_kind(a->rbuf) : -1;
	if (sk < 0)
		return rk < 0 ? CMX_MEM_HOST : rk;
	if (rk < 0 || rk == sk)
		return sk;
	return CMX_MEM_MIXED;
}

/* Size used to route a call. It must be the same on every rank, so the
 * collectives whose sizes differ between ranks are routed as the largest. */
static uint64_t route_bytes(const cmx_args *a, const cmx_comm *c)
{
	switch (a->coll) {
	case CMX_COLL_ALLTOALLV:
	case CMX_COLL_ALLTOALLW:
	case CMX_COLL_GATHERV:
	case CMX_COLL_SCATTERV:
	case CMX_COLL_NEIGHBOR_ALLGATHER: /* degrees differ between ranks */
	case CMX_COLL_NEIGHBOR_ALLGATHERV:
	case CMX_COLL_NEIGHBOR_ALLTOALL:
	case CMX_COLL_NEIGHBOR_ALLTOALLV:
	case CMX_COLL_NEIGHBOR_ALLTOALLW:
		return UINT64_MAX;
	}
	int64_t b = call_bytes(a, c, 0);
	return b < 0 ? UINT64_MAX : (uint64_t)b;
}

static int dclass_of(cmx_h dtype)
{
	int kind, size;
	if (!cmx_dtype_info(dtype, &kind, &size))
		return CMX_DCLASS_OTHER;
	if (kind >= CMX_KIND_INT8 && kind <= CMX_KIND_UINT64)
		return CMX_DCLASS_INT;
	if (kind >= CMX_KIND_FLOAT16 && kind <= CMX_KIND_LONGDOUBLE)
		return CMX_DCLASS_FLOAT;
	return CMX_DCLASS_OTHER;
}

static const cmx_route *pick(const cmx_comm *c, const cmx_args *a, uint64_t bytes)
{
	const cmx_routes *rs = &(*c->routes)[a->coll][a->mem][a->coll == CMX_COLL_BARRIER ? CMX_DCLASS_OTHER : dclass_of(a->rtype)];
	for (int i = 0; i < rs->n; i++)
		if (bytes >= rs->r[i].lo && bytes <= rs->r[i].hi)
			return &rs->r[i];
	return NULL;
}

/* COLLMUX_LOG=decisions: each distinct (collective, memory, backend, rule)
 * is explained once, by Go, which holds the rule texts. */
static void explain(const cmx_args *a, uint64_t bytes, int backend, int rule, int wanted)
{
	static uint64_t seen[CMX_NCOLL][CMX_NMEM][CMX_NBACKEND];
	uint64_t bit = 1ull << ((unsigned)(rule + 1) % 64);
	if (__atomic_fetch_or(&seen[a->coll][a->mem][backend], bit, __ATOMIC_RELAXED) & bit)
		return;
	collmux_go_explain(a->coll, a->mem, bytes, backend, rule, wanted);
}

/* COLLMUX_CHECK: every rank must call the same collective with the same
 * memory kind, root, op and size. A disagreement would otherwise hang (one
 * rank in NCCL, another in MPI); here it is an error naming the ranks. */
enum { FP_COLL, FP_MEM, FP_ROOT, FP_OP, FP_BYTES, FP_N };
static const char *const fp_names[FP_N] = {"collective", "memory kind (0 host, 1 cuda, 2 managed, 3 mixed)", "root", "op", "message size"};

static int check(const cmx_args *a, const cmx_comm *c, uint64_t bytes)
{
	/* bytes is the routing size: UINT64_MAX where ranks may differ or the
	 * size is not known yet */
	int mine[FP_N] = {a->coll, a->mem, a->root, a->op ? cmx_op_info(a->op) : -1, bytes == UINT64_MAX ? -1 : (int)bytes};
	int *all = malloc(sizeof(int) * FP_N * (size_t)c->size);
	if (!all || cmx_px.Allgather(mine, FP_N, cmx_abi.int_, all, FP_N, cmx_abi.int_, c->handle) != 0) {
		free(all);
		return 0;
	}
	int bad = -1;
	for (int f = 0; f < FP_N && bad < 0; f++)
		for (int r = 1; r < c->size; r++)
			if (all[r * FP_N + f] != all[f])
				bad = f;
	if (bad >= 0) {
		if (c->rank == 0) {
			fprintf(stderr, "collmux: COLLMUX_CHECK: %s on a communicator of %d ranks: ranks disagree on the %s:", cmx_fn_names[a->fn], c->size, fp_names[bad]);
			for (int r = 0; r < c->size; r++)
				fprintf(stderr, " rank %d: %d%s", r, all[r * FP_N + bad], r + 1 < c->size ? "," : "\n");
		}
		free(all);
		return cmx_error(a->comm, cmx_abi.err_other);
	}
	free(all);
	return 0;
}

/* run tries the chosen backend, then the fallbacks: fused kernels fall
 * back to NCCL, a device call NCCL cannot express is staged, and what
 * staging declines goes to MPI. */
static int run(cmx_comm *c, const cmx_args *a, int backend, int *used)
{
	int rc = 0;
	switch (backend) {
	case CMX_BACKEND_FUSED:
		if (c && a->mem == CMX_MEM_DEVICE && cmx_fused_run(c, a, &rc))
			return *used = CMX_BACKEND_FUSED, rc;
		/* fall through */
	case CMX_BACKEND_NCCL:
		if (c && cmx_nccl_run(c, a, &rc))
			return *used = CMX_BACKEND_NCCL, rc;
		/* fall through */
	case CMX_BACKEND_STAGED:
		if (a->mem != CMX_MEM_HOST && a->mem != CMX_MEM_MANAGED && cmx_staged_run(c, a, &rc))
			return *used = CMX_BACKEND_STAGED, rc;
		/* fall through */
	default:
		*used = CMX_BACKEND_MPI;
		return cmx_forward(a);
	}
}

/* A collective in any form. A persistent one whose buffers are on the
 * device (or that the MPI lacks) is collmux's own: each start routes its
 * nonblocking form as a call of its own. */
static int collective(cmx_args *a, cmx_comm **cp, int *backend, int *used, int *rule, uint64_t *bytes)
{
	cmx_comm *c = *cp = cmx_comm_get(a->comm);
	if (c && CMX_UNLIKELY(c->routes_gen != cmx_routes_gen))
		refresh_routes(c);
	a->mem = call_mem(a, c);
	if (a->form == CMX_FORM_PERSISTENT)
		return a->mem == CMX_MEM_HOST && cmx_pmpi[a->fn] ? cmx_forward(a) : cmx_req_persistent(a);
	int rc = 0;
	if (c && !c->inter) {
		*bytes = route_bytes(a, c);
		const cmx_route *r = pick(c, a, *bytes);
		if (r)
			*backend = r->backend, *rule = r->rule;
		if (cmx_cfg.check && (rc = check(a, c, *bytes)) != 0)
			return rc;
	}
	return run(c, a, *backend, used);
}

/* Point-to-point and local calls: the MPI matches every message; device
 * buffers travel as host copies (staged). Nothing here may communicate:
 * no peer is in a collective call. */
static int solo(cmx_args *a, int *used)
{
	a->mem = call_mem(a, NULL);
	int rc = 0;
	if (a->mem != CMX_MEM_DEVICE && a->mem != CMX_MEM_MIXED)
		return cmx_forward(a);
	if (a->form == CMX_FORM_PERSISTENT)
		return *used = CMX_BACKEND_STAGED, cmx_req_persistent(a);
	if (cmx_staged_run(NULL, a, &rc))
		return *used = CMX_BACKEND_STAGED, rc;
	return cmx_forward(a);
}

int cmx_dispatch(cmx_args *a)
{
	if (cmx_cfg.disable || depth || !cmx_mpi_setup())
		return cmx_forward(a);
	depth++;
	a->stype = cmx_norm(a->stype);
	a->rtype = cmx_norm(a->rtype);
	a->op = cmx_norm(a->op);
	a->comm = cmx_norm(a->comm);
	int backend = CMX_BACKEND_MPI, used = CMX_BACKEND_MPI, rule = -1;
	uint64_t bytes = 0, t0 = cmx_cfg.stats ? cmx_now_ns() : 0;
	cmx_comm *c = NULL;
	const int coll = cmx_coll_class[a->coll] == CMX_CLASS_COLLECTIVE;
	int rc = coll ? collective(a, &c, &backend, &used, &rule, &bytes) : solo(a, &used);
	if (!coll)
		backend = used;
	/* a persistent call is counted at each start, in its nonblocking form */
	if (cmx_cfg.stats && rc == 0 && a->form != CMX_FORM_PERSISTENT)
		record(a, c, used, rule, cmx_now_ns() - t0);
	if (cmx_cfg.log >= 2)
		explain(a, bytes, used, rule, backend);
	depth--;
	return rc;
}

/* ---- forwarding to MPI ---- */

#define CMX_ERR_COUNT 2 /* MPI_ERR_COUNT in every ABI */

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
	/* only the arrays significant on this rank are read: a non-root's
	 * counts of Gatherv or Scatterv may be anything */
	const int root = inter ? a->root == cmx_abi.root : me == a->root;
	const int rsig = a->coll != CMX_COLL_GATHERV || root, ssig = a->coll != CMX_COLL_SCATTERV || root;
	const int aint = a->coll == CMX_COLL_NEIGHBOR_ALLTOALLW; /* its displacements are MPI_Aint in both widths */
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
		cmx_req *e = a->entry ? a->entry : cmx_req_new(a->fn);
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
	if (a->form == CMX_FORM_PERSISTENT)
		return cmx_req_persistent(a); /* an MPI-4 persistent call the MPI lacks (in this count width) */
	return forward_narrowed(a);
}
