/*
 * fused.c: the fused backend. Device collectives of ranks that share a
 * node and see each other's GPUs run in one kernel (fused/kernels.cu):
 * copy into a CUDA-IPC workspace, signal, read the peers over NVLink.
 * The kernel stays resident between calls and takes jobs from a doorbell
 * in host memory, so a call costs no launch; it stops itself after
 * COLLMUX_FUSED_LINGER idle microseconds. Set-up is collective and agreed
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

#include "_cgo_export.h"
#include "cmx.h"
#include "fused.h"

#define FLAGS_BYTES (MAX_BLOCKS * MAX_RANKS * 4)
#define CTL_OFF (2 * (size_t)SLOT + FLAGS_BYTES)
#define PROBE_OFF (CTL_OFF + 64) /* Ctl in kernels.cu fits in 64 bytes */
#define LL_OFF (PROBE_OFF + 64)
#define WORKSPACE (LL_OFF + 2 * MAX_RANKS * 2 * (size_t)LL_MAX)

/* Laid out as Bell and Ring in kernels.cu. */
typedef struct {
	uint32_t seq_a, code;
	uint64_t in;
	uint32_t seq_b, nb;
	uint64_t out;
	uint32_t seq_c, root;
	uint64_t n;
	uint32_t pad[4];
	uint32_t done, exited, err, pad2[13];
} bell_t;
/* the host writes the first cache line, the device the second */
_Static_assert(offsetof(bell_t, done) == 64 && sizeof(bell_t) == 128, "bell_t is laid out as Bell in kernels.cu");
typedef struct {
	char *ws[MAX_RANKS];
	void *bell, *ctl;
	uint64_t slot, ll_off, timeout_ns, linger_ns;
	int n, me;
	uint32_t launch, last;
} ring_t;

struct cmx_fused {
	char *peer[MAX_RANKS]; /* every rank's workspace, mapped here (peer[me] is ours) */
	int n, me;
	uint32_t seq;    /* the last job rung, also the epoch of the peers' flags */
	uint32_t launch; /* the id of the resident instance last launched */
	int running;     /* that instance may still be running */
	void *stream;    /* non-blocking, or the program's default-stream work would wait for the resident kernel */
	volatile bell_t *bell;
	void *bell_d;
};

/* ---- the module: compiled once per process ---- */
/* element types in the order of the kernel's switch (run in kernels.cu) */
enum { T_F32, T_F64, T_I32, T_U32, T_I64, T_U64, T_F16, T_BF16 };
static void *module, *fn_ring;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* Workspaces stay mapped by the peers until the process ends (freeing one
 * safely would need the peers' agreement at MPI_Comm_free), so at most
 * MAX_COMMS communicators of a process get one; the others use NCCL.
 * live[] holds those of communicators not yet freed, whose resident
 * kernels MPI_Finalize stops. */
#define MAX_COMMS 16
static int comms_with_workspace;
static struct cmx_fused *live[MAX_COMMS];
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;

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
	if (!collmux_go_fused_module(arch, cmx_cuda_driver_version(), (char *)lib, &image, &len))
		return;
	fn_ring = cmx_cuda_function(image, "cmx_ring", &module);
	/* image stays allocated: with lazy module loading (the default since
	 * CUDA 12.2) the driver reads it again when a kernel first launches */
	cmx_log(1, "fused kernels %s (sm_%d)", fn_ring ? "loaded" : "failed to load", arch);
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
	}
	return -1;
}

static int op_of(int op) { return op == CMX_OP_SUM ? 0 : op == CMX_OP_MIN ? 1 : op == CMX_OP_MAX ? 2 : -1; }

/* ---- set-up, collective over the communicator ---- */

static void setup(cmx_comm *c, const void *buf)
{
	struct {
		char host[64], bus[32];
		int ok, arch, algo;
	} me, *all = calloc((size_t)c->size, sizeof me);
	memset(&me, 0, sizeof me);
	me.ok = all && c->size <= MAX_RANKS && comms_with_workspace < MAX_COMMS && cmx_cuda_ctx_for(buf) && (pthread_once(&load_once, load), fn_ring) &&
		cmx_cuda_device(&me.arch, me.bus, sizeof me.bus);
	cmx_node_name(c->rank, c->size, me.host, sizeof me.host);
	me.algo = cmx_cfg.fused_algo;
	c->fused_state = -1;
	if (!all || cmx_px.Allgather(&me, (int)sizeof me, cmx_abi.byte, all, (int)sizeof me, cmx_abi.byte, c->handle) != 0) {
		free(all);
		return;
	}
	const char *why = NULL;
	for (int p = 0; p < c->size && !why; p++) {
		if (!all[p].ok)
			why = "NVRTC, the CUDA driver's IPC or the kernels are unavailable on some rank, or it has 16 workspaces already";
		else if (strcmp(all[p].host, all[0].host) != 0)
			why = "the ranks span several nodes";
		else if (all[p].algo != all[0].algo)
			why = "the ranks' COLLMUX_FUSED_ALGO differ";
		for (int q = 0; q < p && !why; q++)
			if (strcmp(all[p].bus, all[q].bus) == 0)
				why = "two ranks share a GPU (or CUDA_VISIBLE_DEVICES hides the peers)";
	}
	free(all);
	if (why) { /* every rank read the same table, so every rank stops here */
		if (c->rank == 0)
			cmx_log(1, "fused path off for a communicator of %d ranks: %s", c->size, why);
		return;
	}
	cmx_comm_gate(c); /* MPI_THREAD_MULTIPLE: calls start once every rank is in (gate.c) */
	struct cmx_fused *f = calloc(1, sizeof *f);
	cmx_ipc_handle h, *hs = calloc((size_t)c->size, sizeof h);
	int ok = f && hs && (f->peer[c->rank] = cmx_cuda_malloc(WORKSPACE)) && cmx_cuda_memset(f->peer[c->rank], 0, WORKSPACE) &&
		 cmx_cuda_ipc_handle(f->peer[c->rank], &h) && (f->stream = cmx_cuda_stream_new(1)) &&
		 (f->bell = cmx_cuda_mapped(sizeof(bell_t), &f->bell_d));
	if (!ok)
		memset(&h, 0, sizeof h);
	if (cmx_comm_agree(c, ok) && cmx_px.Allgather(&h, (int)sizeof h, cmx_abi.byte, hs, (int)sizeof h, cmx_abi.byte, c->handle) == 0) {
		/* map every peer and prove the mapping with a real transfer:
		 * each rank writes its token, every rank reads all of them */
		uint32_t token = 0xC011A000u + (uint32_t)c->rank;
		ok = cmx_cuda_copy(f->peer[c->rank] + PROBE_OFF, &token, sizeof token, NULL) && cmx_cuda_sync(NULL);
		for (int p = 0; p < c->size && ok; p++)
			if (p != c->rank)
				ok = (f->peer[p] = cmx_cuda_ipc_open(hs[p])) != NULL;
		ok = cmx_comm_agree(c, ok);
		for (int p = 0; p < c->size && ok; p++) {
			uint32_t got = 0;
			ok = cmx_cuda_dtoh(&got, f->peer[p] + PROBE_OFF, sizeof got) && got == 0xC011A000u + (uint32_t)p;
		}
		if (cmx_comm_agree(c, ok)) {
			f->n = c->size, f->me = c->rank;
			c->fused = f;
			c->fused_state = 1;
			pthread_mutex_lock(&live_mu);
			live[comms_with_workspace++] = f;
			pthread_mutex_unlock(&live_mu);
			free(hs);
			return;
		}
		if (c->rank == 0)
			cmx_log(1, "fused path off for a communicator of %d ranks: peer memory could not be mapped or read", c->size);
	}
	/* peers' mappings stay until the process ends: closing them needs the
	 * same agreement as opening, and this path is rare */
	if (f) {
		cmx_cuda_free(f->peer[c->rank]);
		cmx_cuda_stream_free(f->stream);
	}
	free(f);
	free(hs);
}

/* ---- the resident kernel ---- */

/* job numbers run 1, 2, ..., 0xffffffff, 1, ...: never 0 (see LL in kernels.cu) */
static uint32_t next_seq(uint32_t s) { return s + 1 ? s + 1 : 1; }

static int start(struct cmx_fused *f)
{
	ring_t R = {.bell = f->bell_d, .ctl = f->peer[f->me] + CTL_OFF, .slot = SLOT, .ll_off = LL_OFF, .n = f->n, .me = f->me};
	for (int p = 0; p < f->n; p++)
		R.ws[p] = f->peer[p];
	R.timeout_ns = (uint64_t)cmx_cfg.timeout * 1000000000ull;
	R.linger_ns = (uint64_t)cmx_cfg.linger_us * 1000ull;
	/* the job just rung is the first it takes (numbers skip 0, see LL in kernels.cu) */
	R.launch = ++f->launch, R.last = f->seq - 1 ? f->seq - 1 : 0xffffffffu;
	void *args[] = {&R};
	return f->running = cmx_cuda_launch(fn_ring, GRID, 512, f->stream, args);
}

/* Waits for job s; relaunches the kernel if it stopped before taking it.
 * The kernel writes "done" before "exited", so "exited" without "done"
 * means the job was never taken. 0 when the kernel failed. */
static int wait_done(struct cmx_fused *f, uint32_t s)
{
	volatile bell_t *b = f->bell;
	for (unsigned spins = 1;; spins++) {
		if (__atomic_load_n(&b->done, __ATOMIC_ACQUIRE) == s)
			return 1;
		if (spins % 64 == 0 && __atomic_load_n(&b->exited, __ATOMIC_ACQUIRE) == f->launch) {
			if (__atomic_load_n(&b->done, __ATOMIC_ACQUIRE) == s)
				return 1;
			if (!start(f))
				return 0;
		}
		if (spins % (1u << 16) == 0 && cmx_cuda_query(f->stream) < 0)
			return 0; /* the kernel faulted */
		cmx_cpu_relax();
	}
}

/* Rings job (code, in, out, n, root) for nb blocks and waits for it. The
 * doorbell's three chunks are each written payload first, then (release)
 * the sequence number; the device reads a chunk in one load. */
static int ring(struct cmx_fused *f, uint32_t code, const void *in, void *out, uint64_t n, uint32_t root, uint32_t nb)
{
	volatile bell_t *b = f->bell;
	const uint32_t s = f->seq = next_seq(f->seq);
	b->code = code, b->in = (uintptr_t)in;
	__atomic_store_n(&b->seq_a, s, __ATOMIC_RELEASE);
	b->nb = nb, b->out = (uintptr_t)out;
	__atomic_store_n(&b->seq_b, s, __ATOMIC_RELEASE);
	b->root = root, b->n = n;
	__atomic_store_n(&b->seq_c, s, __ATOMIC_RELEASE);
	if (__atomic_load_n(&b->exited, __ATOMIC_ACQUIRE) == f->launch)
		f->running = 0;
	return (f->running || start(f)) && wait_done(f, s);
}

static void stop(struct cmx_fused *f)
{
	if (f->running && __atomic_load_n(&f->bell->exited, __ATOMIC_ACQUIRE) != f->launch)
		ring(f, JOB_EXIT, NULL, NULL, 0, 0, GRID); /* every block stops */
	cmx_cuda_sync(f->stream);
	f->running = 0;
}

void cmx_fused_release_all(void)
{
	pthread_mutex_lock(&live_mu);
	for (int i = 0; i < comms_with_workspace; i++)
		if (live[i])
			stop(live[i]);
	pthread_mutex_unlock(&live_mu);
}

void cmx_fused_release(cmx_comm *c)
{
	if (!c || !c->fused)
		return;
	pthread_mutex_lock(&live_mu);
	for (int i = 0; i < comms_with_workspace; i++)
		if (live[i] == c->fused)
			live[i] = NULL;
	pthread_mutex_unlock(&live_mu);
	stop(c->fused);
	cmx_cuda_stream_free(c->fused->stream);
	/* the workspace is mapped by the peers; it is freed with the process */
	free(c->fused);
	c->fused = NULL;
	c->fused_state = -1;
}

int cmx_fused_run(cmx_comm *c, const cmx_args *a, int *rc)
{
	if (c->inter || c->fused_state < 0)
		return 0;
	const int n = c->size, me = c->rank, ip = a->sbuf == cmx_abi.in_place;
	const char *in = ip ? a->rbuf : a->sbuf;
	char *out = a->rbuf;
	uint64_t bytes = 0, count = 0;
	uint32_t code, proto, nb;
	int kind, size, root = 0, t, o;
	/* what the kernels can express; every input here is agreed across ranks */
	switch (a->coll) {
	case CMX_COLL_ALLREDUCE: {
		if (!cmx_dtype_info(a->rtype, &kind, &size) || (t = type_of(kind)) < 0 || (o = op_of(cmx_op_info(a->op))) < 0)
			return 0;
		count = (uint64_t)a->rcount, bytes = count * (uint64_t)size;
		code = JOB_ALLREDUCE | (uint32_t)(t * 3 + o) << 8;
		break;
	}
	case CMX_COLL_ALLGATHER:
	case CMX_COLL_ALLTOALL:
	case CMX_COLL_BCAST:
		if (!(size = cmx_move_size(a->rtype)) || (!ip && a->coll != CMX_COLL_BCAST && !cmx_move_size(a->stype)))
			return 0;
		bytes = count = (uint64_t)a->rcount * (uint64_t)size; /* per rank */
		/* modes as in kernels.cu: allgather 0, bcast 1, alltoall 2 */
		code = JOB_MOVE | (uint32_t)(a->coll == CMX_COLL_ALLGATHER ? 0 : a->coll == CMX_COLL_BCAST ? 1 : 2) << 8;
		if (a->coll == CMX_COLL_ALLGATHER && ip)
			in = a->rbuf + (size_t)me * bytes;
		if (a->coll == CMX_COLL_BCAST)
			in = a->rbuf, root = a->root;
		break;
	default:
		return 0;
	}
	if (!cmx_fused_plan(a->coll, bytes, n, cmx_cfg.fused_algo, &proto, &nb))
		return 0;
	code |= proto;
	if (c->fused_state == 0)
		setup(c, out);
	if (c->fused_state != 1)
		return 0;
	struct cmx_fused *f = c->fused;
	/* From here the peers run the call too, so a failure is an error,
	 * never a quiet fallback. The job is rung after the program's work on
	 * the legacy default stream, which the kernel does not wait for by
	 * itself (a host query: a marker written by that stream would land
	 * later than the doorbell, docs/design.md), and, under
	 * MPI_THREAD_MULTIPLE, once every rank is in the call (gate.c). */
	cmx_gate_arrive(c->gate);
	const int ready = cmx_cuda_ctx_for(out) && (!cmx_cfg.order_default_stream || cmx_cuda_legacy_idle());
	const int go = cmx_gate_wait(c->gate, a, ready);
	if (!go || !ring(f, code, in, out, count, (uint32_t)root, nb)) {
		if (!ready || go) /* else the gate said why */
			fprintf(stderr, "collmux: %s on rank %d of %d: fused kernel failed to run (CUDA error %d)\n", cmx_fn_names[a->fn], me,
				n, cmx_cuda_last_error());
		*rc = cmx_error(a->comm, cmx_abi.err_other);
		return 1;
	}
	if (CMX_UNLIKELY(f->bell->err)) {
		fprintf(stderr, "collmux: %s on rank %d of %d: ranks", cmx_fn_names[a->fn], me, n);
		for (int p = 0; p < n; p++)
			if (f->bell->err & (1u << p))
				fprintf(stderr, " %d", p);
		fprintf(stderr, " did not arrive within COLLMUX_TIMEOUT=%d s; the fused path is off for this communicator\n", cmx_cfg.timeout);
		c->fused_state = -1;
		stop(f);
		*rc = cmx_error(a->comm, cmx_abi.err_other);
		return 1;
	}
	*rc = 0;
	return 1;
}
