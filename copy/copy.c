//go:build collmux_lib

/*
 * copy.c: the copy-engine backend. The collectives that only move data
 * (all-gather(v), all-to-all, bcast, gather, scatter) between the GPUs of
 * one node run as peer copies on the GPUs' copy engines, which take no SM
 * from the kernels the program runs meanwhile (docs/design.md, "Beside
 * computation"). Each rank maps the buffers its peers read from
 * (CUDA IPC, cached by allocation) and pulls its share into its own
 * buffers; the host, not the GPU, orders the ranks: one allgather of the
 * buffers' handles before the copies (every rank's data is ready), one
 * allreduce of the outcome after them (every rank is done reading). A
 * copy within one GPU runs on its SMs, not its copy engines: beside a
 * GEMM it waits for the GEMM's blocks, whatever its stream's priority
 * (docs/results/gpu-2026-11-30-overlap). So a rank's own block is copied
 * by its neighbour's copy engine through both mappings, which takes no SM
 * but moves only ~70 GB/s: at large sizes the path is slower alone than
 * NCCL, and as fast beside a GEMM as alone.
 * Blocking calls only; the router's fallback order sends the rest on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmx.h"

#define MAX_PEERS 8 /* ranks of a node the path serves */
#define MAPS 16     /* allocations of one peer kept mapped */

/* Where a peer reads from: the allocation (id 0: none), its handle, and
 * the offset in it. */
typedef struct {
	cmx_ipc_handle h;
	uint64_t id, off;
} region_t;

/* What a rank tells its peers at each call: the data they pull from it,
 * its own block's source and destination (which its neighbour copies,
 * below) and whether it can run the call at all. */
typedef struct {
	region_t src, own_src, own_dst;
	uint64_t own_bytes;
	int32_t ok, pad;
} rec_t;

/* A peer allocation mapped here; used orders them for eviction. */
typedef struct {
	uint64_t id, used;
	char *base;
} map_t;

/* One transfer into this rank: bytes from `at` past the data a peer
 * exports to dst; for the rank's own block, from src. */
typedef struct {
	char *dst;
	const char *src;
	uint64_t at, bytes;
} move_t;

struct cmx_copy {
	void *stream[MAX_PEERS]; /* one a peer, so that copies from several peers run on several engines */
	map_t maps[MAX_PEERS][MAPS];
	uint64_t tick;
	rec_t *recs; /* the last call's, one a rank */
};

/* Whether the path can serve c at all: one node, at most MAX_PEERS ranks,
 * one GPU each, the streams made. Collective; every rank decides from the
 * same gathered facts. */
static void setup(cmx_comm *c, const void *buf)
{
	struct {
		char bus[32];
		int ok;
	} me, *all = calloc((size_t)c->size, sizeof me);
	struct cmx_copy *k = calloc(1, sizeof *k);
	c->copy_state = -1;
	memset(&me, 0, sizeof me);
	int arch = 0;
	me.ok = all && k && (k->recs = calloc((size_t)c->size, sizeof(rec_t))) && c->size <= MAX_PEERS && cmx_cuda_ipc_capable() && cmx_cuda_ctx_for(buf) &&
		cmx_cuda_device(&arch, me.bus, sizeof me.bus);
	for (int p = 0; p < c->size && me.ok; p++)
		me.ok = (k->stream[p] = cmx_cuda_stream_high()) != NULL;
	const char *why = NULL;
	if (!cmx_comm_agree(c, all != NULL)) /* a rank without the memory must not skip the allgather */
		why = "a rank is out of memory";
	else if ((c->nodes || cmx_comm_shape(c)) && c->nodes != 1)
		why = "the ranks span several nodes";
	else if (!c->nodes || cmx_px.Allgather(&me, (int)sizeof me, cmx_abi.byte, all, (int)sizeof me, cmx_abi.byte, c->handle) != 0)
		why = "its set-up could not gather the ranks' facts";
	for (int p = 0; p < c->size && !why; p++) {
		if (!all[p].ok)
			why = "some rank has no CUDA device, streams or room";
		for (int q = 0; q < p && !why; q++)
			if (strcmp(all[p].bus, all[q].bus) == 0)
				why = "two ranks share a GPU";
	}
	free(all);
	if (why) {
		if (c->rank == 0)
			cmx_log(1, "copy-engine path off for a communicator of %d ranks: %s", c->size, why);
		if (k) {
			for (int p = 0; p < MAX_PEERS; p++)
				cmx_cuda_stream_free(k->stream[p]);
			free(k->recs);
		}
		free(k);
		return;
	}
	c->copy = k;
	c->copy_state = 1;
}

/* The moves of call a into this rank, one a rank (mv[me]: its own block,
 * from src), and what its peers read from it (*exp). 0 when the path cannot
 * carry the call: a datatype that is not one contiguous run, or an
 * in-place all-to-all (each rank would overwrite what its peers read). */
static int plan(const cmx_args *a, const cmx_comm *c, const void **exp, move_t *mv)
{
	const int n = c->size, me = c->rank, ip = a->sbuf == cmx_abi.in_place, root = a->root;
	const char *s = a->sbuf;
	char *r = a->rbuf;
	memset(mv, 0, sizeof *mv * (size_t)n);
	*exp = NULL;
	/* element sizes: each side's where it is significant on this rank,
	 * else the other's (in place, the one buffer of a bcast) */
	if ((a->used[0] && !a->move[0]) || (a->used[1] && !a->move[1]))
		return 0;
	const int64_t ss = a->used[0] ? a->move[0] : a->move[1], rs = a->used[1] ? a->move[1] : a->move[0];
	if (!rs || !ss)
		return 0;
	const uint64_t blk = (uint64_t)a->rcount * (uint64_t)rs;
	switch (a->coll) {
	case CMX_COLL_ALLGATHER:
		*exp = ip ? r + (size_t)me * blk : s;
		for (int p = 0; p < n; p++)
			mv[p] = (move_t){r + (size_t)p * blk, p == me && !ip ? s : NULL, 0, p == me && ip ? 0 : blk};
		return 1;
	case CMX_COLL_ALLGATHERV: {
		for (int p = 0; p < n; p++) {
			char *at = r + cmx_at(a->rdispls, p, a->large) * rs;
			mv[p] = (move_t){at, p == me && !ip ? s : NULL, 0, p == me && ip ? 0 : (uint64_t)cmx_at(a->rcounts, p, a->large) * (uint64_t)rs};
			if (p == me)
				*exp = ip ? at : s;
		}
		return 1;
	}
	case CMX_COLL_ALLTOALL:
		if (ip)
			return 0;
		*exp = s;
		for (int p = 0; p < n; p++)
			mv[p] = (move_t){r + (size_t)p * blk, p == me ? s + (size_t)me * blk : NULL, (uint64_t)me * blk, blk};
		return 1;
	case CMX_COLL_BCAST:
		if (me == root)
			*exp = r;
		else
			mv[root] = (move_t){r, NULL, 0, blk};
		return 1;
	case CMX_COLL_GATHER:
		if (me != root) {
			*exp = s;
			return 1;
		}
		for (int p = 0; p < n; p++)
			mv[p] = (move_t){r + (size_t)p * blk, p == me && !ip ? s : NULL, 0, p == me && ip ? 0 : blk};
		return 1;
	case CMX_COLL_SCATTER: {
		const uint64_t sblk = (uint64_t)a->scount * (uint64_t)ss;
		if (me == root) {
			*exp = s;
			if (r != cmx_abi.in_place)
				mv[me] = (move_t){r, s + (size_t)me * sblk, 0, sblk};
		} else {
			mv[root] = (move_t){r, NULL, (uint64_t)me * blk, blk};
		}
		return 1;
	}
	default:
		return 0;
	}
}

/* Peer p's allocation id, mapped here; NULL when it cannot be. The least
 * recently used mapping makes room: a peer's freed allocation stays
 * mapped (its memory held, at most MAPS allocations a peer) until then. */
static char *mapped(struct cmx_copy *k, int p, const region_t *rec)
{
	map_t *m = k->maps[p], *victim = &m[0];
	for (int i = 0; i < MAPS; i++) {
		if (m[i].id == rec->id && m[i].base) {
			m[i].used = ++k->tick;
			return m[i].base;
		}
		if (m[i].used < victim->used)
			victim = &m[i];
	}
	char *base = cmx_cuda_ipc_open(rec->h);
	if (!base)
		return NULL; /* the mapping that would have made room stays */
	cmx_cuda_ipc_close(victim->base);
	*victim = (map_t){rec->id, ++k->tick, base};
	return base;
}

/* p's region for a peer to map; 0 when it cannot be shared */
static int export(const void *p, region_t *r) { return cmx_cuda_export(p, &r->id, &r->off, &r->h); }

/* Where a peer's region lies here; NULL when it cannot be mapped. */
static char *at(struct cmx_copy *k, int p, const region_t *r)
{
	char *base = r->id ? mapped(k, p, r) : NULL;
	return base ? base + r->off : NULL;
}

int cmx_copy_run(cmx_comm *c, const cmx_args *a, int *rc)
{
	if (!c || c->inter || a->mem != CMX_MEM_DEVICE || a->form != CMX_FORM_BLOCKING || c->copy_state < 0)
		return 0;
	switch (a->coll) {
	case CMX_COLL_ALLGATHER:
	case CMX_COLL_ALLGATHERV:
	case CMX_COLL_ALLTOALL:
	case CMX_COLL_BCAST:
	case CMX_COLL_GATHER:
	case CMX_COLL_SCATTER:
		break;
	default:
		return 0;
	}
	/* a buffer significant on this rank, whose context the copies run in */
	const void *sig = a->used[1] ? a->rbuf : a->sbuf;
	if (c->copy_state == 0)
		setup(c, sig);
	if (c->copy_state != 1)
		return 0;
	struct cmx_copy *k = c->copy;
	const int n = c->size, me = c->rank, next = (me + 1) % n;
	move_t mv[MAX_PEERS];
	const void *exp = NULL;
	rec_t mine = {0};
	/* the program's work on the legacy default stream has written this
	 * rank's buffers before its peers may read them */
	mine.ok = plan(a, c, &exp, mv) && cmx_cuda_ctx_for(sig) && (!cmx_cfg.order_default_stream || cmx_cuda_legacy_idle());
	if (mine.ok && n > 1 && mv[me].bytes) {
		mine.own_bytes = mv[me].bytes;
		mine.ok = export(mv[me].src, &mine.own_src) && export(mv[me].dst, &mine.own_dst);
		mv[me].bytes = 0; /* the neighbour's to copy */
	}
	if (mine.ok && exp)
		mine.ok = export(exp, &mine.src);
	if (cmx_px.Allgather(&mine, (int)sizeof mine, cmx_abi.byte, k->recs, (int)sizeof mine, cmx_abi.byte, c->handle) != 0)
		return *rc = cmx_error(a->comm, cmx_abi.err_other), 1;
	for (int p = 0; p < n; p++)
		if (!k->recs[p].ok)
			return 0; /* every rank read the same records: all go on to the next path */
	int ok = 1;
	for (int p = 0; p < n && ok; p++) {
		if (!mv[p].bytes)
			continue;
		const char *from = p == me ? mv[p].src : at(k, p, &k->recs[p].src);
		ok = from && cmx_cuda_copy(mv[p].dst, from + mv[p].at, mv[p].bytes, k->stream[p]);
	}
	const rec_t *nr = &k->recs[next];
	if (ok && next != me && nr->own_bytes) {
		char *to = at(k, next, &nr->own_dst);
		const char *from = at(k, next, &nr->own_src);
		ok = to && from && cmx_cuda_copy(to, from, nr->own_bytes, k->stream[next]);
	}
	for (int p = 0; p < n; p++)
		ok &= cmx_cuda_sync(k->stream[p]);
	/* every rank is done with its peers' buffers before any returns: the
	 * outcome's allreduce is the barrier */
	if (!cmx_comm_agree(c, ok)) {
		if (ok || me == 0)
			cmx_log(1, "%s on a communicator of %d ranks: a peer copy failed (CUDA error %d here); the call goes on the next path",
				cmx_fn_names[a->fn], n, cmx_cuda_last_error());
		return 0;
	}
	*rc = 0;
	return 1;
}

void cmx_copy_release(cmx_comm *c)
{
	struct cmx_copy *k = c ? c->copy : NULL;
	if (!k)
		return;
	for (int p = 0; p < MAX_PEERS; p++) {
		cmx_cuda_sync(k->stream[p]);
		cmx_cuda_stream_free(k->stream[p]);
		for (int i = 0; i < MAPS; i++)
			cmx_cuda_ipc_close(k->maps[p][i].base);
	}
	free(k->recs);
	free(k);
	c->copy = NULL;
	c->copy_state = -1;
}
