//go:build collmux_lib

/*
 * router.c: the path of a call that does not pass straight through. It
 * decodes the call (communicator state, message size, memory kind),
 * picks a backend from the routes package dispatch compiled, runs it down
 * the backend table until one takes it, and records statistics.
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmx.h"

cmx_stat cmx_stats[CMX_NCOLL][CMX_NBACKEND][CMX_NBUCKET];
int32_t cmx_stat_rule[CMX_NCOLL][CMX_NBACKEND][CMX_NBUCKET];
static cmx_route_table_t first_table;
cmx_route_table_t *cmx_route_table = &first_table;
volatile unsigned cmx_routes_gen;
int cmx_live_comms;

/* Re-entry guard: an MPI library may implement a collective with other
 * MPI_* calls; those must go straight to MPI. */
static __thread int depth;

static int shape_routes(cmx_comm *c)
{
	if (!cmx_comm_shape(c))
		return 0;
	c->routes = (cmx_route_table_t *)cmx_go_routes_for(c->size, c->nodes, c->rpn, c->nvlink < 0 ? 0 : c->nvlink);
	return c->routes != NULL;
}

/* After collmux_set_rules, a communicator takes the new tables at its next
 * call (learning its shape then if the new rules need it and it never did). */
static void refresh_routes(cmx_comm *c)
{
	unsigned gen = __atomic_load_n(&cmx_routes_gen, __ATOMIC_ACQUIRE);
	if (!cmx_cfg.shape_rules || c->inter)
		c->routes = __atomic_load_n(&cmx_route_table, __ATOMIC_ACQUIRE);
	else if (c->nodes && (c->nvlink >= 0 || !cmx_cfg.nvlink_rules))
		c->routes = (cmx_route_table_t *)cmx_go_routes_for(c->size, c->nodes, c->rpn, c->nvlink < 0 ? 0 : c->nvlink);
	else if (!shape_routes(c))
		c->routes = __atomic_load_n(&cmx_route_table, __ATOMIC_ACQUIRE);
	c->routes_gen = gen;
}

cmx_comm *cmx_comm_get(cmx_h comm, int *rc)
{
	*rc = 0;
	if (comm == cmx_abi.comm_null)
		return NULL;
	cmx_comm *c = NULL;
	int flag = 0;
	if ((*rc = cmx_px.Comm_get_attr(comm, cmx_state.comm_keyval, &c, &flag)) != 0)
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
	c->routes = __atomic_load_n(&cmx_route_table, __ATOMIC_ACQUIRE);
	c->nvlink = -1;
	c->overlap = cmx_cfg.overlap;
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

/* Decodes what the backends read, once (cmx_args' last fields), from
 * collmux's own tables: nothing here asks MPI, so that a call MPI would
 * refuse reaches MPI's checks first. */
static void decode(cmx_args *a, const cmx_comm *c)
{
	a->role = cmx_role(a, c && c->inter, c ? c->rank : 0);
	a->opk = cmx_op_info(a->op);
	a->dclass = 0;
	for (int w = 0; w < 2; w++) {
		a->used[w] = cmx_side_used(a, a->role, w);
		if (!cmx_dtype_info(w ? a->rtype : a->stype, &a->kind[w], &a->size[w]))
			a->kind[w] = -1, a->size[w] = 0;
		a->move[w] = 0;
	}
}

/* The rest, for a device path once the call is known acceptable: the
 * bytes per element of each side used here, which asks MPI about a
 * derived datatype (a per-peer datatype, the *w collectives', has none). */
static void decode_moves(cmx_args *a)
{
	for (int w = 0; w < 2; w++)
		a->move[w] = a->used[w] && cmx_families[a->coll].span[w] != CMX_SPAN_W ? cmx_move_size(w ? a->rtype : a->stype) : 0;
}

/* Bytes that side w of a call spans on this rank (n peers on that side);
 * -1 when a derived datatype's size is not known (ask unset). */
static int64_t side_bytes(const cmx_args *a, const cmx_comm *c, int w, int n, int ask)
{
	const void *counts = w ? a->rcounts : a->scounts, *types = w ? a->rtypes : a->stypes;
	int64_t cnt = cmx_side_count(a, w, n, c ? c->rank : 0), sum = 0;
	if (cnt < 0 && types) { /* a datatype per peer */
		for (int j = 0; j < n; j++) {
			const int64_t size = cmx_type_size(cmx_type_at(types, j), ask);
			if (size < 0)
				return -1;
			sum += cmx_at(counts, j, a->large) * size;
		}
		return sum;
	}
	if (cnt < 0)
		cnt = cmx_count_sum(counts, n, a->large);
	const int64_t size = cmx_type_size(w ? a->rtype : a->stype, ask);
	return size < 0 ? -1 : cnt * size;
}

/* Message size of a call as nccl-tests counts it, from the side its
 * family names (the full buffer of allgather/alltoall/reduce_scatter and
 * of the root of gather/scatter, whose leaves count their block once per
 * peer). Returns -1 when a derived datatype's size is not known yet. */
static int64_t call_bytes(const cmx_args *a, const cmx_comm *c, int ask)
{
	const cmx_family *f = &cmx_families[a->coll];
	int nin = c ? c->size : 1, nout = nin, w = f->sized;
	if ((f->flags & CMX_FAM_NEIGHBORS) || f->span[w] == CMX_SPAN_W)
		if (cmx_peers(a, &nin, &nout) != 0)
			return -1;
	int64_t mult = 1;
	if (!a->used[w]) { /* a leaf of a rooted call, or an in-place input */
		if (f->span[w] == CMX_SPAN_EACH)
			mult = w ? nin : nout;
		if (!a->used[w = !w])
			return 0;
	}
	const int64_t b = side_bytes(a, c, w, w ? nin : nout, ask);
	return b < 0 ? -1 : b * mult;
}

static int bucket_of(uint64_t bytes)
{
	int b = bytes ? 64 - __builtin_clzll(bytes) : 0;
	return b < CMX_NBUCKET ? b : CMX_NBUCKET - 1;
}

/* Energy per statistics cell. NVML's counter is too slow to read at each
 * call and moves only every few tens of milliseconds, so device calls add
 * their time to their cell, and at most every ENERGY_NS the energy read
 * since the last share is shared out over the cells by their time in that
 * window: a cell gets the GPU's mean power over the window times its
 * calls' time (what ran beside them on the GPU counts too). */
#define ENERGY_NS 100000000ull
static uint64_t energy_pending[CMX_NCOLL * CMX_NBACKEND * CMX_NBUCKET];
static uint64_t energy_t0, energy_mj0;
static int energy_off;
static pthread_mutex_t energy_mu = PTHREAD_MUTEX_INITIALIZER;

static void energy_share(uint64_t now)
{
	uint64_t mj;
	if (energy_off || !cmx_nvml_energy(&mj)) {
		energy_off = 1;
		return;
	}
	if (energy_t0 && now > energy_t0) {
		const double uj_per_ns = (double)(mj - energy_mj0) * 1e3 / (double)(now - energy_t0);
		cmx_stat *cells = &cmx_stats[0][0][0];
		for (size_t i = 0; i < sizeof energy_pending / sizeof energy_pending[0]; i++)
			if (energy_pending[i]) {
				__atomic_fetch_add(&cells[i].uj, (uint64_t)(uj_per_ns * (double)energy_pending[i]), __ATOMIC_RELAXED);
				energy_pending[i] = 0;
			}
	}
	energy_t0 = now, energy_mj0 = mj;
}

static void energy_add(size_t cell, uint64_t ns)
{
	const uint64_t now = cmx_now_ns();
	if (energy_off || pthread_mutex_trylock(&energy_mu) != 0)
		return; /* another thread is sharing: this call's time is not counted */
	energy_pending[cell] += ns;
	if (!energy_t0 || now - energy_t0 >= ENERGY_NS)
		energy_share(now);
	pthread_mutex_unlock(&energy_mu);
}

void cmx_energy_flush(void)
{
	pthread_mutex_lock(&energy_mu);
	if (energy_t0)
		energy_share(cmx_now_ns());
	pthread_mutex_unlock(&energy_mu);
}

static void record(const cmx_args *a, int64_t bytes, int backend, int rule, uint64_t ns)
{
	int k = bucket_of(bytes < 0 ? 0 : (uint64_t)bytes);
	cmx_stat *s = &cmx_stats[a->coll][backend][k];
	if (backend != CMX_BACKEND_MPI && a->mem != CMX_MEM_HOST)
		energy_add(s - &cmx_stats[0][0][0], ns);
	__atomic_store_n(&cmx_stat_rule[a->coll][backend][k], rule + 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->calls, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->bytes, bytes < 0 ? 0 : (uint64_t)bytes, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ns, ns, __ATOMIC_RELAXED);
}

/* The memory kind of side w's buffer; -1 when it is not significant here,
 * or MPI_BOTTOM with nothing in it. MPI_BOTTOM's is that of its region's
 * first byte (asked of MPI: the datatypes' extents; rare). */
static int side_kind(const cmx_args *a, const cmx_comm *c, int w)
{
	if (!a->used[w])
		return -1;
	if (!cmx_at_bottom(a, w))
		return cmx_mem_kind(w ? a->rbuf : a->sbuf);
	int nin = 1, nout = 1;
	int64_t lo, hi;
	if ((c && cmx_peers(a, &nin, &nout) != 0) || !cmx_region(a, c, nin, nout, w, &lo, &hi) || lo > hi)
		return -1;
	return cmx_mem_kind(CMX_AT(NULL, lo));
}

/* The memory kind of a call: that of the buffers significant on this rank.
 * Every rank must reach the same kind for the same call (the rule CUDA-aware
 * MPIs also rely on); COLLMUX_CHECK verifies it. */
static int call_mem(const cmx_args *a, const cmx_comm *c)
{
	if ((!cmx_cuda_up && !cmx_cuda_probe()) || a->coll == CMX_COLL_BARRIER)
		return CMX_MEM_HOST;
	int sk = side_kind(a, c, 0), rk = side_kind(a, c, 1);
	if (sk < 0)
		return rk < 0 ? CMX_MEM_HOST : rk;
	if (rk < 0 || rk == sk)
		return sk;
	return CMX_MEM_MIXED;
}

/* The ranks of one call may pass different kinds of memory where a rank
 * can have nothing to send or receive while its peers do: a leaf of a
 * gatherv (scatterv) giving (taking) no elements, a rank of an
 * alltoallv or alltoallw exchanging none, a graph neighbourhood's rank without
 * neighbours. Such a rank's empty buffers say nothing of where the
 * program's data lives (CuPy and PyTorch pass NULL for them), so its own
 * kind is not its peers'; if it took the MPI while they took a GPU path,
 * or set one up, the ranks would wait for each other (mpi4py's suite hung
 * there) or MPI would match a stray message later. Every other call's
 * ranks share its size, and a size of 0 sends all of them to MPI; so do
 * a Cartesian neighbourhood's all-gather and all-to-all, whose counts are
 * one per rank: a rank with nothing to exchange there has neighbours with
 * nothing to exchange (the grid is connected), so none has any, and
 * kinds_agreed sends each to MPI. A communicator of one rank has no peer
 * to differ from. */
static int cartesian(const cmx_args *a)
{
	int topo = -1;
	return cmx_px.Topo_test(a->comm, &topo) == 0 && topo == cmx_abi.cart;
}

static int check(const cmx_args *a, const cmx_comm *c, uint64_t bytes, int differ);
static int dclass_of(const cmx_args *a, uint64_t bytes);

static int kinds_may_differ(const cmx_args *a, const cmx_comm *c)
{
	const unsigned f = cmx_families[a->coll].flags;
	if (c->inter || c->size == 1 || !(f & CMX_FAM_UNEVEN))
		return 0;
	return (a->coll != CMX_COLL_NEIGHBOR_ALLGATHER && a->coll != CMX_COLL_NEIGHBOR_ALLTOALL) || !cartesian(a);
}

/* The backends that run on the GPU for every rank at once (and set up
 * collectively), as opposed to the MPI and the staged path over it. */
static int gpu_path(int b) { return b == CMX_BACKEND_COPY || b == CMX_BACKEND_FUSED || b == CMX_BACKEND_NCCL; }

/* Whether side w of a call holds no bytes on this rank (nin, nout: its
 * peers on each side): no count, or a count of elements whose size is
 * known to be 0; a derived datatype's unknown size counts as bytes. */
static int side_empty(const cmx_args *a, const cmx_comm *c, int w, int nin, int nout)
{
	if (!a->used[w])
		return 1;
	const int n = w ? nin : nout;
	const void *counts = w ? a->rcounts : a->scounts;
	const int64_t cnt = cmx_side_count(a, w, n, c->rank);
	if (cnt == 0 || (cnt < 0 && cmx_count_sum(counts, n, a->large) == 0))
		return 1;
	return side_bytes(a, c, w, n, 0) == 0;
}

/* The memory kind a call whose ranks' kinds may differ (kinds_may_differ,
 * or a Cartesian neighbourhood's) takes here. A rank takes the MPI, or a
 * path that is MPI underneath (staged), unless every rank knows that
 * every rank takes the GPU path. On a communicator whose ranks have
 * already made a device call together (devup, which every rank holds
 * alike), a blocking call, or a persistent call's initialization (which
 * may wait for its peers), agrees on it, where a GPU path could take it
 * (gatherv, scatterv, alltoallv, a Cartesian neighbourhood's v forms;
 * NCCL runs no other neighbourhood and no alltoallw): each rank says
 * whether its buffers that hold bytes are on the device and whether any
 * are the MPI's to read (host, managed). With device data alone
 * anywhere, every rank takes the device kind, those without bytes too;
 * with both, the device ranks are staged (*stage). Elsewhere nothing is
 * agreed: a rank without bytes takes the MPI and the device ranks are
 * staged (nonblocking calls too, whose start must not wait for the
 * peers). *agreed: 0, or 1 plus whether any rank has device data;
 * *dclass: the agreed datatype class plus 1 (cmx_args.dclass), 0 where
 * none was; *rc: the error where the check or the agreement failed. */
static int kinds_agreed(const cmx_args *a, const cmx_comm *c, int differ, int *agreed, int *stage, int *dclass, int *rc)
{
	int nin = c->size, nout = c->size, kind = -1, empty = 1;
	*agreed = *stage = *dclass = *rc = 0;
	if ((cmx_families[a->coll].flags & CMX_FAM_NEIGHBORS) && cmx_peers(a, &nin, &nout) != 0)
		return a->mem; /* no topology: MPI's error */
	for (int w = 0; w < 2; w++)
		if (!side_empty(a, c, w, nin, nout)) {
			const int k = side_kind(a, c, w);
			empty = 0;
			if (k >= 0)
				kind = kind < 0 || kind == k ? k : CMX_MEM_MIXED;
		}
	const int mine = empty ? CMX_MEM_HOST : kind < 0 ? a->mem : kind;
	const int nbr_v = a->coll == CMX_COLL_NEIGHBOR_ALLGATHERV || a->coll == CMX_COLL_NEIGHBOR_ALLTOALLV;
	const int gpu_may = a->coll == CMX_COLL_GATHERV || a->coll == CMX_COLL_SCATTERV || a->coll == CMX_COLL_ALLTOALLV || (nbr_v && cartesian(a));
	if (!differ || !c->devup || !gpu_may || a->form == CMX_FORM_NONBLOCKING) {
		*stage = differ;
		return mine;
	}
	/* (MIXED: device memory on one side, host or managed on the other);
	 * and the class of the elements, which the ranks with bytes share and
	 * the empty ones take: their datatype may be any (mpi4py passes
	 * MPI_BYTE for None), and a rule's dtype= condition must not send
	 * them elsewhere */
	int flags[3] = {mine == CMX_MEM_DEVICE || mine == CMX_MEM_MIXED, !empty && mine != CMX_MEM_DEVICE, empty ? 0 : dclass_of(a, UINT64_MAX) + 1}, all[3];
	if (cmx_cfg.check && (*rc = check(a, c, UINT64_MAX, 1)) != 0) /* COLLMUX_CHECK's own exchange first: a peer in another collective makes it too */
		return mine;
	if (cmx_px.Allreduce(flags, all, 3, cmx_abi.int_, cmx_abi.op_max, c->handle) != 0) {
		*rc = cmx_error(a->comm, cmx_abi.err_other);
		return mine;
	}
	*agreed = 1 + all[0];
	*stage = all[0] && all[1];
	*dclass = all[2];
	return all[0] && !all[1] ? CMX_MEM_DEVICE : mine;
}

/* Size used to route a call. It must be the same on every rank, so the
 * collectives whose sizes differ between ranks are routed as the largest. */
static uint64_t route_bytes(const cmx_args *a, const cmx_comm *c)
{
	if (cmx_families[a->coll].flags & CMX_FAM_UNEVEN) /* counts or neighbourhood degrees differ between ranks */
		return UINT64_MAX;
	/* on device memory a derived type's size is asked of MPI, so that the
	 * rank passing one routes by what its peers' basic types add up to
	 * (acceptable() has turned the erroneous calls away); a host call's
	 * handles reach MPI's checks first */
	int64_t b = call_bytes(a, c, a->mem != CMX_MEM_HOST);
	return b < 0 ? UINT64_MAX : (uint64_t)b;
}

/* The datatype class a call routes by: that of the kind of the elements
 * in its type signature, which matching calls share, whatever datatypes
 * carry it (a contiguous type of floats on one rank, floats on another).
 * Its datatype on this rank: the significant one (a gather's send type
 * off the root, a scatter's receive type). A call of no bytes, and one of
 * a datatype per peer, are "other" (their ranks may pass any types). On
 * host memory, where the call's handles reach MPI's checks before any of
 * collmux's questions, a derived type is "other" too: host calls all end
 * on MPI. */
static int dclass_of(const cmx_args *a, uint64_t bytes)
{
	if (a->dclass)
		return a->dclass - 1;
	const int w = a->used[1];
	if (cmx_families[a->coll].span[w] == CMX_SPAN_W || bytes == 0)
		return CMX_DCLASS_OTHER;
	const cmx_h t = w ? a->rtype : a->stype;
	int kind = a->kind[w];
	if (kind < 0)
		kind = cmx_host_readable(a->mem) ? CMX_KIND_OTHER : cmx_sig_kind(t);
	else if (kind == CMX_KIND_PAIR)
		kind = cmx_sig_kind(t); /* MPI_2INT: ints */
	if (kind >= CMX_KIND_INT8 && kind <= CMX_KIND_UINT64)
		return CMX_DCLASS_INT;
	if (kind >= CMX_KIND_FLOAT16 && kind <= CMX_KIND_LONGDOUBLE)
		return CMX_DCLASS_FLOAT;
	return CMX_DCLASS_OTHER;
}

static const cmx_route *pick(const cmx_comm *c, const cmx_args *a, uint64_t bytes)
{
	const cmx_routes *rs = &(*c->routes)[c->overlap][a->form != CMX_FORM_BLOCKING][a->coll][a->mem][dclass_of(a, bytes)];
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
	cmx_go_explain(a->coll, a->mem, bytes, backend, rule, wanted);
}

/* COLLMUX_CHECK: every rank must call the same collective with the same
 * memory kind, root, op and size. A disagreement would otherwise hang (one
 * rank in NCCL, another in MPI); here it is an error naming the ranks. */
enum { FP_COLL, FP_MEM, FP_ROOT, FP_OP, FP_BYTES, FP_N };
static const char *const fp_names[FP_N] = {"collective", "memory kind (0 host, 1 cuda, 2 managed, 3 mixed)", "root", "op", "message size"};

static int check(const cmx_args *a, const cmx_comm *c, uint64_t bytes, int differ)
{
	/* bytes is the routing size: UINT64_MAX where ranks may differ or the
	 * size is not known yet */
	/* (a call of no bytes goes to MPI whatever its memory, which may be a
	 * NULL pointer on one rank and device memory on the others; where
	 * the ranks' kinds may differ, kinds_agreed has made them fit) */
	int mine[FP_N] = {a->coll, bytes == 0 || differ ? -1 : a->mem, a->root, a->op ? a->opk : -1, bytes == UINT64_MAX ? -1 : (int)bytes};
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

/* The size COLLMUX_CHECK compares: the routing size, except that on host
 * memory, where routing leaves a derived datatype's size to MPI (unknown,
 * so -1), the check asks MPI for it: a contiguous type on one rank and
 * basic elements on another are one size, not a disagreement. A null
 * datatype is left to MPI's own check of the call. */
static uint64_t check_bytes(const cmx_args *a, const cmx_comm *c, uint64_t bytes)
{
	if (bytes != UINT64_MAX || a->mem != CMX_MEM_HOST || (cmx_families[a->coll].flags & CMX_FAM_UNEVEN))
		return bytes;
	for (int w = 0; w < 2; w++) {
		const cmx_h t = w ? a->rtype : a->stype;
		if (a->used[w] && (!t || t == cmx_abi.dtype_null))
			return bytes;
	}
	const int64_t b = call_bytes(a, c, 1);
	return b < 0 ? UINT64_MAX : (uint64_t)b;
}

/* The backends, in the order a call falls back through them: a call goes
 * to the backend its route names and, if that one declines (for a reason
 * every rank shares: the call's shape, datatype, op, memory kind, or the
 * path being off for the communicator), to the next. The MPI takes every
 * call. Each keeps its state of a communicator private and releases it. */
typedef struct {
	int id; /* CMX_BACKEND_* */
	int (*run)(cmx_comm *c, const cmx_args *a, int *rc); /* 1: took the call, its result in *rc; 0: declines */
	void (*release)(cmx_comm *c); /* the communicator is freed */
	void (*finalize)(void);       /* MPI_Finalize */
} backend;

static int mpi_run(cmx_comm *c, const cmx_args *a, int *rc)
{
	(void)c;
	*rc = cmx_forward(a);
	return 1;
}

static const backend backends[] = {
	{CMX_BACKEND_COPY, cmx_copy_run, cmx_copy_release, NULL},
	{CMX_BACKEND_FUSED, cmx_fused_run, cmx_fused_release, cmx_fused_release_all},
	{CMX_BACKEND_NCCL, cmx_nccl_run, cmx_nccl_release, cmx_nccl_release_all},
	{CMX_BACKEND_STAGED, cmx_staged_run, NULL, cmx_staged_finalize},
	{CMX_BACKEND_MPI, mpi_run, NULL, NULL},
};
#define NBACKENDS ((int)(sizeof backends / sizeof backends[0]))
_Static_assert(NBACKENDS == (int)CMX_NBACKEND, "every backend has a place in the fallback order");

/* One backend's try at a call; while an NVTX tool listens, inside a
 * range named after the call, its bytes and the backend. A backend that
 * declines thus shows as a range of its own (a sliver, unless it spent
 * time setting up) before the one that took the call. */
static int attempt(const backend *b, cmx_comm *c, const cmx_args *a, int *rc)
{
	if (CMX_LIKELY(!cmx_nvtx_on))
		return b->run(c, a, rc);
	cmx_nvtx_push(a, b->id, call_bytes(a, c, a->mem != CMX_MEM_HOST)); /* host calls' handles: see route_bytes */
	int took = b->run(c, a, rc);
	cmx_nvtx_pop();
	return took;
}

static int run(cmx_comm *c, const cmx_args *a, int wanted, int *used)
{
	int i = 0, rc = 0;
	while (i < NBACKENDS - 1 && backends[i].id != wanted)
		i++;
	for (;; i++)
		if (attempt(&backends[i], c, a, &rc))
			return *used = backends[i].id, rc;
}

void cmx_backends_release(cmx_comm *c)
{
	for (int i = 0; i < NBACKENDS; i++)
		if (backends[i].release)
			backends[i].release(c);
	cmx_gate_close(c);
}

void cmx_backends_finalize(void)
{
	for (int i = 0; i < NBACKENDS; i++)
		if (backends[i].finalize)
			backends[i].finalize();
}

/* Whether a device backend may run a call on device memory. One that MPI
 * would refuse (a root outside the communicator, a negative count or one
 * whose bytes overflow, MPI_IN_PLACE as a receive buffer, a null datatype
 * or op, a predefined op on a derived datatype, MINLOC or MAXLOC on a
 * datatype that is not a pair) goes to MPI, whose own checks report it
 * before any buffer is read, and before COLLMUX_CHECK communicates (the
 * peers of an erroneous call may not be in it; only a call whose ranks
 * agree on their memory kinds first, kinds_agreed, communicates before
 * this): returns CMX_BACKEND_MPI.
 * A predefined op on a predefined datatype that collmux does not know
 * (MPI_C_LONG_DOUBLE_COMPLEX, MPI_2REAL, ...) is for MPI to judge, but
 * MPI itself would read the device buffers: it goes to the staged path,
 * where MPI reduces host copies or refuses them as it would natively
 * (every rank passes that same datatype): returns CMX_BACKEND_STAGED,
 * as for an op complex numbers do not take (MAX), which MPI refuses.
 * Else -1. Other predefined datatypes an op is not defined on are left
 * to the path: MPIs differ there (Open MPI sums MPI_BYTE, MPICH
 * refuses), and every rank passes the same one. Only what is significant
 * on this rank is judged, as MPI does: a non-root's receive datatype of
 * a gather may be MPI_DATATYPE_NULL, its count anything. */
static int vet(const cmx_args *a, const cmx_comm *c)
{
	const int64_t max = INT64_C(1) << 48; /* elements: no 8-byte multiple overflows */
	const int root = a->role & (CMX_ROLE_ROOT | CMX_ROLE_INTER_ROOT);
	int unknown = 0, invalid = 0; /* a predefined op on a datatype collmux's table lacks, or on complex numbers it is not defined on */
	for (int w = 0; w < 2; w++) {
		const int64_t n = w ? a->rcount : a->scount;
		if (a->used[w] && (n < 0 || n > max || (!a->stypes && (w ? a->rtype : a->stype) == cmx_abi.dtype_null)))
			return CMX_BACKEND_MPI;
	}
	/* (a non-root's receive buffer of a reduce or gather is not
	 * significant: MPI_IN_PLACE there is as good as any other value) */
	const int rsig = cmx_families[a->coll].who[1] & a->role;
	if (a->rbuf == cmx_abi.in_place && rsig && a->coll != CMX_COLL_SCATTER && a->coll != CMX_COLL_SCATTERV)
		return CMX_BACKEND_MPI;
	if (a->op == cmx_abi.op_null && a->op)
		return CMX_BACKEND_MPI;
	if ((cmx_families[a->coll].flags & CMX_FAM_REDUCES) && a->opk != CMX_OP_USER) {
		const int loc = a->opk == CMX_OP_MINLOC || a->opk == CMX_OP_MAXLOC;
		if (a->kind[1] >= 0 && loc && a->kind[1] != CMX_KIND_PAIR)
			return CMX_BACKEND_MPI;
		unknown = a->kind[1] < 0; /* asked of MPI once the rest is known well formed */
		if (!unknown && cmx_kind_complex(a->kind[1]) && !cmx_op_valid[a->opk][a->kind[1]])
			invalid = 1; /* MAX on complex numbers: MPI's error, from host copies */
	}
	if (cmx_rooted(a->coll) && !c->inter && (a->root < 0 || a->root >= c->size))
		return CMX_BACKEND_MPI;
	const void *arrays[2] = {cmx_arrays_read(a, 0, root) ? a->scounts : NULL, cmx_arrays_read(a, 1, root) ? a->rcounts : NULL};
	int nin = c->size, nout = c->size;
	if ((arrays[0] || arrays[1]) && cmx_peers(a, &nin, &nout) != 0)
		return CMX_BACKEND_MPI;
	for (int w = 0; w < 2; w++)
		for (int j = 0; arrays[w] && j < (w ? nin : nout); j++)
			if (cmx_at(arrays[w], j, a->large) < 0 || cmx_at(arrays[w], j, a->large) > max)
				return CMX_BACKEND_MPI;
	if (unknown)
		return cmx_type_derived(a->rtype) ? CMX_BACKEND_MPI : CMX_BACKEND_STAGED;
	return invalid ? CMX_BACKEND_STAGED : -1;
}

/* A complex sum on device memory is a sum of real and imaginary parts:
 * b becomes the call as floats (or doubles) of twice the count, which
 * every device path reduces; returns whether it did. MPI's other ops on
 * complex numbers (PROD) stay complex, for the staged path. Only calls of
 * one count (not MPI_Reduce_scatter's array), and only while twice it
 * still fits the call's count type: the staged path passes it on. Every
 * rank passes the same datatype and op, so every rank decides alike. */
static int complex_parts(const cmx_args *a, cmx_args *b)
{
	const int k = a->kind[1], dbl = k == CMX_KIND_COMPLEX128;
	const int narrow = !a->large || !cmx_pmpi[a->fn]; /* the MPI takes int counts */
	if (a->opk != CMX_OP_SUM || !cmx_kind_complex(k) || a->kind[0] != k || a->rcounts || a->scount < 0 || a->rcount < 0 ||
	    (narrow && (a->scount > INT_MAX / 2 || a->rcount > INT_MAX / 2)))
		return 0;
	*b = *a;
	b->stype = b->rtype = dbl ? cmx_abi.double_ : cmx_abi.float_;
	b->scount *= 2, b->rcount *= 2;
	for (int w = 0; w < 2; w++)
		b->kind[w] = dbl ? CMX_KIND_FLOAT64 : CMX_KIND_FLOAT32, b->size[w] = a->size[w] / 2, b->move[w] /= 2;
	return 1;
}

/* The steps of routing that a device call and a persistent init share.
 * device_shape: the backend a call on device memory is left to by its
 * arguments (vet; -1: none); unless that is MPI, its moves are decoded
 * and, a complex sum, *a becomes its parts (in *parts). route: the
 * backend and rule (-1: none) the routes give a call of `bytes` on
 * intracommunicator c; a call of no bytes (a size every rank shares) is
 * MPI's on every rank, whatever its buffers, of which one rank's may be
 * NULL (an empty tensor's) while its peers' are device pointers. */
static int device_shape(const cmx_comm *c, cmx_args **a, cmx_args *parts)
{
	const int must = vet(*a, c);
	if (must != CMX_BACKEND_MPI) {
		decode_moves(*a);
		if (complex_parts(*a, parts))
			*a = parts; /* routed and run as parts; the caller keeps its own */
	}
	return must;
}

static int route(const cmx_comm *c, const cmx_args *a, uint64_t bytes, int *rule)
{
	const cmx_route *r = bytes ? pick(c, a, bytes) : NULL;
	*rule = r ? r->rule : -1;
	return r ? r->backend : CMX_BACKEND_MPI;
}

static int start(cmx_args *a);

/* A persistent call's initialization is nonlocal (MPI-4.1, section 6.13:
 * it may wait for its peers), its starts are not: the device paths a
 * start may take or fall back through are set up here, collectively,
 * rather than at the first start, which would wait there for every rank.
 * Every rank decides from what it shares with its peers: the call's
 * route, and the paths' states. */
static void prepare(cmx_comm *c, const cmx_args *a)
{
	cmx_args d = *a, parts, *p = &d;
	int rule;
	if (device_shape(c, &p, &parts) >= 0) /* MPI or the staged path: nothing to set up */
		return;
	const int b = route(c, p, route_bytes(p, c), &rule);
	const void *buf = a->used[1] ? a->rbuf : a->sbuf;
	if (b == CMX_BACKEND_COPY || b == CMX_BACKEND_FUSED)
		cmx_fused_ready(c, buf);
	if (gpu_path(b))
		cmx_nccl_ready(c, buf);
}

/* the rule of a persistent call collmux holds: nothing routed it, its
 * starts are routed (and explained) each as a call of its own */
enum { HELD = -2 };

/* A collective in any form. A persistent one whose buffers are on the
 * device (or that the MPI lacks) is collmux's own: each start routes its
 * nonblocking form as a call of its own. */
static int collective(cmx_args *a, cmx_comm **cp, int *backend, int *used, int *rule, uint64_t *bytes)
{
	int rc = 0;
	cmx_comm *c = *cp = cmx_comm_get(a->comm, &rc);
	if (rc != 0) /* an invalid communicator: MPI has said so through its handler, once */
		return rc;
	if (c && CMX_UNLIKELY(c->routes_gen != cmx_routes_gen))
		refresh_routes(c);
	decode(a, c);
	a->mem = call_mem(a, c);
	/* kinds_agreed: differ, agreed (2: some rank has device data), stage */
	int differ = 0, agreed = 0, stage = 0;
	if (c && !c->inter && (cmx_families[a->coll].flags & CMX_FAM_UNEVEN)) {
		differ = kinds_may_differ(a, c);
		if (cmx_cuda_up) { /* (devup implies CUDA up on every rank) */
			int dclass;
			a->mem = kinds_agreed(a, c, differ, &agreed, &stage, &dclass, &rc);
			if (rc != 0)
				return rc;
			a->dclass = dclass;
		}
	}
	/* A persistent call: of no bytes, the MPI's on every rank, as below.
	 * Where the ranks' kinds may differ, the MPI's only where every rank
	 * agreed that none has device data, else collmux's on every rank: an
	 * empty rank must not make the MPI's own persistent call while a
	 * device peer makes collmux's, built on the nonblocking call (MPI-4
	 * does not match the two; Open MPI's libnbc takes a persistent call's
	 * tag once, at its init). */
	if (a->form == CMX_FORM_PERSISTENT) {
		const int mpi = cmx_pmpi[a->fn] && (differ ? agreed == 1 : a->mem == CMX_MEM_HOST || (c && !c->inter && route_bytes(a, c) == 0));
		if (mpi)
			return cmx_forward(a);
		if (c && !c->inter && a->mem == CMX_MEM_DEVICE && !differ) /* (where kinds may differ, starts are staged: kinds_agreed) */
			prepare(c, a);
		*rule = HELD;
		return cmx_req_persistent(a, start);
	}
	int must = -1; /* the backend the call's arguments leave it to */
	cmx_args parts;
	if (c && !cmx_host_readable(a->mem) && (must = device_shape(c, &a, &parts)) == CMX_BACKEND_MPI)
		return run(c, a, CMX_BACKEND_MPI, used);
	if (c && !c->inter) {
		*bytes = route_bytes(a, c);
		*backend = route(c, a, *bytes, rule);
		if (*bytes == 0) /* MPI's on every rank, whatever the arguments leave it to */
			must = -1;
		if (cmx_cfg.check && must < 0 && !agreed && (rc = check(a, c, check_bytes(a, c, *bytes), differ)) != 0) /* staged: MPI judges the call; agreed: checked */
			return rc;
	} else if (c && !cmx_host_readable(a->mem)) {
		*backend = CMX_BACKEND_STAGED; /* an intercommunicator: no GPU path spans two groups */
	}
	if (must >= 0)
		*backend = must, *rule = -1;
	if (stage && gpu_path(*backend))
		*backend = CMX_BACKEND_STAGED, *rule = -1; /* MPI underneath, as a peer without bytes has it */
	if (c && !c->inter && a->mem == CMX_MEM_DEVICE && *bytes != 0 && !stage)
		c->devup = 1; /* a device call every rank makes alike (kinds_agreed) */
	/* the device backends move bytes: a datatype that does not move as
	 * bytes on this rank is packed, not declined, or this rank would be
	 * staged while its peers, passing the same signature in basic
	 * elements, ran the device backend (the copy path's refusal is
	 * agreed, but the fused path it falls back to decides alone) */
	cmx_args b;
	cmx_packed *rp = NULL;
	if (c && !c->inter && a->mem == CMX_MEM_DEVICE && gpu_path(*backend)) {
		const int packed = cmx_repack(c, a, &b, &rp);
		if (packed < 0)
			return cmx_error(a->comm, cmx_abi.err_other);
		if (packed) /* b moves bytes of MPI_BYTE; packed at every start, never prepared */
			decode(&b, c), decode_moves(&b), b.prep = NULL;
	}
	rc = run(c, rp ? &b : a, *backend, used);
	return rp ? cmx_repack_done(rp, a, rc) : rc;
}

/* Point-to-point and local calls: the MPI matches every message; device
 * buffers travel as host copies (staged). MPI_Reduce_local on device
 * memory runs collmux's kernel where it has the op (fused), else staged.
 * Nothing here may communicate: no peer is in a collective call. */
static int solo(cmx_args *a, int *used)
{
	decode(a, NULL);
	a->mem = call_mem(a, NULL);
	if (cmx_host_readable(a->mem))
		return run(NULL, a, CMX_BACKEND_MPI, used);
	decode_moves(a);
	if (a->form == CMX_FORM_PERSISTENT)
		return *used = CMX_BACKEND_STAGED, cmx_req_persistent(a, start);
	cmx_args parts;
	if (complex_parts(a, &parts)) /* MPI_Reduce_local */
		a = &parts;
	const int local = cmx_coll_class[a->coll] == CMX_CLASS_LOCAL && !cmx_at_bottom(a, 0) && !cmx_at_bottom(a, 1);
	return run(NULL, a, local ? CMX_BACKEND_FUSED : CMX_BACKEND_STAGED, used);
}

/* Statistics and the timeline of a call (COLLMUX_STATS, COLLMUX_TRACE)
 * that took `used`, started at t0 and moved `moved` bytes. */
static void account(const cmx_args *a, int64_t moved, int used, int rule, uint64_t t0, int rc)
{
	const uint64_t t1 = cmx_now_ns();
	/* a persistent call is counted at each start, in its nonblocking form */
	if (cmx_cfg.stats && rc == 0 && a->form != CMX_FORM_PERSISTENT)
		record(a, moved, used, rule, t1 - t0);
	if (cmx_cfg.trace) /* every call, its set-up and failures too (the event says which) */
		cmx_trace_add(a, used, moved, t0, t1, rc);
}

int cmx_dispatch(cmx_args *a)
{
	if (cmx_cfg.disable || depth || !cmx_mpi_setup()) /* an MPI-4 persistent call the MPI lacks is still collmux's */
		return a->form == CMX_FORM_PERSISTENT && !cmx_pmpi[a->fn] ? cmx_req_persistent(a, start) : cmx_forward(a);
	depth++;
	a->stype = cmx_norm(a->stype);
	a->rtype = cmx_norm(a->rtype);
	a->op = cmx_norm(a->op);
	a->comm = cmx_norm(a->comm);
	int backend = CMX_BACKEND_MPI, used = CMX_BACKEND_MPI, rule = -1;
	const int timed = cmx_cfg.stats | cmx_cfg.trace;
	uint64_t bytes = 0, t0 = timed ? cmx_now_ns() : 0;
	cmx_comm *c = NULL;
	const int coll = cmx_coll_class[a->coll] == CMX_CLASS_COLLECTIVE;
	int rc = coll ? collective(a, &c, &backend, &used, &rule, &bytes) : solo(a, &used);
	if (!coll)
		backend = used;
	if (a->prep && a->prep->backend) { /* the backend prepared this start: the rest of what later starts need */
		if (rc == 0 && used == a->prep->backend && c && !cmx_cfg.check)
			a->prep->rule = rule, a->prep->overlap = c->overlap, a->prep->routes_gen = c->routes_gen, a->prep->bytes = call_bytes(a, c, 1);
		else
			a->prep->backend = CMX_BACKEND_MPI;
	}
	if (CMX_UNLIKELY(timed))
		account(a, call_bytes(a, c, 1), used, rule, t0, rc);
	if (cmx_cfg.log >= CMX_LOG_DECISIONS && rule != HELD)
		explain(a, bytes, used, rule, backend);
	depth--;
	return rc;
}

/* Each start of a persistent call collmux runs (mpi/request.c) is its
 * nonblocking form. The first is routed as any call; if the backend that
 * took it prepared it (fused: the job it rang), the later ones run that
 * again without routing while nothing the route was chosen by changed:
 * the rules, the communicator's mode, the backend's state (which the
 * backend checks). A start is then what the issue of persistent calls
 * asks: the doorbell, the default-stream query and the request. Every
 * rank decides from what its peers share: each prepared its own first
 * start the same way, and the changes are collective ones. COLLMUX_CHECK
 * agrees on every call, so nothing is prepared under it. */
static int start(cmx_args *a)
{
	cmx_prepared *p = a->prep;
	if (p && p->backend == CMX_BACKEND_FUSED && !depth && !cmx_cfg.disable) {
		int rc = 0;
		cmx_comm *c = cmx_comm_get(a->comm, &rc);
		if (rc != 0) /* MPI has said so through its handler, once */
			return rc;
		if (c && c->routes_gen == cmx_routes_gen && p->routes_gen == c->routes_gen && p->overlap == c->overlap) {
			const int timed = cmx_cfg.stats | cmx_cfg.trace;
			const uint64_t t0 = timed ? cmx_now_ns() : 0;
			depth++;
			const int took = cmx_fused_restart(c, a, p, &rc);
			depth--;
			if (took && CMX_UNLIKELY(timed))
				account(a, p->bytes, CMX_BACKEND_FUSED, p->rule, t0, rc);
			if (took)
				return rc;
		}
	}
	if (p)
		*p = (cmx_prepared){0};
	return cmx_dispatch(a);
}
