/*
 * fused.h: what the fused backend's host side shares with its plan; what
 * it shares with the kernels is abi.h.
 */
#ifndef CMX_FUSED_H
#define CMX_FUSED_H

#include <stddef.h>
#include <stdint.h>

#include "abi.h" /* what the kernels share: CMX_MAX_RANKS, job codes, element types */

#define GRID 32                            /* blocks of the resident kernel; a job uses 1 to GRID */
#define LEAN_GRID 8                        /* blocks of the resident kernel beside computation (cmx_comm.overlap) */
#define LL_ONE (512 * CMX_LL_BATCH * 8)    /* one block's LL batch: 512 threads, CMX_LL_BATCH lines of 8 bytes */
#define SLOT (8u << 20)                    /* one call's data in one rank's workspace */

/* How the fused kernels run collective coll (CMX_COLL_ALLREDUCE,
 * _ALLGATHER, _ALLTOALL or _BCAST) of `bytes` (all-reduce: the message;
 * the others: one rank's block) on `ranks` ranks with COLLMUX_FUSED_ALGO
 * `algo`: the protocol flag (JOB_LL; JOB_TWOSHOT, all-reduce only; or 0:
 * through the slots, the all-reduce in one shot) and the job's blocks. 0
 * when the workspace cannot hold the call. */
int cmx_fused_plan(int coll, uint64_t bytes, int ranks, int algo, uint32_t *proto, uint32_t *nb);

/* Job numbers, the flags' epochs and the LL lines' tags: 1, 2, ...,
 * SEQ_LAST, 1, ... Never 0, so a line never written cannot pass for one;
 * and an even count of them, so consecutive jobs always differ in parity,
 * which picks their data slot and LL area (two of each): a job never
 * writes the area its predecessor's readers may still be reading. (With
 * 0xffffffff in the cycle, that job and the next, 1, were both odd.)
 * next_seq in kernels.cu is the same. */
#define SEQ_LAST 0xfffffffeu
uint32_t cmx_fused_next_seq(uint32_t s);

/* Jobs finish in order, and the kernel says which it finished last: job s
 * is finished once `finished` is s or later (across the wrap). */
int cmx_fused_finished(uint32_t s, uint32_t finished);

/* Whether job s may be written into its doorbell slot (s %
 * CMX_BELL_SLOTS) while the kernel has finished the jobs up to
 * `finished`: no job there is still to be taken. Raw numbers are compared,
 * not jobs counted: across the wrap, where numbers skip 0xffffffff and 0,
 * two of the last CMX_BELL_SLOTS jobs would share a slot. */
int cmx_fused_bell_room(uint32_t s, uint32_t finished);

/* A workspace whose communicator was freed, as a rank offers it to a new
 * communicator of the same processes: its id (the same on every rank that
 * holds it; 0: no offer), the rank's place in it and the last job rung. */
typedef struct {
	uint64_t id;
	uint32_t seq;
	int32_t me;
} cmx_ws_offer;
#define MAX_WORKSPACES 16 /* per process: workspaces are never freed (fused.c) */

/* The workspace that every one of `ranks` ranks offers (offers: a row of
 * MAX_WORKSPACES a rank, as the set-up's allgather gathers them), the
 * first such in rank 0's row; 0 when there is none. Sets old[r] to new
 * rank r's place in it (a permutation, or it is not taken) and *seq to
 * the latest job any of them rang: ranks whose kernels stopped at
 * different times rang different numbers of exit jobs. */
uint64_t cmx_fused_pick(const cmx_ws_offer *offers, int ranks, int *old, uint32_t *seq);

/* Every rank's `bytes` of device memory, zeroed, mapped by every other
 * (peer[p]; peer[me] its own), proven by a token each rank writes at
 * offset probe and every rank reads back. Collective, over c's ranks, each
 * of which says whether it is ready (ok); 1 on every rank, or 0 on every
 * rank and nothing left allocated here. */
struct cmx_comm;
int cmx_fused_map(struct cmx_comm *c, int ok, size_t bytes, size_t probe, char **peer);

/* A kernel of the fused module (kernels.cu and ops.cu), which is loaded at
 * the first call; NULL where it cannot be. With a slot (cached), looked up
 * once and kept there. */
void *cmx_fused_kernel(const char *name, void **cached);

/* Why ranks cannot share one node's IPC workspaces, NULL when they can:
 * n ranks' places, each `stride` bytes after the previous one's, must be
 * one node, and ranks on one GPU must all run under MPS (without it their
 * contexts take turns on the GPU, and kernels that wait for each other
 * would wait for a time slice each step). plan.c: no GPU needed. */
const char *cmx_fused_placement(const cmx_place *p0, size_t stride, int n);

/* collmux_gemv_allreduce's fused kernel for a call of m rows by batch on
 * GPUs of sms multiprocessors (the fewest of the ranks'), which have
 * 16-bit tensor-core mma where tc, of element type fp32 where f32: 1 for
 * the tensor cores (cmx_gemv_tc, tiles of CMX_OPS_TC_ROWS, k cut into
 * *segs segments), 0 for the CUDA-core loop (*segs 1). segs_most bounds
 * the segments (cmx_gemv_segs_most, which sizes the workspace). */
int cmx_gemv_plan(int tc, int f32, int batch, int m, int sms, uint64_t segs_most, int *segs);
uint64_t cmx_gemv_segs_most(int f32, int batch, int m);

/* The form the first of n tuning-table entries that holds a call gives
 * it (a communicator of ranks ranks, batch, m rows), or 0 where none. */
int cmx_ops_tuned_form(const cmx_ops_pick *t, int n, int ranks, int batch, int m);

void cmx_ops_release(struct cmx_comm *c); /* ops.c: c is being freed */

#endif
