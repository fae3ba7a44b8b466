/*
 * repack.c: a data-movement collective whose datatype on this rank does
 * not move as bytes (a derived datatype with gaps or a lower bound, a
 * value/index pair), routed to a device backend (fused or NCCL), which
 * moves bytes only. Its peers may pass the same type signature in basic
 * elements and run the device backend; declining there would leave this
 * rank staged and them waiting. So this rank runs the same backend on a
 * packed copy: each such side is packed (device region to host,
 * MPI_Pack) into device scratch in MPI_BYTE, the call runs on that, and
 * the received bytes are unpacked into the program's buffer after it
 * completes (a nonblocking call's, when its request does). Slow, and
 * rare: a rank mixing such a type with peers' basic ones on device memory.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmx.h"

/* One side (send or receive) of the call on this rank: n blocks of its
 * datatype, each cnt elements one after another, or counts[j] elements at
 * displs[j] (in extents) for the v-collectives; n is 0 where the side is
 * not significant here. */
typedef struct {
	int n;
	int64_t cnt;
	const void *counts, *displs;
	cmx_h type;
	char *buf;
} side;

struct cmx_packed {
	int large;
	cmx_h comm;
	int packed[2];       /* which sides were repacked */
	side s[2];           /* the program's */
	int64_t lo[2], hi[2]; /* each side's region of its buffer, in bytes */
	cmx_aint ext[2];
	int size[2];
	size_t bytes[2];     /* packed */
	char *dev[2];        /* the packed copies (device) */
	void *cnts[2], *dsps[2]; /* b's counts and displacements of a v side, in bytes */
};

/* Side w of call a as blocks: n of cnt elements (span one, each), or
 * per-peer counts and displacements (v). None (n = 0) for a side not
 * used here, the reductions (whose datatypes MPI requires basic) and the
 * spans no device backend takes (a datatype per peer). */
static void side_of(const cmx_args *a, int nin, int nout, int w, side *s)
{
	*s = (side){.type = w ? a->rtype : a->stype, .buf = w ? a->rbuf : (char *)a->sbuf};
	const int span = cmx_families[a->coll].span[w], peers = w ? nin : nout;
	if (!a->used[w] || (cmx_families[a->coll].flags & CMX_FAM_REDUCES))
		return;
	if (span == CMX_SPAN_ONE || span == CMX_SPAN_EACH)
		s->n = span == CMX_SPAN_ONE ? 1 : peers, s->cnt = w ? a->rcount : a->scount;
	else if (span == CMX_SPAN_V)
		s->n = peers, s->counts = w ? a->rcounts : a->scounts, s->displs = w ? a->rdispls : a->sdispls;
}

static int64_t block_count(const side *s, int j, int large) { return s->counts ? cmx_at(s->counts, j, large) : s->cnt; }

/* Packs or unpacks (unpack set) every block of side w between host, a
 * copy of the side's region (the buffer's address minus lo), and packed,
 * bytes of MPI_BYTE. */
static int pack_side(cmx_packed *r, int w, char *host, char *packed, int unpack)
{
	const side *s = &r->s[w];
	int pos = 0;
	for (int j = 0; j < s->n; j++) {
		const int64_t k = block_count(s, j, r->large);
		char *at = host - r->lo[w] + (s->displs ? cmx_at(s->displs, j, r->large) : (int64_t)j * s->cnt) * r->ext[w];
		int rc = unpack ? cmx_px.Unpack(packed, (int)r->bytes[w], &pos, at, (int)k, s->type, r->comm)
				: cmx_px.Pack(at, (int)k, s->type, packed, (int)r->bytes[w], &pos, r->comm);
		if (rc != 0)
			return 0;
	}
	return (size_t)pos == r->bytes[w]; /* MPI packs a homogeneous job's elements as they are */
}

static int copy_region(cmx_packed *r, int w, char *host, int to_device)
{
	char *dev = CMX_AT(r->s[w].buf, r->lo[w]);
	size_t len = (size_t)(r->hi[w] - r->lo[w]);
	return (to_device ? cmx_cuda_copy(dev, host, len, NULL) : cmx_cuda_copy(host, dev, len, NULL)) && cmx_cuda_sync(NULL);
}

/* Host copies of side w's region and packed bytes: packs the program's
 * data into r->dev[w] (in), or unpacks r->dev[w] into the program's
 * buffer (out). */
static int transfer(cmx_packed *r, int w, int out)
{
	char *host = malloc((size_t)(r->hi[w] - r->lo[w]) + 1), *packed = malloc(r->bytes[w] + 1);
	int ok = host && packed && cmx_cuda_ctx_for(r->dev[w]) && copy_region(r, w, host, 0);
	if (!out)
		ok = ok && pack_side(r, w, host, packed, 0) && cmx_cuda_copy(r->dev[w], packed, r->bytes[w], NULL) && cmx_cuda_sync(NULL);
	else
		ok = ok && cmx_cuda_copy(packed, r->dev[w], r->bytes[w], NULL) && cmx_cuda_sync(NULL) && pack_side(r, w, host, packed, 1) &&
		     copy_region(r, w, host, 1);
	free(host), free(packed);
	return ok;
}

static void repack_free(cmx_packed *r)
{
	for (int w = 0; w < 2; w++) {
		cmx_cuda_free(r->dev[w]);
		free(r->cnts[w]), free(r->dsps[w]);
	}
	free(r);
}

/* The byte counts and displacements of a packed v side, in the call's
 * width; 0 when a value does not fit it. */
static int byte_arrays(cmx_packed *r, int w)
{
	const side *s = &r->s[w];
	const size_t width = r->large ? sizeof(int64_t) : sizeof(int);
	if (!(r->cnts[w] = malloc(width * (size_t)s->n + 1)) || !(r->dsps[w] = malloc(width * (size_t)s->n + 1)))
		return 0;
	int64_t off = 0;
	for (int j = 0; j < s->n; j++) {
		const int64_t k = block_count(s, j, r->large) * r->size[w];
		if (!r->large && (k > INT_MAX || off > INT_MAX))
			return 0;
		if (r->large)
			((int64_t *)r->cnts[w])[j] = k, ((int64_t *)r->dsps[w])[j] = off;
		else
			((int *)r->cnts[w])[j] = (int)k, ((int *)r->dsps[w])[j] = (int)off;
		off += k;
	}
	return 1;
}

/* Sets side w of r up: sizes, region, device scratch, and b's view of it. */
static int prepare(cmx_packed *r, const cmx_args *a, const cmx_comm *c, int nin, int nout, int w, cmx_args *b)
{
	const side *s = &r->s[w];
	cmx_aint lb = 0;
	int64_t elems = 0;
	if (cmx_px.Type_size(s->type, &r->size[w]) != 0 || cmx_px.Type_get_extent(s->type, &lb, &r->ext[w]) != 0 ||
	    !cmx_region(a, c, nin, nout, w, &r->lo[w], &r->hi[w]))
		return 0;
	if (r->hi[w] < r->lo[w]) /* nothing to move */
		r->lo[w] = r->hi[w] = 0;
	if (!s->buf && r->hi[w] > r->lo[w] && !cmx_cuda_ctx_for(CMX_AT(NULL, r->lo[w]))) /* MPI_BOTTOM: the data are at the region's addresses */
		return 0;
	for (int j = 0; j < s->n; j++)
		elems += block_count(s, j, r->large);
	const int64_t bytes = elems * r->size[w];
	/* MPI_Pack counts in int */
	if (bytes > INT_MAX || (s->counts && !byte_arrays(r, w)))
		return 0;
	r->bytes[w] = (size_t)bytes;
	if (!(r->dev[w] = cmx_cuda_malloc(r->bytes[w] + 1)))
		return 0;
	if (w) {
		b->rbuf = r->dev[w], b->rtype = cmx_abi.byte;
		if (s->counts)
			b->rcounts = r->cnts[w], b->rdispls = r->dsps[w];
		else
			b->rcount = s->cnt * r->size[w];
	} else {
		b->sbuf = r->dev[w], b->stype = cmx_abi.byte;
		if (s->counts)
			b->scounts = r->cnts[w], b->sdispls = r->dsps[w];
		else
			b->scount = s->cnt * r->size[w];
	}
	return 1;
}

int cmx_repack(const cmx_comm *c, const cmx_args *a, cmx_args *b, cmx_packed **rp)
{
	int nin = 0, nout = 0;
	*rp = NULL;
	if (cmx_peers(a, &nin, &nout) != 0)
		return 0; /* erroneous: MPI says so, on whichever path */
	side s[2];
	int need[2];
	for (int w = 0; w < 2; w++) {
		side_of(a, nin, nout, w, &s[w]);
		need[w] = s[w].n > 0 && !a->move[w];
	}
	if (!need[0] && !need[1])
		return 0;
	cmx_packed *r = calloc(1, sizeof *r);
	/* the scratch goes where the buffers are (MPI_BOTTOM's: prepare) */
	if (!r || (s[need[1]].buf && !cmx_cuda_ctx_for(s[need[1]].buf)))
		goto fail;
	*r = (cmx_packed){.large = a->large, .comm = a->comm, .s = {s[0], s[1]}};
	*b = *a;
	for (int w = 0; w < 2; w++)
		if (need[w] && !(r->packed[w] = prepare(r, a, c, nin, nout, w, b)))
			goto fail;
	/* the receive side is packed in too: the call may read it (in place;
	 * the one buffer of a bcast) or leave blocks of it alone (those from
	 * MPI_PROC_NULL in a neighbourhood call) */
	if ((r->packed[0] && !transfer(r, 0, 0)) || (r->packed[1] && !transfer(r, 1, 0)))
		goto fail;
	if (a->coll == CMX_COLL_BCAST) /* one buffer: both sides describe it */
		b->sbuf = b->rbuf, b->scount = b->rcount, b->stype = b->rtype;
	cmx_log(CMX_LOG_DEBUG, "%s: a datatype that does not move as bytes, packed for a device backend", cmx_fn_names[a->fn]);
	*rp = r;
	return 1;
fail:
	if (r)
		repack_free(r);
	cmx_log(0, "%s: packing a datatype that does not move as bytes for a device backend failed (more than 2 GiB, or out of "
		   "memory); the call fails",
		cmx_fn_names[a->fn]);
	return -1;
}

/* A call's completion (or its end, ok 0): the received bytes are unpacked
 * into the program's buffer, and everything is freed. */
static int unpack(void *arg, int ok)
{
	cmx_packed *r = arg;
	int rc = 0;
	if (ok && r->packed[1] && !transfer(r, 1, 1)) {
		cmx_log(0, "unpacking the received bytes of a datatype that does not move as bytes failed (CUDA error %d)",
			cmx_cuda_last_error());
		rc = cmx_abi.err_other;
	}
	repack_free(r);
	return rc;
}

int cmx_repack_done(cmx_packed *r, const cmx_args *a, int rc)
{
	if (a->form == CMX_FORM_NONBLOCKING && rc == 0) {
		if (cmx_req_then(a->req, unpack, r) == 0)
			return 0;
		cmx_fatal("%s: internal: no request to unpack a packed call's data into", cmx_fn_names[a->fn]);
	}
	int r2 = unpack(r, rc == 0);
	return rc ? rc : r2 ? cmx_error(a->comm, r2) : 0;
}
