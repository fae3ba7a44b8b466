//go:build collmux_lib

/*
 * fused_plan.c: how the fused kernels run a call, decided only from what
 * every rank agrees on (the collective, its size, the ranks and
 * COLLMUX_FUSED_ALGO, which set-up checks), never from a buffer's address,
 * so that every rank rings the same job; and whether the ranks' places
 * let them share workspaces at all. Plain arithmetic: CI tests it
 * without a GPU (tests/c/plantest.c).
 */
#include <string.h>

#include "cmx.h"
#include "fused.h"

/* a two-shot job's second barrier uses the second half of the flags */
_Static_assert(GRID <= CMX_MAX_BLOCKS / 2, "two-shot all-reduce needs CMX_MAX_BLOCKS / 2 rows of flags");

int cmx_fused_plan(int coll, uint64_t bytes, int ranks, int algo, uint32_t *proto, uint32_t *nb)
{
	*proto = 0;
	if ((coll == CMX_COLL_ALLTOALL ? bytes * (uint64_t)ranks : bytes) > SLOT)
		return 0;
	/* Small, the LL protocol (one NVLink crossing, no barrier); larger,
	 * through the slots: the all-reduce one shot on two ranks, two shots
	 * on more, where reading every peer's whole message costs more than a
	 * second barrier. Not bcast: its root hears from no one and would run
	 * ahead of its receivers (kernels.cu, move_ll). A forced algorithm
	 * sends the moves through the slots too (so the GPU suite runs both
	 * ways of every collective). */
	if (algo == CMX_ALGO_AUTO && coll != CMX_COLL_BCAST && bytes <= CMX_LL_MAX && bytes % 8 == 0)
		*proto = JOB_LL;
	else if (coll == CMX_COLL_ALLREDUCE && (algo == CMX_ALGO_TWOSHOT || (algo == CMX_ALGO_AUTO && ranks > 2)))
		*proto = JOB_TWOSHOT;
	/* Blocks: an LL job up to LL_ONE runs in one block, one batch a
	 * thread (no other block to publish the job to or wait for); other
	 * jobs take a block per 2 KiB, more blocks pushing more lines over
	 * NVLink at once (docs/results/gpu-2026-11-30-ll: fewer, fuller
	 * blocks were slower from 32 KiB up). At most GRID. */
	const uint64_t per = *proto == JOB_LL && bytes <= LL_ONE ? LL_ONE : 2048;
	const uint64_t b = (bytes + per - 1) / per;
	*nb = b < 1 ? 1 : b > GRID ? GRID : (uint32_t)b;
	return 1;
}

uint32_t cmx_fused_next_seq(uint32_t s) { return s >= SEQ_LAST ? 1 : s + 1; }

int cmx_fused_finished(uint32_t s, uint32_t finished) { return (int32_t)(finished - s) >= 0; }

int cmx_fused_bell_room(uint32_t s, uint32_t finished) { return (int32_t)(s - finished) <= CMX_BELL_SLOTS; }

uint64_t cmx_fused_pick(const cmx_ws_offer *offers, int ranks, int *old, uint32_t *seq)
{
	if (ranks < 1 || ranks > CMX_MAX_RANKS)
		return 0;
	for (int i = 0; i < MAX_WORKSPACES; i++) {
		const uint64_t id = offers[i].id;
		unsigned seen = 0; /* old places taken, one bit each */
		*seq = offers[i].seq;
		int r = 0;
		for (; id && r < ranks; r++) {
			const cmx_ws_offer *o = NULL;
			for (int j = 0; j < MAX_WORKSPACES && !o; j++)
				if (offers[r * MAX_WORKSPACES + j].id == id)
					o = &offers[r * MAX_WORKSPACES + j];
			if (!o || o->me < 0 || o->me >= ranks || (seen >> o->me & 1))
				break;
			seen |= 1u << o->me;
			old[r] = o->me;
			if ((int32_t)(o->seq - *seq) > 0) /* later, across the wrap */
				*seq = o->seq;
		}
		if (id && r == ranks)
			return id;
	}
	return 0;
}

static const cmx_place *place(const cmx_place *p0, size_t stride, int p)
{
	return (const cmx_place *)((const char *)p0 + (size_t)p * stride);
}

const char *cmx_fused_placement(const cmx_place *p0, size_t stride, int n)
{
	for (int p = 0; p < n; p++) {
		const cmx_place *a = place(p0, stride, p);
		if (strcmp(a->host, p0->host) != 0)
			return "the ranks span several nodes";
		for (int q = 0; q < p; q++) {
			const cmx_place *b = place(p0, stride, q);
			if (strcmp(a->bus, b->bus) == 0 && !(a->mps && b->mps))
				return "two ranks share a GPU without MPS (or CUDA_VISIBLE_DEVICES hides the peers)";
		}
	}
	return NULL;
}

/* The segments of k the tensor-core GEMV may cut a call into, before the
 * GPUs' multiprocessors are known (the workspace holds that many partials
 * a rank): none for fp32, which has no tensor-core kernel; at most 6
 * (what 16 units a multiprocessor need from 3 tiles a multiprocessor,
 * session 18; 32 / batch bounds batch 9 to 16 below that, and up to batch
 * 8 the plan wants more only below some 1300 rows on 132 multiprocessors,
 * where the call is short anyway), 32 / batch partials a row, and the
 * flags' CMX_OPS_TILES units. */
uint64_t cmx_gemv_segs_most(int f32, int batch, int m)
{
	const uint64_t tiles = ((uint64_t)m + CMX_OPS_TC_ROWS - 1) / CMX_OPS_TC_ROWS;
	uint64_t most = f32 ? 1 : 6;
	most = tiles && most > CMX_OPS_TILES / tiles ? CMX_OPS_TILES / tiles : most;
	return most < (uint64_t)(32 / batch) ? most : (uint64_t)(32 / batch);
}

/* Measured on one H200, one rank (docs/results/gpu-2026-12-01-session18
 * and -session19): with its matrix streamed through L2 in 256-byte blocks,
 * the tensor-core kernel runs at cuBLAS's GEMV speed or near it, so it
 * serves batch 1 too; fp32, and GPUs without the tensor cores' bf16/f16
 * products, take the CUDA-core loop. A block a unit (a tile of 32 rows and
 * one segment of k); the segments are what balances the multiprocessors:
 * - batch up to 8 (four blocks a multiprocessor, ops.cu): where the tiles
 *   fit one wave, as many segments as come nearest two blocks a
 *   multiprocessor (run 7, the kernel alone: 4096 rows 13.4 us in 2
 *   against 14.6 in 1; 8192 and 16384 fastest in 1, 16384 at 128.5 us,
 *   cuBLAS 128.6, where 5 segments took 143.8); past one wave, the fewest
 *   that make two waves or more (28672 rows: 392.8 us in 2, 399.5 in 1,
 *   403.8 in 3);
 * - batch 9 to 16 (two blocks a multiprocessor): from 3 tiles a multiprocessor,
 *   as many as make 16 units a multiprocessor (session 18: 468 -> 408 us at
 *   28672 rows, 170 -> 149 at 16384); below that they cost more than they
 *   save. */
int cmx_gemv_plan(int tc, int f32, int batch, int m, int sms, uint64_t segs_most, int *segs)
{
	const uint64_t tiles = ((uint64_t)m + CMX_OPS_TC_ROWS - 1) / CMX_OPS_TC_ROWS, n = (uint64_t)sms;
	uint64_t want = 1;
	*segs = 1;
	if (!tc || f32)
		return 0;
	if (!tiles) /* m = 0: nothing to balance */
		return 1;
	if (batch <= 8)
		want = tiles <= 4 * n ? (2 * n + tiles / 2) / tiles : (8 * n + tiles - 1) / tiles;
	else if (tiles >= 3 * n)
		want = (16 * n + tiles - 1) / tiles;
	want = want < segs_most ? want : segs_most;
	*segs = want > 1 ? (int)want : 1;
	return 1;
}

int cmx_ops_tuned_form(const cmx_ops_pick *t, int n, int ranks, int batch, int m)
{
	for (int i = 0; i < n; i++)
		if (t[i].ranks == ranks && t[i].batch_lo <= batch && batch <= t[i].batch_hi && t[i].lo <= (uint64_t)m && (uint64_t)m <= t[i].hi)
			return t[i].form;
	return 0;
}
