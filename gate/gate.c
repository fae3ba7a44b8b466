/*
 * gate.c: the arrival gate of a communicator whose ranks share a node, in
 * programs that call MPI from several threads at once.
 *
 * The device backends' kernels wait for their peers' kernels on the GPU.
 * Were a rank to start its part before every peer had entered the call,
 * CUDA calls that wait for the whole device could deadlock across ranks:
 * thread X of rank 0 calls cudaFree, which waits for rank 0's kernel of
 * collective B, which waits for rank 1's thread Y to enter B; Y is in
 * cudaFree itself, waiting for rank 1's kernel of collective A, which
 * waits for X to enter A. An MPI program that is correct under MPI alone
 * must not hang under collmux, so device work starts only once every rank
 * is in the call: each rank raises its counter in a page of shared memory
 * and waits for everyone's. A kernel then waits only for peers that are
 * already launching theirs. The wait is also the watchdog: a rank that
 * never arrives becomes an error naming it, before any GPU work is queued.
 *
 * With one thread in MPI at a time (below MPI_THREAD_MULTIPLE) the cycle
 * cannot close: a rank's only collmux work on the GPU is the call its one
 * MPI thread is in, so a device-wide wait on a rank that is not in a call
 * ends. Those programs get no gate and keep the overlap of one call's
 * start with the end of the last (the gate costs a bcast of 16 MiB on
 * NCCL 15 µs, docs/results/gpu-2026-11-29-gate). Ranks on several nodes
 * have no gate either (NCCL's inter-node calls keep the hazard, as NCCL
 * documents).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cmx.h"

typedef struct {
	_Alignas(64) uint64_t seq; /* the last call the rank entered */
} slot_t;

/* Whether a call goes ahead is one decision all ranks read: the verdict
 * word after the ranks' slots holds the number of the last call decided,
 * the rank that decided it and how. The first rank to see every rank in
 * the call sets GO; the first to run out of time (or to fail before the
 * call) sets ABORT; whoever is second reads the first's. Were each rank
 * to judge alone, one could pass a call a peer has just given up on, and
 * then wait forever on the GPU for it. */
enum { GO = 1, ABORT = 2 };
#define VERDICT(seq, rank, how) ((seq) << 18 | (uint64_t)(rank) << 2 | (how))
#define VERDICT_SEQ(v) ((v) >> 18)
#define VERDICT_RANK(v) ((int)((v) >> 2 & 0xffff))
#define VERDICT_HOW(v) ((int)((v)&3))

struct cmx_gate {
	slot_t *slot;
	size_t len;
	int n, me;
	uint64_t seq;
	int broken; /* a call timed out: the counters no longer match calls */
};

/* Collective over c. NULL (on every rank alike) when the ranks span nodes
 * or the shared page cannot be set up. */
static struct cmx_gate *gate_open(cmx_comm *c)
{
	/* the shape is known on every rank or on none (shape rules are global) */
	const int one_node = (c->nodes || cmx_comm_shape(c)) && c->nodes == 1;
	int level = 0;
	if (!cmx_px.Query_thread || cmx_px.Query_thread(&level) != 0)
		level = 0;
	if (!cmx_comm_agree(c, one_node && level == cmx_abi.thread_multiple))
		return NULL;

	struct {
		char name[48];
		int ok;
	} msg = {{0}, 0};
	size_t len = ((size_t)(c->size + 1) * sizeof(slot_t) + 4095) & ~(size_t)4095; /* the slots, then the verdict */
	int fd = -1;
	if (c->rank == 0) {
		snprintf(msg.name, sizeof msg.name, "/collmux-gate-%016llx", (unsigned long long)cmx_nonce());
		fd = shm_open(msg.name, O_RDWR | O_CREAT | O_EXCL, 0600);
		msg.ok = fd >= 0 && ftruncate(fd, (off_t)len) == 0;
	}
	if (cmx_px.Bcast(&msg, (int)sizeof msg, cmx_abi.byte, 0, c->handle) != 0)
		msg.ok = 0;
	if (c->rank != 0 && msg.ok)
		fd = shm_open(msg.name, O_RDWR, 0600);
	void *p = fd >= 0 && msg.ok ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
	if (fd >= 0)
		close(fd);
	struct cmx_gate *g = p != MAP_FAILED ? calloc(1, sizeof *g) : NULL;
	int ok = cmx_comm_agree(c, g != NULL);
	if (c->rank == 0 && msg.name[0])
		shm_unlink(msg.name); /* every rank has it mapped, or none needs it */
	if (!ok) {
		if (p != MAP_FAILED)
			munmap(p, len);
		free(g);
		if (c->rank == 0) /* warn: this communicator's device calls may deadlock as gate.c describes */
			cmx_log(0, "no arrival gate for a communicator of %d ranks on one node: shared memory (/dev/shm) failed", c->size);
		return NULL;
	}
	*g = (struct cmx_gate){.slot = p, .len = len, .n = c->size, .me = c->rank};
	if (c->rank == 0)
		cmx_log(1, "arrival gate for a communicator of %d ranks (MPI_THREAD_MULTIPLE)", c->size);
	return g;
}

cmx_gate *cmx_comm_gate(cmx_comm *c)
{
	if (c->gate_state == 0) {
		c->gate = gate_open(c);
		c->gate_state = c->gate ? 1 : -1;
	}
	return c->gate;
}

void cmx_gate_close(cmx_comm *c)
{
	if (c->gate) {
		munmap(c->gate->slot, c->gate->len);
		free(c->gate);
	}
	c->gate = NULL;
	c->gate_state = -1;
}

void cmx_gate_arrive(cmx_gate *g)
{
	if (g && !g->broken)
		__atomic_store_n(&g->slot[g->me].seq, ++g->seq, __ATOMIC_RELEASE);
}

static uint64_t *verdict(const cmx_gate *g) { return &g->slot[g->n].seq; }

/* Decides the current call (how: GO or ABORT) unless a rank already has;
 * returns the verdict that holds. */
static uint64_t decide(cmx_gate *g, int how)
{
	uint64_t want = VERDICT(g->seq, g->me, how), old = __atomic_load_n(verdict(g), __ATOMIC_ACQUIRE);
	while (VERDICT_SEQ(old) < g->seq && !__atomic_compare_exchange_n(verdict(g), &old, want, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		;
	return VERDICT_SEQ(old) < g->seq ? want : old;
}

static int all_arrived(const cmx_gate *g)
{
	for (int p = 0; p < g->n; p++)
		if (__atomic_load_n(&g->slot[p].seq, __ATOMIC_ACQUIRE) < g->seq)
			return 0;
	return 1;
}

int cmx_gate_wait(cmx_gate *g, const cmx_args *a, int ready)
{
	if (!g)
		return ready;
	const char *fn = cmx_fn_names[a->fn];
	if (g->broken) {
		fprintf(stderr, "collmux: %s on rank %d of %d: an earlier device collective on this communicator timed out\n", fn, g->me,
			g->n);
		return 0;
	}
	const uint64_t limit = (uint64_t)cmx_cfg.timeout * 1000000000ull;
	uint64_t start = 0, v = 0;
	int timed_out = 0;
	for (unsigned spins = 1;; spins++) {
		v = __atomic_load_n(verdict(g), __ATOMIC_ACQUIRE);
		if (VERDICT_SEQ(v) >= g->seq)
			break;
		if (!ready) {
			v = decide(g, ABORT);
			break;
		}
		if (all_arrived(g)) {
			v = decide(g, GO);
			break;
		}
		if (spins % 1024 == 0) {
			uint64_t t = cmx_now_ns();
			start = start ? start : t;
			if (t - start > limit) {
				timed_out = 1;
				v = decide(g, ABORT);
				break;
			}
		}
		cmx_cpu_relax();
	}
	if (VERDICT_HOW(v) == GO)
		return 1;
	/* the counters no longer match calls: later ones fail at once */
	g->broken = 1;
	if (!ready)
		return 0; /* this rank failed before the call: the caller says why */
	if (!timed_out) {
		fprintf(stderr, "collmux: %s on rank %d of %d: rank %d gave up on this call\n", fn, g->me, g->n, VERDICT_RANK(v));
		return 0;
	}
	char missing[256] = "";
	size_t len = 0;
	for (int q = 0; q < g->n && len < sizeof missing - 16; q++)
		if (__atomic_load_n(&g->slot[q].seq, __ATOMIC_ACQUIRE) < g->seq)
			len += (size_t)snprintf(missing + len, sizeof missing - len, " %d", q);
	/* one write, so that the ranks' reports do not interleave */
	fprintf(stderr, "collmux: %s on rank %d of %d: ranks%s%s did not arrive within COLLMUX_TIMEOUT=%d s; device collectives on this communicator now fail\n",
		fn, g->me, g->n, missing, len < sizeof missing - 16 ? "" : " ...", cmx_cfg.timeout);
	return 0;
}
