/*
 * nccl.c: the NCCL backend. libnccl is loaded with dlopen (COLLMUX_NCCL_LIB
 * or libnccl.so.2); no NCCL header is needed. One NCCL communicator per MPI
 * communicator, created on its first device collective and destroyed with
 * it (or at MPI_Finalize).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmx.h"

typedef struct {
	char internal[128];
} nccl_id;
typedef void *nccl_comm;

static struct {
	int (*GetUniqueId)(nccl_id *);
	int (*CommInitRank)(nccl_comm *, int, nccl_id, int);
	int (*CommDestroy)(nccl_comm);
	int (*AllReduce)(const void *, void *, size_t, int, int, nccl_comm, void *);
	int (*Reduce)(const void *, void *, size_t, int, int, int, nccl_comm, void *);
	int (*Broadcast)(const void *, void *, size_t, int, int, nccl_comm, void *);
	int (*AllGather)(const void *, void *, size_t, int, nccl_comm, void *);
	int (*ReduceScatter)(const void *, void *, size_t, int, int, nccl_comm, void *);
	int (*Send)(const void *, size_t, int, int, nccl_comm, void *);
	int (*Recv)(void *, size_t, int, int, nccl_comm, void *);
	int (*GroupStart)(void);
	int (*GroupEnd)(void);
	const char *(*GetErrorString)(int);
	int (*GetVersion)(int *);
	int (*CommAbort)(nccl_comm);
	int (*CommGetAsyncError)(nccl_comm, int *);
} nc;

enum { NCCL_UINT8 = 1 };
/* CMX_KIND_* -> ncclDataType_t, -1 where NCCL has no such type (a
 * complex sum reaches NCCL as a sum of its parts: dispatch) */
static int nccl_type(int kind)
{
	switch (kind) {
	case CMX_KIND_INT8: return 0;
	case CMX_KIND_UINT8: return 1;
	case CMX_KIND_INT32: return 2;
	case CMX_KIND_UINT32: return 3;
	case CMX_KIND_INT64: return 4;
	case CMX_KIND_UINT64: return 5;
	case CMX_KIND_FLOAT16: return 6;
	case CMX_KIND_FLOAT32: return 7;
	case CMX_KIND_FLOAT64: return 8;
	case CMX_KIND_BFLOAT16: return 9;
	}
	return -1;
}
/* CMX_OP_* -> ncclRedOp_t */
static int nccl_op(int op)
{
	switch (op) {
	case CMX_OP_SUM: return 0;
	case CMX_OP_PROD: return 1;
	case CMX_OP_MAX: return 2;
	case CMX_OP_MIN: return 3;
	}
	return -1;
}

static int loaded;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void)
{
	const char *name = cmx_cfg.nccl_lib[0] ? cmx_cfg.nccl_lib : "libnccl.so.2";
	void *h = cmx_cuda_present ? dlopen(name, RTLD_NOW | RTLD_LOCAL) : NULL;
	if (!h) {
		cmx_log(0, "NCCL not available (%s): device collectives take the staged path", cmx_cuda_present ? dlerror() : "no CUDA driver");
		return;
	}
#define SYM(f) (*(void **)&nc.f = dlsym(h, "nccl" #f))
	SYM(GetUniqueId), SYM(CommInitRank), SYM(CommDestroy), SYM(AllReduce), SYM(Reduce), SYM(Broadcast);
	SYM(AllGather), SYM(ReduceScatter), SYM(Send), SYM(Recv), SYM(GroupStart), SYM(GroupEnd);
	SYM(GetErrorString), SYM(GetVersion), SYM(CommAbort), SYM(CommGetAsyncError);
#undef SYM
	loaded = nc.GetUniqueId && nc.CommInitRank && nc.AllReduce && nc.Send && nc.Recv && nc.GroupEnd && nc.GetErrorString;
	int v = 0;
	if (nc.GetVersion)
		nc.GetVersion(&v);
	cmx_log(loaded ? 1 : 0, "NCCL %s: version %d", loaded ? "loaded" : "incomplete, not used", v);
}

int cmx_nccl_load(void)
{
	pthread_once(&load_once, load);
	return loaded;
}

static pthread_mutex_t list_mu = PTHREAD_MUTEX_INITIALIZER;
static cmx_comm *with_nccl;

/* Whether two ranks of c run on one GPU (the same bus id on one node), as
 * under MPS: NCCL refuses them, but only after its set-up has started,
 * at every communicator, and each refusal prints a failure. Collective: every rank reads the same
 * table (all: room for c->size places); where it cannot be gathered,
 * NCCL's own set-up judges. */
static int shares_gpu(cmx_comm *c, cmx_place *all)
{
	cmx_place me;
	int arch, shared = 0;
	memset(&me, 0, sizeof me);
	cmx_place_here(c->rank, c->size, &me, &arch);
	if (cmx_px.Allgather(&me, (int)sizeof me, cmx_abi.byte, all, (int)sizeof me, cmx_abi.byte, c->handle) == 0)
		for (int p = 0; p < c->size && !shared; p++)
			for (int q = p + 1; q < c->size && !shared; q++)
				shared = all[p].bus[0] && !strcmp(all[p].host, all[q].host) && !strcmp(all[p].bus, all[q].bus);
	if (shared && c->rank == 0)
		cmx_log(1, "NCCL off for a communicator of %d ranks: some of its ranks share a GPU, which NCCL refuses", c->size);
	return shared;
}

/* setup creates the NCCL communicator of c. It is collective over c, and
 * every rank takes the same branches: readiness is agreed with PMPI before
 * NCCL is initialised and success agreed after. */
static void setup(cmx_comm *c, const void *buf)
{
	c->nccl_state = -1;
	cmx_place *all = calloc((size_t)c->size, sizeof *all);
	const int off = !cmx_comm_agree(c, all && cmx_nccl_load() && cmx_cuda_ctx_for(buf)) || shares_gpu(c, all);
	free(all);
	if (off)
		return;
	struct {
		int ok;
		nccl_id id;
	} msg;
	memset(&msg, 0, sizeof msg);
	if (c->rank == 0)
		msg.ok = nc.GetUniqueId(&msg.id) == 0;
	if (cmx_px.Bcast(&msg, (int)sizeof msg, cmx_abi.byte, 0, c->handle) != 0)
		msg.ok = 0;
	if (!cmx_comm_agree(c, msg.ok)) /* one rank's failed bcast must not leave its peers in NCCL's set-up */
		return;
	/* non-blocking: the program's copies on the legacy default stream
	 * must not wait for a kernel that waits for the peers; each call
	 * waits for the program's work there with an event instead */
	c->stream = cmx_cuda_stream_new(1);
	int r = c->stream ? nc.CommInitRank(&c->nccl, c->size, msg.id, c->rank) : -1;
	if (!cmx_comm_agree(c, r == 0)) {
		cmx_log(0, "NCCL communicator set-up failed (%s): this communicator's device collectives take the staged path",
			r == 0 ? "on another rank" : (r > 0 ? nc.GetErrorString(r) : "no stream"));
		cmx_nccl_release(c);
		c->nccl_state = -1;
		return;
	}
	c->nccl_ctx = cmx_cuda_ctx_current();
	c->nccl_state = 1;
	cmx_comm_gate(c); /* MPI_THREAD_MULTIPLE: calls start once every rank is in (gate.c) */
	pthread_mutex_lock(&list_mu);
	c->next = with_nccl;
	with_nccl = c;
	pthread_mutex_unlock(&list_mu);
}

int cmx_nccl_ready(cmx_comm *c, const void *buf)
{
	if (c->nccl_state == 0)
		setup(c, buf);
	return c->nccl_state == 1;
}

int cmx_nccl_sum_on(cmx_comm *c, void *buf, size_t n, int kind, size_t rows, size_t stride, void *stream)
{
	if (!cmx_nccl_ready(c, buf) || nccl_type(kind) < 0 || !nc.GroupStart)
		return 0;
	int r = nc.GroupStart();
	for (size_t i = 0; i < rows && r == 0; i++)
		r = nc.AllReduce((char *)buf + i * stride, (char *)buf + i * stride, n, nccl_type(kind), 0, c->nccl, stream);
	const int end = nc.GroupEnd();
	return r == 0 && end == 0;
}

void cmx_nccl_release(cmx_comm *c)
{
	if (!c || (!c->nccl && !c->stream))
		return;
	pthread_mutex_lock(&list_mu);
	for (cmx_comm **p = &with_nccl; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	pthread_mutex_unlock(&list_mu);
	if (c->nccl)
		nc.CommDestroy(c->nccl);
	cmx_cuda_free(c->scratch);
	cmx_cuda_free(c->scratch_old);
	cmx_cuda_stream_free(c->stream);
	cmx_cuda_event_free(c->after_legacy);
	c->nccl = c->stream = c->scratch = c->scratch_old = c->after_legacy = c->nccl_ctx = NULL;
	c->scratch_cap = 0;
	c->nccl_state = -1;
}

void cmx_nccl_release_all(void)
{
	while (with_nccl)
		cmx_nccl_release(with_nccl);
}

/* Grows the scratch buffer. The old one is freed at the next call, before
 * its gate: freeing memory waits for the whole device, which must not
 * happen while the peers' kernels wait for this rank's (gate.c). */
static void *scratch(cmx_comm *c, size_t n)
{
	if (c->scratch_cap < n) {
		c->scratch_old = c->scratch;
		c->scratch = cmx_cuda_malloc(n);
		c->scratch_cap = c->scratch ? n : 0;
	}
	return c->scratch;
}

#define BYTES(p, off) ((char *)(p) + (off))
#define CK(x)                      \
	do {                       \
		if ((r = (x)) != 0) \
			goto done;  \
	} while (0)

static int enqueue(cmx_comm *c, const cmx_args *a);

/* A reduction whose buffers are not aligned to its element size, run on
 * 256-byte-aligned copies in the scratch buffer: the send data is copied
 * in, the call runs out of place there, the result is copied out (in
 * place, MPI puts it at the start of the receive buffer). */
static int enqueue_aligned(cmx_comm *c, const cmx_args *a, size_t size)
{
	const int me = c->rank, n = c->size, L = a->large;
	size_t in = (size_t)a->rcount * size, out = in;
	if (a->coll == CMX_COLL_REDUCE_SCATTER_BLOCK)
		in *= (size_t)n;
	if (a->coll == CMX_COLL_REDUCE_SCATTER) {
		in = (size_t)cmx_count_sum(a->rcounts, n, L) * size;
		out = (size_t)cmx_at(a->rcounts, me, L) * size;
	}
	const size_t off = (in + 255) & ~(size_t)255;
	char *t = scratch(c, off + out + 1);
	cmx_args b = *a;
	b.sbuf = t, b.rbuf = t + off;
	if (!t || !cmx_cuda_copy(t, a->sbuf == cmx_abi.in_place ? a->rbuf : a->sbuf, in, c->stream))
		return -1;
	int r = enqueue(c, &b);
	if (r == 0 && (a->coll != CMX_COLL_REDUCE || me == a->root) && !cmx_cuda_copy(a->rbuf, t + off, out, c->stream))
		r = -1;
	return r;
}

/* A neighborhood collective of plain types on a Cartesian communicator:
 * one NCCL group of sends to the destinations and receives from the
 * sources. Where a periodic dimension of one or two ranks makes a rank its
 * own neighbour twice, the MPIs pair the two blocks differently (Open MPI
 * in posting order, MPICH reversed), and graph topologies may repeat an
 * edge on some ranks only: those are staged, so that the MPI's own
 * pairing holds. The tests on both are the same on every rank (the
 * dimensions; the topology kind). */
static int enqueue_neighbors(cmx_comm *c, const cmx_args *a)
{
	const int ss = a->move[0], rs = a->move[1], L = a->large;
	const int v = a->coll == CMX_COLL_NEIGHBOR_ALLGATHERV || a->coll == CMX_COLL_NEIGHBOR_ALLTOALLV;
	const int all = a->coll == CMX_COLL_NEIGHBOR_ALLTOALL || a->coll == CMX_COLL_NEIGHBOR_ALLTOALLV;
	int nin, nout, cart, r = -1;
	/* a side with no neighbours moves nothing: its datatype, which may be
	 * anything there, must not make this rank alone decline */
	if (a->coll == CMX_COLL_NEIGHBOR_ALLTOALLW || cmx_peers(a, &nin, &nout) != 0 || (nout && !ss) || (nin && !rs))
		return -2;
	int *src = malloc(sizeof(int) * (size_t)(nin + nout + 1)), *dst = src + nin;
	if (!src || cmx_neighbors(a, nin, nout, src, dst, &cart) != 0) {
		free(src);
		return -1;
	}
	for (int d = 0; cart && d < nin / 2; d++)
		if (src[2 * d] == src[2 * d + 1] && src[2 * d] != cmx_abi.proc_null)
			cart = 0;
	if (!cart) {
		free(src);
		return -2;
	}
	if ((r = nc.GroupStart()) != 0)
		goto out;
	for (int j = 0; j < nout && r == 0; j++) {
		size_t cnt = a->coll == CMX_COLL_NEIGHBOR_ALLTOALLV ? (size_t)cmx_at(a->scounts, j, L) : (size_t)a->scount;
		size_t off = !all ? 0 : a->coll == CMX_COLL_NEIGHBOR_ALLTOALLV ? (size_t)cmx_at(a->sdispls, j, L) : (size_t)j * a->scount;
		if (dst[j] != cmx_abi.proc_null && cnt)
			r = nc.Send(BYTES(a->sbuf, off * ss), cnt * ss, NCCL_UINT8, dst[j], c->nccl, c->stream);
	}
	for (int j = 0; j < nin && r == 0; j++) {
		size_t cnt = v ? (size_t)cmx_at(a->rcounts, j, L) : (size_t)a->rcount;
		size_t off = v ? (size_t)cmx_at(a->rdispls, j, L) : (size_t)j * a->rcount;
		if (src[j] != cmx_abi.proc_null && cnt)
			r = nc.Recv(BYTES(a->rbuf, off * rs), cnt * rs, NCCL_UINT8, src[j], c->nccl, c->stream);
	}
	int r2 = nc.GroupEnd();
	r = r ? r : r2;
out:
	free(src);
	return r;
}

/* enqueue runs one collective on NCCL; returns an ncclResult_t, or -2 when
 * NCCL cannot express the call. */
static int enqueue(cmx_comm *c, const cmx_args *a)
{
	const int me = c->rank, n = c->size, ip = a->sbuf == cmx_abi.in_place, L = a->large;
	nccl_comm nk = c->nccl;
	void *st = c->stream;
	int size, r = 0;
	switch (a->coll) {
	case CMX_COLL_ALLREDUCE:
	case CMX_COLL_REDUCE:
	case CMX_COLL_REDUCE_SCATTER_BLOCK:
	case CMX_COLL_REDUCE_SCATTER: {
		const int kind = a->kind[1], op = a->opk;
		if (kind < 0 || nccl_type(kind) < 0 || nccl_op(op) < 0 || !cmx_op_valid[op][kind])
			return -2;
		int dt = nccl_type(kind), o = nccl_op(op);
		size = a->size[1];
		const void *s = ip ? a->rbuf : a->sbuf;
		/* NCCL's kernels fault (and kill the CUDA context) on elements
		 * that straddle their alignment; a rank may not turn the call
		 * down for it either (the others would run NCCL and wait), so
		 * it runs through an aligned copy */
		if (((uintptr_t)s | (uintptr_t)(a->coll == CMX_COLL_REDUCE && me != a->root ? NULL : a->rbuf)) % (unsigned)size)
			return enqueue_aligned(c, a, (size_t)size);
		if (a->coll == CMX_COLL_ALLREDUCE)
			return nc.AllReduce(s, a->rbuf, (size_t)a->rcount, dt, o, nk, st);
		if (a->coll == CMX_COLL_REDUCE)
			return nc.Reduce((ip && me == a->root) ? a->rbuf : a->sbuf, a->rbuf, (size_t)a->rcount, dt, o, a->root, nk, st);
		if (a->coll == CMX_COLL_REDUCE_SCATTER_BLOCK) {
			size_t blk = (size_t)a->rcount * (size_t)size;
			if (!ip)
				return nc.ReduceScatter(s, a->rbuf, (size_t)a->rcount, dt, o, nk, st);
			/* MPI leaves an in-place result at the start of recvbuf,
			 * NCCL at this rank's block: run in NCCL's layout, then move */
			CK(nc.ReduceScatter(a->rbuf, BYTES(a->rbuf, me * blk), (size_t)a->rcount, dt, o, nk, st));
			return me && !cmx_cuda_copy(a->rbuf, BYTES(a->rbuf, me * blk), blk, st) ? -1 : 0;
		}
		/* reduce_scatter: one reduce per block, rooted at its owner */
		size_t off = 0;
		void *tmp = NULL; /* in place, this rank's block is reduced here, then moved to the front */
		if (ip && !(tmp = scratch(c, (size_t)cmx_at(a->rcounts, me, L) * size + 1)))
			return -1;
		CK(nc.GroupStart());
		for (int j = 0; j < n; j++) {
			size_t cnt = (size_t)cmx_at(a->rcounts, j, L);
			void *out = j == me ? (ip ? tmp : a->rbuf) : NULL;
			if ((r = nc.Reduce(BYTES(s, off), out, cnt, dt, o, j, nk, st)) != 0)
				break;
			off += cnt * size;
		}
		int r2 = nc.GroupEnd();
		if (r || r2)
			return r ? r : r2;
		return ip && !cmx_cuda_copy(a->rbuf, tmp, (size_t)cmx_at(a->rcounts, me, L) * size, st) ? -1 : 0;
	}
	case CMX_COLL_BCAST:
		if (!(size = a->move[1]))
			return -2;
		return nc.Broadcast(a->rbuf, a->rbuf, (size_t)a->rcount * size, NCCL_UINT8, a->root, nk, st);
	case CMX_COLL_ALLGATHER: {
		if (!(size = a->move[1]) || (a->used[0] && !a->move[0]))
			return -2;
		size_t blk = (size_t)a->rcount * size;
		return nc.AllGather(ip ? BYTES(a->rbuf, me * blk) : a->sbuf, a->rbuf, blk, NCCL_UINT8, nk, st);
	}
	case CMX_COLL_NEIGHBOR_ALLGATHER:
	case CMX_COLL_NEIGHBOR_ALLGATHERV:
	case CMX_COLL_NEIGHBOR_ALLTOALL:
	case CMX_COLL_NEIGHBOR_ALLTOALLV:
	case CMX_COLL_NEIGHBOR_ALLTOALLW:
		return enqueue_neighbors(c, a);
	default:
		break;
	}
	/* the rest are point-to-point patterns in one NCCL group. MPI_IN_PLACE
	 * is the send buffer, except in scatter, where the root passes it as
	 * the receive buffer. */
	const int ip_r = a->rbuf == cmx_abi.in_place;
	const int root = a->root, rs = a->move[1];
	int ss = a->move[0]; /* in place, the receive side's */
	const char *sb = ip ? NULL : a->sbuf;
	char *rb = ip_r ? NULL : a->rbuf;
	switch (a->coll) {
	case CMX_COLL_ALLGATHERV:
	case CMX_COLL_ALLTOALL:
	case CMX_COLL_ALLTOALLV:
	case CMX_COLL_GATHER:
	case CMX_COLL_GATHERV:
	case CMX_COLL_SCATTER:
	case CMX_COLL_SCATTERV:
		break;
	default:
		return -2;
	}
	/* the sides that matter on this rank must move as bytes (the others
	 * may be anything) */
	if ((a->used[0] && !ss) || (a->used[1] && !rs))
		return -2;
	if (ip && (a->coll == CMX_COLL_ALLTOALL || a->coll == CMX_COLL_ALLTOALLV)) {
		/* in place: send from a copy of the receive buffer */
		size_t span = 0;
		for (int j = 0; j < n; j++) {
			size_t d = a->coll == CMX_COLL_ALLTOALL ? (size_t)j * a->rcount : (size_t)cmx_at(a->rdispls, j, L);
			size_t k = a->coll == CMX_COLL_ALLTOALL ? (size_t)a->rcount : (size_t)cmx_at(a->rcounts, j, L);
			if (k && (d + k) * rs > span) /* an empty block's displacement is anything */
				span = (d + k) * rs;
		}
		char *tmp = scratch(c, span + 1);
		if (!tmp || !cmx_cuda_copy(tmp, rb, span, st))
			return -1;
		sb = tmp, ss = rs;
	}
	CK(nc.GroupStart());
	for (int j = 0; j < n; j++) {
		size_t sc = 0, so = 0, rc = 0, ro = 0; /* bytes to send to j / receive from j, and offsets */
		int send = 0, recv = 0;
		switch (a->coll) {
		case CMX_COLL_ALLGATHERV:
			send = 1, recv = 1;
			sc = ip ? (size_t)cmx_at(a->rcounts, me, L) * rs : (size_t)a->scount * ss;
			rc = (size_t)cmx_at(a->rcounts, j, L) * rs, ro = (size_t)cmx_at(a->rdispls, j, L) * rs;
			if (ip)
				sb = rb + (size_t)cmx_at(a->rdispls, me, L) * rs;
			break;
		case CMX_COLL_GATHER:
		case CMX_COLL_GATHERV:
			send = j == root;
			recv = me == root;
			sc = ip ? 0 : (size_t)a->scount * ss;
			if (recv) {
				int v = a->coll == CMX_COLL_GATHERV;
				rc = v ? (size_t)cmx_at(a->rcounts, j, L) * rs : (size_t)a->rcount * rs;
				ro = v ? (size_t)cmx_at(a->rdispls, j, L) * rs : (size_t)j * a->rcount * rs;
			}
			break;
		case CMX_COLL_SCATTER:
		case CMX_COLL_SCATTERV: {
			int v = a->coll == CMX_COLL_SCATTERV;
			send = me == root;
			recv = j == root;
			if (send) {
				sc = v ? (size_t)cmx_at(a->scounts, j, L) * ss : (size_t)a->scount * ss;
				so = v ? (size_t)cmx_at(a->sdispls, j, L) * ss : (size_t)j * a->scount * ss;
			}
			rc = ip_r ? 0 : (size_t)a->rcount * rs;
			break;
		}
		case CMX_COLL_ALLTOALL:
			send = recv = 1;
			sc = (size_t)(ip ? a->rcount : a->scount) * ss, so = j * sc;
			rc = (size_t)a->rcount * rs, ro = j * rc;
			break;
		case CMX_COLL_ALLTOALLV: {
			const void *cnt = ip ? a->rcounts : a->scounts, *dsp = ip ? a->rdispls : a->sdispls;
			send = recv = 1;
			sc = (size_t)cmx_at(cnt, j, L) * ss, so = (size_t)cmx_at(dsp, j, L) * ss;
			rc = (size_t)cmx_at(a->rcounts, j, L) * rs, ro = (size_t)cmx_at(a->rdispls, j, L) * rs;
			break;
		}
		}
		if (j == me && (ip || ip_r))
			continue; /* the rank's own block is already in place */
		if (send && sc && (r = nc.Send(sb + so, sc, NCCL_UINT8, j, nk, st)) != 0)
			break;
		if (recv && rc && (r = nc.Recv(rb + ro, rc, NCCL_UINT8, j, nk, st)) != 0)
			break;
	}
	{
		int r2 = nc.GroupEnd();
		if (!r)
			r = r2;
	}
done:
	return r;
}

/* A nonblocking call's request: done once the stream passes its event;
 * failed once COLLMUX_TIMEOUT has passed since the call was queued at
 * `start` (a peer that never joins would otherwise leave MPI_Wait waiting
 * forever). Its NCCL kernels may still wait on the device: the next
 * blocking call on the communicator finds them in its wait_stream, which
 * aborts the NCCL communicator. */
static int event_poll(void *event, uint64_t start)
{
	int d = cmx_cuda_event_done(event);
	return d == 0 && cmx_now_ns() - start > (uint64_t)cmx_cfg.timeout * 1000000000ull ? -1 : d;
}

enum { NCCL_IN_PROGRESS = 7, WAIT_TIMEOUT = -3 };

/* Waits for a blocking call's work on the stream, but not forever: NCCL's
 * kernels wait for peers that may never come (a rank that died or hangs,
 * ranks that disagree). After COLLMUX_TIMEOUT seconds, or when NCCL
 * reports an asynchronous error, the NCCL communicator is aborted
 * (ncclCommAbort stops its kernels and returns, where ncclCommDestroy
 * could block) and the call fails; the MPI communicator's later device
 * calls are staged. Returns 0, an ncclResult_t, WAIT_TIMEOUT, or -1 (a
 * CUDA error). */
static int wait_stream(cmx_comm *c)
{
	const uint64_t limit = (uint64_t)cmx_cfg.timeout * 1000000000ull, start = cmx_now_ns();
	int err = 0;
	for (unsigned spins = 1;; spins++) {
		int q = cmx_cuda_query(c->stream);
		if (q != 0)
			return q > 0 ? 0 : -1;
		if (spins % 256 == 0) {
			if (nc.CommGetAsyncError && nc.CommGetAsyncError(c->nccl, &err) == 0 && err != 0 && err != NCCL_IN_PROGRESS)
				break;
			if (cmx_now_ns() - start > limit) {
				err = WAIT_TIMEOUT;
				break;
			}
		}
		cmx_cpu_relax();
	}
	if (nc.CommAbort)
		nc.CommAbort(c->nccl);
	c->nccl = NULL; /* aborted: not destroyed again */
	return err;
}

int cmx_nccl_run(cmx_comm *c, const cmx_args *a, int *rc)
{
	if (!c || a->mem != CMX_MEM_DEVICE || c->inter || c->nccl_state < 0)
		return 0;
	/* a buffer significant here (a non-root's receive buffer of a reduce
	 * may be anything), whose context the call runs in */
	const void *any = a->used[1] ? a->rbuf : a->sbuf;
	if (c->nccl_state == 0)
		setup(c, any);
	if (c->nccl_state != 1)
		return 0;
	/* a nonblocking call queues its work and returns; an event completes its request */
	const int async = a->form == CMX_FORM_NONBLOCKING;
	if (cmx_gate_refuses(c, a))
		return 0;
	/* the peers run NCCL now: a failure is an error, not a fallback.
	 * Under MPI_THREAD_MULTIPLE, NCCL's kernels start once every rank is
	 * in the call (gate.c) */
	cmx_cuda_free(c->scratch_old);
	c->scratch_old = NULL;
	cmx_gate_arrive(c->gate);
	/* a rank with nothing to exchange, whose peers agreed it onto NCCL
	 * (dispatch/router.c, kinds_agreed), may pass NULL from a thread
	 * without a current context: NCCL's */
	const int ready = cmx_cuda_ctx_or(any, c->nccl_ctx) && (!cmx_cfg.order_default_stream || cmx_cuda_after_legacy(c->stream, &c->after_legacy));
	const int go = cmx_gate_wait(c->gate, a, ready);
	int r = go ? enqueue(c, a) : -1;
	if (r == -2)
		return 0; /* not expressible: the dispatcher stages it */
	if (r == 0 && async) {
		/* the request completes once the stream passes this event */
		void *ev = cmx_cuda_event_after(c->stream);
		if (ev && cmx_req_device(a, event_poll, ev, cmx_now_ns(), cmx_cuda_event_free) == 0) {
			*rc = 0;
			return 1;
		}
		cmx_cuda_event_free(ev);
		r = -1;
	} else if (r == 0) {
		r = wait_stream(c);
	}
	if (r != 0) {
		if (r == WAIT_TIMEOUT)
			fprintf(stderr, "collmux: %s on rank %d of %d: NCCL did not complete within COLLMUX_TIMEOUT=%d s (a peer never "
					"joined the call, or died); the NCCL communicator is aborted, later device calls on this "
					"communicator are staged\n",
				cmx_fn_names[a->fn], c->rank, c->size, cmx_cfg.timeout);
		else if (!ready || go) /* else the gate said why */
			fprintf(stderr, "collmux: %s on rank %d of %d failed in NCCL: %s\n", cmx_fn_names[a->fn], c->rank, c->size,
				r > 0 ? nc.GetErrorString(r) : "CUDA error");
		if (!c->nccl)
			cmx_nccl_release(c); /* aborted: the rest of its state goes too, and the path is off */
		*rc = cmx_error(a->comm, cmx_abi.err_other);
		return 1;
	}
	*rc = 0;
	return 1;
}
