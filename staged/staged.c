/*
 * staged.c: the staged backend. Device buffers are copied to host memory,
 * the call runs on the real MPI with host pointers, and results are copied
 * back. It expresses everything MPI does (scans, MAXLOC, user ops, derived
 * datatypes, mixed host/device arguments, point-to-point with MPI's own
 * matching), at host speed. A nonblocking call keeps its host copies until
 * it completes, when requests.c copies the results back.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cmx.h"

/* Adds to [lo, hi) the bytes that `count` elements of dtype occupy,
 * starting at disp elements (or disp bytes, when bytes is set: the *w
 * collectives) from the buffer. */
static int block(cmx_h dtype, int64_t disp, int bytes, int64_t count, int64_t *lo, int64_t *hi)
{
	if (count <= 0)
		return 1;
	cmx_aint ext, tlb, text;
	if (!cmx_type_extents(dtype, &ext, &tlb, &text))
		return 0;
	int64_t l = (bytes ? disp : disp * ext) + tlb, h = l + (count - 1) * ext + text;
	if (*lo > *hi || l < *lo)
		*lo = l;
	if (h > *hi)
		*hi = h;
	return 1;
}

/* Adds the n blocks of a vector argument (counts, displacements and, for
 * the *w collectives, one datatype each). */
static int blocks(const cmx_args *a, int which, int n, int64_t *lo, int64_t *hi)
{
	const void *cnts = which ? a->rcounts : a->scounts, *dsps = which ? a->rdispls : a->sdispls;
	const void *types = which ? a->rtypes : a->stypes;
	const int w = types != NULL, aint = cmx_displs_aint(a);
	for (int j = 0; j < n; j++)
		if (!block(w ? cmx_type_at(types, j) : which ? a->rtype : a->stype, cmx_at(dsps, j, aint), w, cmx_at(cnts, j, a->large), lo, hi))
			return 0;
	return 1;
}

int cmx_region(const cmx_args *a, const cmx_comm *c, int nin, int nout, int which, int64_t *lo, int64_t *hi)
{
	*lo = 1, *hi = 0;
	if (!a->used[which]) /* not significant on this rank, or MPI_IN_PLACE */
		return 1;
	const int n = which ? nin : nout;
	const int64_t cnt = cmx_side_count(a, which, n, c ? c->rank : 0);
	return cnt < 0 ? blocks(a, which, n, lo, hi) : block(which ? a->rtype : a->stype, 0, 0, cnt, lo, hi);
}

/* Pinned staging memory of blocking calls, one buffer per thread, grown
 * on demand. It is freed when its thread exits (the key's destructor) and
 * at MPI_Finalize (cmx_staged_finalize), so that programs that start and
 * end threads do not pile up pinned memory. A thread holds its buffer
 * (busy) from staging() to unstage(); teardown frees only buffers it can
 * take hold of itself, leaving one a thread is still using (in a call
 * made during MPI_Finalize, which is erroneous) to that thread's exit. */
typedef struct stage_buf {
	char *p;
	size_t cap;
	int busy;
	struct stage_buf *next;
} stage_buf;
static pthread_mutex_t stage_mu = PTHREAD_MUTEX_INITIALIZER;
static stage_buf *stages; /* every live thread's, for teardown */
static pthread_key_t stage_key;
static pthread_once_t stage_once = PTHREAD_ONCE_INIT;
static __thread stage_buf *mine;

static void stage_free(stage_buf *b)
{
	/* freeing pinned memory wants its context current, which an exiting
	 * thread may not have */
	if (b->p)
		cmx_cuda_ctx_for(b->p);
	cmx_cuda_host_free(b->p);
	b->p = NULL, b->cap = 0;
}

static void stage_exit(void *v)
{
	stage_buf *b = v;
	pthread_mutex_lock(&stage_mu);
	for (stage_buf **q = &stages; *q; q = &(*q)->next)
		if (*q == b) {
			*q = b->next;
			break;
		}
	pthread_mutex_unlock(&stage_mu);
	stage_free(b);
	free(b);
	mine = NULL; /* a later call in another key's destructor starts afresh */
}

static void stage_key_make(void) { pthread_key_create(&stage_key, stage_exit); }

static char *staging(size_t n)
{
	if (!mine) {
		stage_buf *b = calloc(1, sizeof *b);
		if (!b || pthread_once(&stage_once, stage_key_make) != 0 || pthread_setspecific(stage_key, b) != 0) {
			free(b);
			return NULL;
		}
		pthread_mutex_lock(&stage_mu);
		b->next = stages, stages = b;
		pthread_mutex_unlock(&stage_mu);
		mine = b;
	}
	int idle = 0;
	while (!__atomic_compare_exchange_n(&mine->busy, &idle, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		idle = 0, cmx_cpu_relax(); /* teardown is freeing it */
	if (mine->cap < n) {
		stage_free(mine);
		mine->p = cmx_cuda_host_alloc(n);
		mine->cap = mine->p ? n : 0;
	}
	if (!mine->p)
		__atomic_store_n(&mine->busy, 0, __ATOMIC_RELEASE);
	return mine->p;
}

static void unstage(void) { __atomic_store_n(&mine->busy, 0, __ATOMIC_RELEASE); }

void cmx_staged_finalize(void)
{
	pthread_mutex_lock(&stage_mu);
	for (stage_buf *b = stages; b; b = b->next) {
		int idle = 0;
		if (__atomic_compare_exchange_n(&b->busy, &idle, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
			stage_free(b);
			__atomic_store_n(&b->busy, 0, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&stage_mu);
	cmx_pinned_release(); /* the pool too: a request completing later returns its copies to it */
}

/* A call with device buffers that the staged path cannot stage fails
 * here, with a message naming it: the next backend, the MPI, would read
 * the device addresses itself. */
static int declined(const cmx_args *a, int *rc, const char *why)
{
	const int bottom = cmx_at_bottom(a, 0) || cmx_at_bottom(a, 1);
	cmx_log(0, "%s: device memory could not be staged (%s%s); the call fails with MPI_ERR_OTHER", cmx_fn_names[a->fn], why,
		bottom ? "; a buffer of MPI_BOTTOM must have its blocks in one allocation" : "");
	*rc = cmx_error(a->comm, cmx_abi.err_other);
	return 1;
}

/* The runs of set bytes in mask[0, len): how many, each stored where
 * runs is not NULL. */
static int mask_runs(const unsigned char *mask, size_t len, cmx_run *runs)
{
	int k = 0;
	for (size_t i = 0, j; i < len; i = j) {
		for (j = i; j < len && !mask[j] == !mask[i]; j++)
			;
		if (mask[i] && runs)
			runs[k] = (cmx_run){i, j - i};
		k += mask[i] != 0;
	}
	return k;
}

/* The blocks of a receive region [lo, lo + len) that count elements of
 * type put data in, as offsets from lo (*n of them, malloc'd); NULL where
 * MPI cannot say, and the whole region then goes back. A datatype's gaps
 * are not the call's: the program may write there while it runs (another
 * receive's column of the same array), and a whole copy back would undo
 * that. The blocks are where MPI_Unpack of as many 0xff bytes lands. */
static cmx_run *runs_of(const cmx_args *a, int64_t lo, size_t len, int *n)
{
	int size = 0;
	*n = 0;
	if (cmx_px.Type_size(a->rtype, &size) != 0 || size <= 0 || a->rcount <= 0 || (int64_t)size * a->rcount > INT_MAX ||
	    a->rcount > INT_MAX)
		return NULL;
	const int total = size * (int)a->rcount;
	unsigned char *mask = calloc(len + 1, 1), *ones = malloc((size_t)total);
	cmx_run *runs = NULL;
	int pos = 0;
	if (mask && ones) {
		memset(ones, 0xff, (size_t)total);
		/* MPI_COMM_SELF: a matched receive has no communicator here, and
		 * the layout does not depend on one */
		if (cmx_px.Unpack(ones, total, &pos, mask - lo, (int)a->rcount, a->rtype, cmx_abi.comm_self) == 0) {
			const int k = mask_runs(mask, len, NULL);
			if ((runs = malloc(sizeof *runs * (size_t)(k ? k : 1))))
				*n = mask_runs(mask, len, runs);
		}
	}
	free(mask);
	free(ones);
	return runs;
}

/* c is NULL for point-to-point and local calls. */
int cmx_staged_run(cmx_comm *c, const cmx_args *a, int *rc)
{
	if (cmx_host_readable(a->mem))
		return 0; /* host-accessible: MPI reads it itself */
	/* on an intercommunicator the reductions that scatter or scan are
	 * left to MPI: their buffer sizes there are not what region knows */
	if (c && c->inter && (a->coll == CMX_COLL_REDUCE_SCATTER || a->coll == CMX_COLL_REDUCE_SCATTER_BLOCK))
		return 0;
	/* MPI_BOTTOM (the null address) with absolute displacements: the
	 * regions are addresses; one buffer only in Sendrecv_replace */
	const char *buf[2] = {a->sbuf, a->rbuf};
	const int p2p = cmx_coll_class[a->coll] == CMX_CLASS_P2P;
	/* (a send and a receive may share an address where their blocks do
	 * not overlap: a receive of nothing, interleaved datatypes) */
	const int one = p2p ? a->fn == CMX_FN_SENDRECV_REPLACE || a->fn == CMX_FN_SENDRECV_REPLACE_C : a->sbuf == a->rbuf && a->sbuf;
	int64_t lo[2], hi[2];
	int dev[2], nin = 1, nout = 1;
	size_t len[2] = {0, 0};
	if (c && cmx_peers(a, &nin, &nout) != 0)
		return 0;
	for (int w = 0; w < 2; w++) {
		if (!cmx_region(a, c, nin, nout, w, &lo[w], &hi[w]))
			return 0;
		dev[w] = lo[w] <= hi[w] && buf[w] != cmx_abi.in_place && cmx_mem_kind(CMX_AT(buf[w], lo[w])) == CMX_MEM_DEVICE;
		if (dev[w])
			len[w] = (size_t)(hi[w] - lo[w]);
	}
	if (p2p && one)
		dev[0] = 0, len[0] = 0; /* one buffer (Sendrecv_replace), staged once as the receive buffer */
	if (!dev[0] && !dev[1])
		return 0;
	if (!cmx_cuda_ctx_for(dev[1] ? CMX_AT(buf[1], lo[1]) : CMX_AT(buf[0], lo[0])))
		return declined(a, rc, "no CUDA context for its buffer");
	/* a receive of a plain type may deliver less than its count: the copy
	 * back then takes what arrived, by the status, and needs no copy in.
	 * Any other receive region is copied in first, so that what the call
	 * leaves untouched (gaps between blocks, holes of a derived type, an
	 * in-place contribution) goes back unchanged. */
	const int trim = p2p && dev[1] && a->move[1] && !one;
	const int async = a->form == CMX_FORM_NONBLOCKING;
	/* the receive copy sits after the send copy, 64 bytes further where
	 * the two would otherwise start at the same address once rebased by
	 * their regions: an MPI takes sendbuf == recvbuf for MPI_IN_PLACE
	 * (Open MPI's nonblocking collectives do) */
	const size_t total = len[0] + len[1] + 65;
	char *h = async ? cmx_pinned_get(total) : staging(total);
	if (!h)
		return declined(a, rc, "no pinned host memory for its copy");
	/* a point-to-point receive of a datatype with gaps goes back by blocks */
	int nruns = 0;
	cmx_run *runs = p2p && dev[1] && !trim ? runs_of(a, lo[1], len[1], &nruns) : NULL;
	char *hb[2] = {h, h + len[0]};
	if (dev[0] && dev[1] && hb[0] - lo[0] == hb[1] - lo[1])
		hb[1] += 64;
	for (int w = 0; w < 2; w++)
		if (dev[w] && !(w == 1 && trim) && !cmx_cuda_copy(hb[w], CMX_AT(buf[w], lo[w]), len[w], NULL))
			goto fail;
	if (!cmx_cuda_sync(NULL))
		goto fail;
	cmx_args b = *a;
	char st[64]; /* a status, where the program passed MPI_STATUS_IGNORE and the copy back needs one */
	if (dev[0])
		b.sbuf = hb[0] - lo[0];
	if (dev[1])
		b.rbuf = hb[1] - lo[1];
	if (a->coll == CMX_COLL_BCAST || one)
		b.sbuf = b.rbuf;
	if (trim && !async && a->status == cmx_abi.status_ignore)
		b.status = st;
	if (async) {
		if (!(b.entry = cmx_req_new(a)))
			goto fail;
		cmx_req_pinned(b.entry, h, total);
		if (dev[1])
			cmx_req_copy_back(b.entry, CMX_AT(a->rbuf, lo[1]), hb[1], len[1], trim, runs, nruns);
		else
			free(runs);
		if ((*rc = cmx_forward(&b)) == 0)
			cmx_req_file(b.entry, a->req);
		else
			cmx_req_drop(b.entry);
		return 1;
	}
	*rc = cmx_forward(&b);
	size_t back = trim ? cmx_received(b.status, len[1]) : len[1];
	if (*rc == 0 && dev[1] && back && !cmx_cuda_copy_runs(CMX_AT(a->rbuf, lo[1]), hb[1], back, runs, nruns)) {
		*rc = cmx_error(a->comm, cmx_abi.err_other);
		cmx_log(0, "%s: copying the result back to the device failed", cmx_fn_names[a->fn]);
	}
	free(runs);
	unstage();
	return 1;
fail:
	free(runs);
	if (async)
		cmx_pinned_put(h, total);
	else
		unstage();
	return declined(a, rc, "a copy between host and device, or a request, failed");
}
