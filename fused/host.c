//go:build collmux_lib

/*
 * fused.c: the fused backend. Device collectives of ranks that share a
 * node and see each other's GPUs run in one kernel (fused/kernels.cu):
 * copy into a CUDA-IPC workspace, signal, read the peers over NVLink.
 * The kernel stays resident between calls and takes jobs from a doorbell
 * in host memory, so a call costs no launch; it stops itself after
 * COLLMUX_FUSED_LINGER idle microseconds. Beside computation
 * (c->overlap) it has LEAN_GRID blocks instead of GRID: a kernel that
 * gives its SMs back between calls waits, at each call, for the
 * program's kernels to free one (hundreds of microseconds beside a GEMM,
 * docs/results/gpu-2026-11-30-overlap), while one that keeps a few costs
 * the program those few. Set-up is collective and agreed
 * by all ranks; anything missing (NVRTC, peer access, distinct GPUs, one
 * node) turns the path off for that communicator, with the reason in
 * COLLMUX_LOG=info.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmx.h"
#include "fused.h"

#define FLAGS_BYTES (CMX_MAX_BLOCKS * CMX_MAX_RANKS * 4)
#define CTL_OFF (2 * (size_t)SLOT + FLAGS_BYTES)
#define PROBE_OFF (CTL_OFF + 64) /* Ctl in kernels.cu fits in 64 bytes */
#define LL_OFF (PROBE_OFF + 64)
#define STR_(x) #x
#define STR(x) STR_(x)
#define WORKSPACE (LL_OFF + 2 * CMX_MAX_RANKS * 2 * (size_t)CMX_LL_MAX)

/* Laid out as BellSlot, Bell and Ring in kernels.cu. */
typedef struct {
	uint32_t seq_a, code;
	uint64_t in;
	uint32_t seq_b, nb;
	uint64_t out;
	uint32_t seq_c, root;
	uint64_t n;
	uint32_t pad[4];
} bell_slot;
typedef struct {
	bell_slot slot[CMX_BELL_SLOTS];
	uint32_t done, exited, err, err_job, stopping, pad2[11];
} bell_t;
/* the host writes the slots, a cache line each, the device the last line */
_Static_assert(sizeof(bell_slot) == 64 && offsetof(bell_t, done) == 64 * CMX_BELL_SLOTS && sizeof(bell_t) == 64 * (CMX_BELL_SLOTS + 1),
	       "bell_t is laid out as Bell in kernels.cu");
typedef struct {
	char *ws[CMX_MAX_RANKS];
	void *bell, *ctl;
	uint64_t slot, ll_off, timeout_ns, linger_ns;
	int n, me;
	uint32_t launch, last;
} ring_t;

struct cmx_fused {
	char *peer[CMX_MAX_RANKS]; /* every rank's workspace, mapped here (peer[me] is ours) */
	int n, me;
	uint64_t id;     /* the same on every rank: a random number rank 0 drew when it was made */
	uint32_t seq;    /* the last job rung, also the epoch of the peers' flags */
	uint32_t base;   /* the last job numbered before this rank's jobs here: finished (see finished) */
	uint32_t launch; /* the id of the resident instance last launched */
	uint32_t grid;   /* blocks of its instances: GRID, or LEAN_GRID (see grid_of) */
	int mps;         /* some rank of its communicator shares its GPU through MPS */
	int running;     /* that instance may still be running */
	pthread_mutex_t mu; /* launches: completion calls on several threads may each see the instance stopped */
	uint32_t polls;   /* of polls of jobs not done: every POLL_QUERY-th asks CUDA whether the kernel faulted */
	int failed;      /* such a job failed: its communicator turns the path off at its next call */
	int pool;        /* IN_USE, RETIRED or OFFERED (see ws) */
	void *stream;    /* non-blocking, or the program's default-stream work would wait for the resident kernel; of the greatest priority */
	volatile bell_t *bell;
	void *bell_d;
};

/* ---- the module: compiled once per process ---- */
static void *module, *fn_ring;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* A workspace is never freed: a rank may free its memory only after every
 * peer has closed its mapping, which would make MPI_Comm_free wait for the
 * peers, and MPI_Comm_free is local (a program may free two communicators
 * in different orders on different ranks). Instead a freed communicator's
 * workspace is retired, and the next communicator of the same processes
 * takes it over (any rank order): programs that create and free
 * communicators in a loop keep the fused path. At most MAX_WORKSPACES per
 * process; communicators past that use NCCL. MPI_Finalize stops the
 * resident kernels of those still in use. */
static struct cmx_fused *ws[MAX_WORKSPACES]; /* NULL: a free place */
static pthread_mutex_t ws_mu = PTHREAD_MUTEX_INITIALIZER;
/* IN_USE also covers one whose communicator gave up after a watchdog
 * error: its peers' progress is unknown, so it is never taken over.
 * OFFERED: to a set-up in progress, which no other set-up may offer it to. */
enum { IN_USE, RETIRED, OFFERED };

static void load(void)
{
	int arch;
	char bus[32];
	char *image = NULL;
	size_t len = 0;
	if (!cmx_cuda_fused_capable() || !cmx_cuda_device(&arch, bus, sizeof bus))
		return;
	/* the path libcollmux.so was loaded from: ahead-of-time kernels sit beside it */
	Dl_info di;
	const char *lib = dladdr((void *)&cmx_fused_run, &di) && di.dli_fname ? di.dli_fname : "";
	if (!cmx_go_fused_module(arch, cmx_cuda_driver_version(), (char *)lib, &image, &len))
		return;
	fn_ring = cmx_cuda_function(image, "cmx_ring", &module);
	/* An image the driver refuses (damaged, or not for this driver) is set
	 * aside: a cached one deleted, so no later process loads it either.
	 * Where the driver loaded no module and another image is to be had
	 * (compiled anew), that one is tried, once. */
	if (!fn_ring && cmx_go_fused_rejected() && !module) {
		free(image);
		image = NULL;
		if (cmx_go_fused_module(arch, cmx_cuda_driver_version(), (char *)lib, &image, &len))
			fn_ring = cmx_cuda_function(image, "cmx_ring", &module);
	}
	/* image stays allocated: with lazy module loading (the default since
	 * CUDA 12.2) the driver reads it again when a kernel first launches */
	cmx_log(1, "fused kernels %s (sm_%d)", fn_ring ? "loaded" : "failed to load", arch);
}

void *cmx_fused_kernel(const char *name, void **cached)
{
	void *f = cached ? __atomic_load_n(cached, __ATOMIC_ACQUIRE) : NULL;
	if (f)
		return f;
	pthread_once(&load_once, load);
	f = fn_ring ? cmx_cuda_function(NULL, name, &module) : NULL;
	if (f && cached)
		__atomic_store_n(cached, f, __ATOMIC_RELEASE);
	return f;
}

static int type_of(int kind)
{
	switch (kind) {
	case CMX_KIND_FLOAT32: return T_F32;
	case CMX_KIND_FLOAT64: return T_F64;
	case CMX_KIND_INT32: return T_I32;
	case CMX_KIND_UINT32: return T_U32;
	case CMX_KIND_INT64: return T_I64;
	case CMX_KIND_UINT64: return T_U64;
	case CMX_KIND_FLOAT16: return T_F16;
	case CMX_KIND_BFLOAT16: return T_BF16;
	case CMX_KIND_INT16: return T_I16;
	case CMX_KIND_UINT16: return T_U16;
	case CMX_KIND_INT8: return T_I8;
	case CMX_KIND_UINT8: return T_U8;
	}
	return -1;
}

static int op_of(int op) { return op == CMX_OP_SUM ? 0 : op == CMX_OP_MIN ? 1 : op == CMX_OP_MAX ? 2 : -1; }

/* ---- the pool of workspaces ---- */

static int add(struct cmx_fused *f)
{
	int ok = 0;
	pthread_mutex_lock(&ws_mu);
	for (int i = 0; i < MAX_WORKSPACES && !ok; i++)
		if (!ws[i])
			ws[i] = f, ok = 1;
	pthread_mutex_unlock(&ws_mu);
	return ok;
}

static void drop(struct cmx_fused *f)
{
	pthread_mutex_lock(&ws_mu);
	for (int i = 0; i < MAX_WORKSPACES; i++)
		if (ws[i] == f)
			ws[i] = NULL;
	pthread_mutex_unlock(&ws_mu);
}

/* Offers this process's retired workspaces of n ranks (o: MAX_WORKSPACES
 * entries, zeroed) to a set-up; returns whether it could make another. */
static int offer(int n, cmx_ws_offer *o)
{
	int k = 0, room = 0;
	pthread_mutex_lock(&ws_mu);
	for (int i = 0; i < MAX_WORKSPACES; i++) {
		room |= !ws[i];
		if (ws[i] && ws[i]->pool == RETIRED && ws[i]->n == n) {
			ws[i]->pool = OFFERED;
			o[k++] = (cmx_ws_offer){ws[i]->id, ws[i]->seq, ws[i]->me};
		}
	}
	pthread_mutex_unlock(&ws_mu);
	return room;
}

/* Ends a set-up's offers (o): workspace id (0: none) goes to communicator
 * c, its rank r having been rank old[r] there, the jobs numbered on from
 * seq on every rank; the others go back to the pool. */
static struct cmx_fused *settle(cmx_comm *c, const cmx_ws_offer *o, uint64_t id, const int *old, uint32_t seq)
{
	struct cmx_fused *f = NULL;
	pthread_mutex_lock(&ws_mu);
	for (int i = 0; i < MAX_WORKSPACES; i++) {
		struct cmx_fused *w = ws[i];
		int mine = 0;
		for (int k = 0; k < MAX_WORKSPACES && o[k].id && w && !mine; k++)
			mine = w->pool == OFFERED && o[k].id == w->id;
		if (!mine)
			continue;
		if (w->id != id) {
			w->pool = RETIRED;
			continue;
		}
		char *peer[CMX_MAX_RANKS];
		for (int p = 0; p < c->size; p++)
			peer[p] = w->peer[old[p]];
		memcpy(w->peer, peer, sizeof peer);
		w->me = c->rank, w->seq = w->base = seq, w->pool = IN_USE;
		f = w;
	}
	pthread_mutex_unlock(&ws_mu);
	return f;
}

/* ---- set-up, collective over the communicator ---- */

int cmx_fused_map(cmx_comm *c, int ok, size_t bytes, size_t probe, char **peer)
{
	cmx_ipc_handle h, *hs = calloc((size_t)c->size, sizeof h);
	char *mine = NULL;
	ok = ok && hs && (mine = cmx_cuda_malloc(bytes)) && cmx_cuda_memset(mine, 0, bytes) && cmx_cuda_ipc_handle(mine, &h);
	int mapped = 0;
	if (cmx_comm_agree(c, ok) && cmx_px.Allgather(&h, (int)sizeof h, cmx_abi.byte, hs, (int)sizeof h, cmx_abi.byte, c->handle) == 0) {
		/* each rank writes its token, every rank reads all of them */
		uint32_t token = 0xC011A000u + (uint32_t)c->rank;
		ok = cmx_cuda_copy(mine + probe, &token, sizeof token, NULL) && cmx_cuda_sync(NULL);
		peer[c->rank] = mine;
		for (int p = 0; p < c->size && ok; p++)
			if (p != c->rank)
				ok = (peer[p] = cmx_cuda_ipc_open(hs[p])) != NULL;
		ok = cmx_comm_agree(c, ok);
		for (int p = 0; p < c->size && ok; p++) {
			uint32_t got = 0;
			ok = cmx_cuda_dtoh(&got, peer[p] + probe, sizeof got) && got == 0xC011A000u + (uint32_t)p;
		}
		mapped = cmx_comm_agree(c, ok);
		if (!mapped && c->rank == 0)
			cmx_log(1, "fused path off for a communicator of %d ranks: peer memory could not be mapped or read", c->size);
	}
	/* peers' mappings stay until the process ends: closing them needs the
	 * same agreement as opening, and this path is rare */
	if (!mapped) {
		cmx_cuda_free(mine);
		peer[c->rank] = NULL;
	}
	free(hs);
	return mapped;
}

/* A new workspace for c, mapped by every rank and proven by a real
 * transfer; id is the same on every rank. */
static void create(cmx_comm *c, uint64_t id)
{
	struct cmx_fused *f = calloc(1, sizeof *f);
	char *none[CMX_MAX_RANKS];
	if (f)
		pthread_mutex_init(&f->mu, NULL);
	int ok = f && add(f) && (f->stream = cmx_cuda_stream_high()) && (f->bell = cmx_cuda_mapped(sizeof(bell_t), &f->bell_d));
	if (cmx_fused_map(c, ok, WORKSPACE, PROBE_OFF, f ? f->peer : none)) {
		f->n = c->size, f->me = c->rank, f->id = id;
		c->fused = f;
		c->fused_state = 1;
		return;
	}
	if (f) {
		drop(f);
		cmx_cuda_stream_free(f->stream);
	}
	free(f);
}

/* The blocks of c's resident kernel: LEAN_GRID beside computation, and
 * where ranks share a GPU through MPS (each rank's instance holds its
 * blocks, a multiprocessor each, while it lingers, and a job's blocks wait
 * for the peers' blocks of the same number: GRID blocks a rank would fill
 * an H200 from five ranks on, with other communicators' instances on top),
 * else GRID. */
static uint32_t grid_of(const cmx_comm *c) { return c->overlap || c->fused->mps ? LEAN_GRID : GRID; }

/* Every rank says what it has and offers its retired workspaces; all
 * decide from the same table whether the path is on, and if so take over
 * a workspace every rank offers, or make a new one. */
static void setup(cmx_comm *c, const void *buf)
{
	struct {
		cmx_place at;
		int ok, arch, algo, room;
		uint64_t new_id; /* rank 0's names a new workspace */
		cmx_ws_offer offers[MAX_WORKSPACES];
	} me, *all = calloc((size_t)c->size, sizeof me);
	cmx_ws_offer *table = calloc((size_t)c->size * MAX_WORKSPACES, sizeof *table);
	memset(&me, 0, sizeof me);
	me.ok = all && table && c->size <= CMX_MAX_RANKS && cmx_cuda_fused_capable() && cmx_cuda_ctx_for(buf) &&
		cmx_place_here(c->rank, c->size, &me.at, &me.arch);
	me.algo = cmx_cfg.fused_algo;
	me.new_id = cmx_nonce();
	if (me.ok)
		me.room = offer(c->size, me.offers);
	c->fused_state = -1;
	const char *why = NULL;
	/* agreed first: a rank without room for the table must not leave its
	 * peers in the allgather */
	if (!cmx_comm_agree(c, all && table) ||
	    cmx_px.Allgather(&me, (int)sizeof me, cmx_abi.byte, all, (int)sizeof me, cmx_abi.byte, c->handle) != 0)
		why = "its set-up could not gather the ranks' facts";
	for (int p = 0; p < c->size && !why; p++)
		if (!all[p].ok)
			why = c->size > CMX_MAX_RANKS ? "it has more than 8 ranks"
						  : "the CUDA driver's IPC, or a current device, is unavailable on some rank";
		else if (all[p].algo != all[0].algo)
			why = "the ranks' COLLMUX_FUSED_ALGO differ";
	if (!why)
		why = cmx_fused_placement(&all[0].at, sizeof *all, c->size);
	/* the kernels last: their first load compiles them (a minute on an
	 * H200), which ranks that share a GPU, or span nodes, need not wait for */
	if (!why && !cmx_comm_agree(c, (pthread_once(&load_once, load), fn_ring != NULL)))
		why = "NVRTC or the fused kernels are unavailable on some rank";
	uint64_t id = 0, new_id = why ? 0 : all[0].new_id;
	int old[CMX_MAX_RANKS];
	uint32_t seq = 0;
	if (!why) {
		for (int p = 0; p < c->size; p++)
			memcpy(table + (size_t)p * MAX_WORKSPACES, all[p].offers, sizeof all[p].offers);
		id = cmx_fused_pick(table, c->size, old, &seq);
		for (int p = 0; p < c->size && !id && !why; p++)
			if (!all[p].room)
				why = "some rank holds as many workspaces as a process may (" STR(MAX_WORKSPACES) ")";
	}
	struct cmx_fused *f = settle(c, me.offers, id, old, seq);
	int mps = 0;
	for (int p = 0; p < c->size && all && !why; p++)
		mps |= all[p].at.mps;
	free(all);
	free(table);
	if (why) { /* every rank read the same table, so every rank stops here */
		if (c->rank == 0)
			cmx_log(1, "fused path off for a communicator of %d ranks: %s", c->size, why);
		return;
	}
	cmx_comm_gate(c); /* MPI_THREAD_MULTIPLE: calls start once every rank is in (gate.c) */
	if (!f) {
		create(c, new_id);
		if (c->fused) /* no instance of it ran, and every rank numbers its jobs from 0: sized here, not by resize */
			c->fused->mps = mps, c->fused->grid = grid_of(c);
		return;
	}
	c->fused = f;
	c->fused->mps = mps;
	c->fused_state = 1;
	if (c->rank == 0)
		cmx_log(1, "fused workspace %llx taken over by a communicator of %d ranks", (unsigned long long)id, c->size);
}

/* ---- the resident kernel ---- */

/* The last job this rank's kernel finished: the device's "done" once it
 * is past base. Before the kernel finishes one of the jobs numbered from
 * base, "done" holds an older number (a takeover or resize numbers jobs
 * on from the latest any rank rang, which this rank's kernel never ran),
 * and every job up to base counts as finished. */
static uint32_t finished(const struct cmx_fused *f)
{
	const uint32_t d = __atomic_load_n(&f->bell->done, __ATOMIC_ACQUIRE);
	return (int32_t)(d - f->base) > 0 ? d : f->base;
}

/* Launches an instance that takes the jobs after the last finished one.
 * Under f->mu. */
static int start(struct cmx_fused *f)
{
	ring_t R = {.bell = f->bell_d, .ctl = f->peer[f->me] + CTL_OFF, .slot = SLOT, .ll_off = LL_OFF, .n = f->n, .me = f->me};
	for (int p = 0; p < f->n; p++)
		R.ws[p] = f->peer[p];
	R.timeout_ns = (uint64_t)cmx_cfg.timeout * 1000000000ull;
	R.linger_ns = (uint64_t)cmx_cfg.linger_us * 1000ull;
	f->launch = f->launch + 1 ? f->launch + 1 : 1; /* never 0, which "stopping" holds once the kernel stays */
	R.launch = f->launch, R.last = finished(f);
	void *args[] = {&R};
	return f->running = cmx_cuda_launch(fn_ring, f->grid, 512, f->stream, args);
}

/* Whether the instance last launched has stopped: 1 yes, 0 no, -1 it
 * failed. An instance announces a stop in "stopping", then looks at the
 * doorbell once more and either stays ("stopping" back to 0) or stops
 * ("exited"), a PCIe round trip later (kernels.cu, take_job), which an
 * announcement found here waits for. A new instance launched then queues
 * behind the old on the stream. Under f->mu. */
static int stopped(struct cmx_fused *f)
{
	if (!f->running)
		return 1;
	for (unsigned spins = 1;; spins++) {
		int q;
		if (__atomic_load_n(&f->bell->exited, __ATOMIC_ACQUIRE) == f->launch)
			return 1;
		if (__atomic_load_n(&f->bell->stopping, __ATOMIC_ACQUIRE) != f->launch)
			return 0;
		if (spins % 1024 == 0 && (q = cmx_cuda_query(f->stream)) != 0)
			return q; /* ended undecided: it faulted (-1) */
		cmx_cpu_relax();
	}
}

/* Launches an instance where none runs (never launched, or the last one
 * stopped for want of jobs) and jobs wait at the doorbell; once, whichever
 * thread sees it first. The kernel writes "done" before "exited", so the
 * jobs finished are known once "exited" is. The fence orders the caller's
 * doorbell writes before the read of "stopping", the host's half of the
 * stop handshake (take_job): a job rung as the instance stops is then
 * either taken by it or seen here. 0 when the launch failed. */
static int revive(struct cmx_fused *f)
{
	cmx_device_fence();
	pthread_mutex_lock(&f->mu);
	const int s = stopped(f);
	int ok = s >= 0;
	if (s > 0 && !cmx_fused_finished(__atomic_load_n(&f->seq, __ATOMIC_ACQUIRE), finished(f)))
		ok = start(f);
	pthread_mutex_unlock(&f->mu);
	return ok;
}

/* Waits until job s is finished, relaunching the kernel if it stopped
 * before taking it. 0 when the kernel failed. */
static int wait_done(struct cmx_fused *f, uint32_t s)
{
	for (unsigned spins = 1;; spins++) {
		if (cmx_fused_finished(s, finished(f)))
			return 1;
		if (spins % 64 == 0 && !revive(f))
			return 0;
		if (spins % (1u << 16) == 0 && cmx_cuda_query(f->stream) < 0)
			return 0; /* the kernel faulted */
		cmx_cpu_relax();
	}
}

/* Rings job (code, in, out, n, root) for nb blocks and, unless async,
 * waits for it; an async job's request polls it (poll_job). The job goes
 * into its own slot of the doorbell at once unless CMX_BELL_SLOTS jobs
 * wait there already, so a nonblocking call returns without waiting for
 * its predecessors, whose peers may not have made them yet. The slot's
 * three chunks are each written payload first, then (release) the
 * sequence number; the device reads a chunk in one load. */
static int ring(struct cmx_fused *f, uint32_t code, const void *in, void *out, uint64_t n, uint32_t root, uint32_t nb, int async)
{
	const uint32_t s = cmx_fused_next_seq(f->seq);
	if (!cmx_fused_bell_room(s, finished(f)) && !wait_done(f, s - CMX_BELL_SLOTS)) /* the slot's last job, finished: room */
		return 0;
	volatile bell_slot *b = &f->bell->slot[s % CMX_BELL_SLOTS];
	__atomic_store_n(&f->seq, s, __ATOMIC_RELEASE);
	b->code = code, b->in = (uintptr_t)in;
	__atomic_store_n(&b->seq_a, s, __ATOMIC_RELEASE);
	b->nb = nb, b->out = (uintptr_t)out;
	__atomic_store_n(&b->seq_b, s, __ATOMIC_RELEASE);
	b->root = root, b->n = n;
	__atomic_store_n(&b->seq_c, s, __ATOMIC_RELEASE);
	if (!revive(f))
		return 0;
	return async || wait_done(f, s);
}

/* A nonblocking call's job s: 1 done, 0 not yet, -1 failed (the kernel
 * faulted, or a peer never came: its watchdog set err). Relaunches the
 * kernel if it stopped before taking the job, as wait_done does. A
 * completion call polls in a loop, and a stream query costs a
 * microsecond, as long as the job it waits for: asked at each poll, it
 * made a short job's request complete up to a query late. */
#define POLL_QUERY 256
static int poll_job(void *arg, uint64_t v)
{
	struct cmx_fused *f = arg;
	int r;
	if (cmx_fused_finished((uint32_t)v, finished(f)))
		r = f->bell->err && cmx_fused_finished(f->bell->err_job, (uint32_t)v) ? -1 : 1; /* jobs before the failed one stand */
	else if (!revive(f))
		r = -1;
	else
		r = __atomic_add_fetch(&f->polls, 1, __ATOMIC_RELAXED) % POLL_QUERY == 0 && cmx_cuda_query(f->stream) < 0 ? -1 : 0;
	if (r < 0)
		f->failed = 1;
	return r;
}

static void stop(struct cmx_fused *f)
{
	if (f->running && __atomic_load_n(&f->bell->exited, __ATOMIC_ACQUIRE) != f->launch)
		ring(f, JOB_EXIT, NULL, NULL, 0, 0, f->grid, 0); /* every block stops */
	cmx_cuda_sync(f->stream);
	f->running = 0;
}

/* A communicator that changed mode (MPI_Comm_set_info, collective: every
 * rank is at the same call) stops the instance of the old size; the next
 * launch has the new one. A rank whose instance had stopped rings no exit
 * job, so the ranks then agree on the latest job number, as a takeover
 * does (cmx_fused_pick). 0 when they could not. */
static int resize(cmx_comm *c, struct cmx_fused *f)
{
	/* nonblocking jobs not yet finished run on the old instance (one
	 * relaunched for them has the old grid, which their blocks need) */
	int ok = wait_done(f, f->seq);
	if (ok)
		stop(f);
	uint32_t *all = calloc((size_t)c->size, sizeof *all);
	ok = cmx_comm_agree(c, ok && all != NULL) && cmx_px.Allgather(&f->seq, 4, cmx_abi.byte, all, 4, cmx_abi.byte, c->handle) == 0;
	uint32_t seq = f->seq;
	for (int p = 0; ok && p < c->size; p++)
		if ((int32_t)(all[p] - seq) > 0) /* later, across the wrap */
			seq = all[p];
	pthread_mutex_lock(&f->mu); /* as revive reads them */
	f->base = f->seq = seq;
	pthread_mutex_unlock(&f->mu);
	free(all);
	if (ok)
		f->grid = grid_of(c);
	else
		c->fused_state = -1; /* every rank read the same agreement */
	return ok;
}

void cmx_fused_release_all(void)
{
	pthread_mutex_lock(&ws_mu);
	for (int i = 0; i < MAX_WORKSPACES; i++)
		if (ws[i])
			stop(ws[i]);
	pthread_mutex_unlock(&ws_mu);
}

/* MPI_Comm_free: local, as MPI's is. The kernel stops and the workspace
 * waits, mapped, for the next communicator of the same processes; its
 * peers are done with it once each has freed its communicator too, which
 * a set-up learns when every rank offers it. */
void cmx_fused_release(cmx_comm *c)
{
	if (c)
		cmx_ops_release(c);
	if (!c || !c->fused)
		return;
	stop(c->fused);
	pthread_mutex_lock(&ws_mu);
	/* one whose nonblocking job failed keeps the kernel's error flag,
	 * which would fail every job of a communicator taking it over */
	if (c->fused_state == 1 && !c->fused->failed && !c->fused->bell->err)
		c->fused->pool = RETIRED;
	pthread_mutex_unlock(&ws_mu);
	c->fused = NULL;
	c->fused_state = -1;
}

/* After a failed job the ranks' job numbers no longer match (a rank may
 * have rung a job its peers never saw, or seen none), so the communicator
 * stops using the path, and its workspace stays IN_USE, never taken over
 * by a later communicator that would number its jobs on from these. */
static void turn_off(cmx_comm *c, struct cmx_fused *f)
{
	c->fused_state = -1;
	stop(f);
}

/* Whether the MPI's own op on this integer datatype gives what C does
 * (a sum that wraps, a min or max of the type's values), which the kernel
 * gives: asked of the MPI once per datatype and op, on host values that
 * overflow and that have the top bit set, over an array long enough for
 * an MPI's vector loop and its scalar tail. Not all do: Open MPI 4.1's
 * vector sum of 8- and 16-bit unsigned integers saturates, and MPICH 4.0
 * compares MPI_UNSIGNED as signed; such calls are staged, so the program
 * gets its MPI's answer. */
#define PROBE 131
#define AGREES(T)                                                                                            \
	{                                                                                                    \
		T in[PROBE], io[PROBE], want[PROBE];                                                         \
		for (int i = 0; i < PROBE; i++) {                                                            \
			in[i] = (T)((i % 3 ? -1 : 1) * (i + 1)), io[i] = (T)((i % 2 ? 1 : -1) * (3 * i + 2)); \
			want[i] = op == CMX_OP_SUM ? (T)(in[i] + io[i]) : (op == CMX_OP_MIN) == (io[i] < in[i]) ? io[i] : in[i]; \
		}                                                                                            \
		cmx_args b = {.fn = CMX_FN_REDUCE_LOCAL, .coll = CMX_COLL_REDUCE_LOCAL, .sbuf = in, .rbuf = io, \
			      .scount = PROBE, .rcount = PROBE, .stype = a->rtype, .rtype = a->rtype, .op = a->op, .root = -1}; \
		return cmx_forward(&b) == 0 && memcmp(io, want, sizeof io) == 0;                             \
	}

static int ask_mpi(const cmx_args *a, int t)
{
	const int op = a->opk;
	switch (t) {
	case T_I32: AGREES(int32_t)
	case T_U32: AGREES(uint32_t)
	case T_I64: AGREES(int64_t)
	case T_U64: AGREES(uint64_t)
	case T_I16: AGREES(int16_t)
	case T_U16: AGREES(uint16_t)
	case T_I8: AGREES(int8_t)
	case T_U8: AGREES(uint8_t)
	}
	return 0;
}

static int mpi_agrees(const cmx_args *a, int t)
{
	typedef struct {
		cmx_h type, op;
		int agrees;
	} answer;
	static answer known[32];
	static int nknown;
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	int agrees = -1;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < nknown && agrees < 0; i++)
		if (known[i].type == a->rtype && known[i].op == a->op)
			agrees = known[i].agrees;
	if (agrees < 0) {
		agrees = ask_mpi(a, t);
		if (nknown < 32)
			known[nknown++] = (answer){a->rtype, a->op, agrees};
	}
	pthread_mutex_unlock(&mu);
	return agrees;
}

/* MPI_Reduce_local on device buffers of one context, the one the module
 * was loaded in (a launch elsewhere fails, and the call is staged), where
 * the kernel gives the MPI's answer: the sum of floating types (IEEE
 * addition is exact whichever operand comes first; a NaN's payload is the
 * hardware's), and the sum, min and max of integers where the MPI agrees
 * with C. Staged: the min and max of floating types (Open MPI keeps
 * either operand of a tie of +0 and -0, or of a NaN, depending on where
 * the element falls in its vector loop), other ops, 16-bit floats.
 * Blocking: the result is in inoutbuf when the call returns. */
static int reduce_local(const cmx_args *a, int *rc)
{
	static void *fn;
	const int64_t n = a->rcount;
	const int fp = a->kind[1] >= CMX_KIND_FLOAT16 && a->kind[1] <= CMX_KIND_LONGDOUBLE;
	int t, o;
	if (a->kind[1] < 0 || (t = type_of(a->kind[1])) < 0 || (o = op_of(a->opk)) < 0 || n < 0 ||
	    ((uintptr_t)a->sbuf | (uintptr_t)a->rbuf) % (unsigned)a->size[1])
		return 0;
	/* the buffers' context is made current before the module first loads:
	 * loading reads the current device, once per process */
	if ((fp && (a->opk != CMX_OP_SUM || t == T_F16 || t == T_BF16)) || !cmx_cuda_ctx_for(a->rbuf))
		return 0;
	void *f = cmx_fused_kernel("cmx_reduce_local", &fn);
	if (!f || !cmx_cuda_ctx_holds(a->rbuf) || !cmx_cuda_ctx_holds(a->sbuf) || (!fp && !mpi_agrees(a, t)))
		return 0;
	if (n == 0)
		return *rc = 0, 1;
	uint64_t count = (uint64_t)n;
	uint32_t code = (uint32_t)(t * 3 + o);
	const void *in = a->sbuf;
	void *inout = a->rbuf;
	void *args[] = {&in, &inout, &count, &code};
	const uint64_t blocks = (count + 255) / 256;
	if (!cmx_cuda_launch(f, (unsigned)(blocks < 4096 ? blocks : 4096), 256, NULL, args))
		return 0;
	*rc = cmx_cuda_sync(NULL) ? 0 : cmx_error(a->comm, cmx_abi.err_other);
	if (*rc)
		cmx_log(0, "MPI_Reduce_local: the reduction kernel failed on the device (CUDA error %d)", cmx_cuda_last_error());
	return 1;
}

/* The job of a call, from what the kernels can express; every input here
 * is agreed across ranks (a datatype that does not move as bytes on some
 * rank was packed by the router first). 0: not one the kernels run. */
static int job_of(const cmx_comm *c, const cmx_args *a, cmx_fused_job *j)
{
	const int n = c->size, me = c->rank, ip = a->sbuf == cmx_abi.in_place;
	uint64_t bytes = 0;
	uint32_t proto;
	int size, t, o;
	j->in = ip ? a->rbuf : a->sbuf;
	j->out = a->rbuf;
	j->root = 0;
	switch (a->coll) {
	case CMX_COLL_ALLREDUCE: {
		if (a->kind[1] < 0 || (t = type_of(a->kind[1])) < 0 || (o = op_of(a->opk)) < 0)
			return 0;
		size = a->size[1];
		j->count = (uint64_t)a->rcount, bytes = j->count * (uint64_t)size;
		j->code = JOB_ALLREDUCE | (uint32_t)(t * 3 + o) << 8;
		break;
	}
	case CMX_COLL_ALLGATHER:
	case CMX_COLL_ALLTOALL:
	case CMX_COLL_BCAST:
		if (!(size = a->move[1]) || (a->used[0] && !a->move[0]))
			return 0;
		bytes = j->count = (uint64_t)a->rcount * (uint64_t)size; /* per rank */
		/* modes as in kernels.cu: allgather 0, bcast 1, alltoall 2 */
		j->code = JOB_MOVE | (uint32_t)(a->coll == CMX_COLL_ALLGATHER ? 0 : a->coll == CMX_COLL_BCAST ? 1 : 2) << 8;
		if (a->coll == CMX_COLL_ALLGATHER && ip)
			j->in = (char *)a->rbuf + (size_t)me * bytes;
		if (a->coll == CMX_COLL_BCAST)
			j->in = a->rbuf, j->root = (uint32_t)a->root;
		break;
	default:
		return 0;
	}
	if (!cmx_fused_plan(a->coll, bytes, n, cmx_cfg.fused_algo, &proto, &j->nb))
		return 0;
	j->code |= proto;
	return 1;
}

/* Runs job j of call a on c's resident kernel: 1, with MPI's result in
 * *rc, or 0 if it declines (a nonblocking call the gate cannot order). */
static int launch(cmx_comm *c, const cmx_args *a, const cmx_fused_job *j, int *rc)
{
	const int n = c->size, me = c->rank;
	/* a nonblocking call rings its job and returns; its request polls the doorbell */
	const int async = a->form == CMX_FORM_NONBLOCKING;
	if (cmx_gate_refuses(c, a))
		return 0;
	struct cmx_fused *f = c->fused;
	if (f->grid != grid_of(c) && !resize(c, f)) {
		*rc = cmx_error(a->comm, cmx_abi.err_other);
		return 1;
	}
	/* From here the peers run the call too, so a failure is an error,
	 * never a quiet fallback. The job is rung after the program's work on
	 * the legacy default stream, which the kernel does not wait for by
	 * itself (a host query: a marker written by that stream would land
	 * later than the doorbell, docs/design.md), and, under
	 * MPI_THREAD_MULTIPLE, once every rank is in the call (gate.c). */
	cmx_gate_arrive(c->gate);
	const int ready = cmx_cuda_ctx_for(j->out) && (!cmx_cfg.order_default_stream || cmx_cuda_legacy_idle());
	const int go = cmx_gate_wait(c->gate, a, ready);
	if (!go || !ring(f, j->code, j->in, j->out, j->count, j->root, j->nb, async)) {
		if (!ready || go) { /* else the gate said why, and fails the communicator's later calls */
			fprintf(stderr,
				"collmux: %s on rank %d of %d: fused kernel failed to run (CUDA error %d); the fused path is off for "
				"this communicator\n",
				cmx_fn_names[a->fn], me, n, cmx_cuda_last_error());
			turn_off(c, f);
		}
		*rc = cmx_error(a->comm, cmx_abi.err_other);
		return 1;
	}
	if (CMX_UNLIKELY(f->bell->err)) {
		fprintf(stderr, "collmux: %s on rank %d of %d: ranks", cmx_fn_names[a->fn], me, n);
		for (int p = 0; p < n; p++)
			if (f->bell->err & (1u << p))
				fprintf(stderr, " %d", p);
		fprintf(stderr, " did not arrive within COLLMUX_TIMEOUT=%d s; the fused path is off for this communicator\n", cmx_cfg.timeout);
		turn_off(c, f);
		*rc = cmx_error(a->comm, cmx_abi.err_other);
		return 1;
	}
	*rc = async ? cmx_req_device(a, poll_job, f, f->seq, NULL) : 0;
	return 1;
}

int cmx_fused_run(cmx_comm *c, const cmx_args *a, int *rc)
{
	if (a->coll == CMX_COLL_REDUCE_LOCAL && a->mem == CMX_MEM_DEVICE)
		return reduce_local(a, rc);
	if (!c || a->mem != CMX_MEM_DEVICE || c->inter || c->fused_state < 0)
		return 0;
	if (CMX_UNLIKELY(c->fused && c->fused->failed)) { /* its request reported the failure */
		turn_off(c, c->fused);
		return 0;
	}
	cmx_fused_job j;
	if (!job_of(c, a, &j))
		return 0;
	if (c->fused_state == 0)
		setup(c, j.out);
	if (c->fused_state == 1 && j.nb > grid_of(c)) /* the resident kernel's blocks, known once set up */
		j.nb = grid_of(c);
	if (c->fused_state != 1 || !launch(c, a, &j, rc))
		return 0;
	if (a->prep && *rc == 0) /* a persistent call's start: the next ring the same job */
		*a->prep = (cmx_prepared){.backend = CMX_BACKEND_FUSED, .state = c->fused, .job = j};
	return 1;
}

int cmx_fused_ready(cmx_comm *c, const void *buf)
{
	if (c->fused_state == 0)
		setup(c, buf);
	/* a workspace taken over may have another size of instance, which a
	 * call's launch would agree on anew (collective, as here) */
	if (c->fused_state == 1 && c->fused->grid != grid_of(c))
		resize(c, c->fused);
	return c->fused_state == 1;
}

int cmx_fused_restart(cmx_comm *c, const cmx_args *a, const cmx_prepared *p, int *rc)
{
	if (c->fused_state != 1 || c->fused != p->state || c->fused->failed)
		return 0; /* routed anew: a failed instance is turned off there */
	return launch(c, a, &p->job, rc);
}
