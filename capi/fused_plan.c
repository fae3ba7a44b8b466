/*
 * fused_plan.c: how the fused kernels run a call, decided only from what
 * every rank agrees on (the collective, its size, the ranks and
 * COLLMUX_FUSED_ALGO, which set-up checks), never from a buffer's address,
 * so that every rank rings the same job. Plain arithmetic: CI tests it
 * without a GPU (tests/c/plantest.c).
 */
#include "cmx.h"
#include "fused.h"

/* a two-shot job's second barrier uses the second half of the flags */
_Static_assert(GRID <= MAX_BLOCKS / 2, "two-shot all-reduce needs MAX_BLOCKS / 2 rows of flags");

int cmx_fused_plan(int coll, uint64_t bytes, int ranks, int algo, uint32_t *proto, uint32_t *nb)
{
	*proto = 0;
	if ((coll == CMX_COLL_ALLTOALL ? bytes * (uint64_t)ranks : bytes) > SLOT)
		return 0;
	/* All-reduce: small, the LL protocol (one NVLink crossing); larger,
	 * one shot on two ranks, two shots on more, where reading every
	 * peer's whole message costs more than a second barrier. */
	if (coll == CMX_COLL_ALLREDUCE) {
		if (algo == CMX_ALGO_AUTO && bytes <= LL_MAX && bytes % 8 == 0)
			*proto = JOB_LL;
		else if (algo == CMX_ALGO_TWOSHOT || (algo == CMX_ALGO_AUTO && ranks > 2))
			*proto = JOB_TWOSHOT;
	}
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
