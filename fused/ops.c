//go:build collmux_lib

/*
 * ops.c: fused computation + collective operations, collmux's own API
 * (include/collmux.h). An interposer cannot see the GEMV before an
 * MPI_Allreduce, so these are called by name. Each is queued on the
 * program's stream, with no host thread in the call, in one of the forms
 * COLLMUX_OPS_ALGO names: collmux's kernels (fused/ops.cu), which compute
 * this rank's part and push it tile by tile into the peers' ops
 * workspaces over NVLink; cuBLAS, then collmux's kernel that sums what the
 * ranks wrote into their workspaces; or cuBLAS, then NCCL.
 *
 * A communicator's ops workspace is separate from its collectives' (the
 * resident kernel's jobs and these kernels run on different streams, in
 * no order), made at its first operation, collectively, and grown, at a
 * stream synchronisation and two agreements, when a call needs more. Like
 * the collectives' workspaces it is never freed (MPI_Comm_free is local,
 * and freeing memory a peer maps needs the peer): at most OPS_MAX per
 * process.
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmx.h"
#include "collmux.h"
#include "fused.h"

#define OPS_FLAGS ((size_t)2 * CMX_OPS_TILES * CMX_MAX_RANKS * 8)
#define OPS_MIN (16u << 20) /* a workspace's least size: room for GEMVs of m x batch to 1 Mi (64 Ki rows at batch 16) on 2 ranks */
#define OPS_MAX 16

/* Laid out as OpsCall and Gemv in ops.cu. */
typedef struct {
	char *ws[CMX_MAX_RANKS];
	uint64_t flags, data;
	int n, me;
	uint32_t seq, shape;
	uint64_t timeout_ns;
	uint32_t *err, *gone;
	uint32_t split;
} ops_call_t;
typedef struct {
	const void *a, *x;
	void *y;
	long long lda, ldx, ldy;
	int m, k, batch, rw;
	_Bool vec, xvec;
	int segs;
} gemv_t;

struct cmx_ops {
	char *peer[CMX_MAX_RANKS]; /* every rank's ops workspace, mapped here */
	size_t cap;            /* bytes of each */
	uint32_t seq;          /* the last call's number, the same on every rank */
	volatile uint32_t *err; /* the kernels' reports (ops_call_t.err), host-mapped */
	void *err_d;
	void *gone;        /* device word: a block gave up (ops_call_t.gone) */
	void *last;        /* event: the last call's kernel done */
	void *last_stream; /* the stream it ran on */
	int sms;           /* the fewest multiprocessors of the ranks' GPUs (tiles are cut alike on every rank) */
	int mps;           /* some rank shares its GPU through MPS: see consume() */
	int mates;         /* ranks of the communicator on this rank's GPU (this one included): they grow together */
	int cublas;        /* every rank has cuBLAS */
	int tc;            /* every rank's GPU has 16-bit tensor-core mma (sm_80 on): the fused GEMV's tiles are cmx_gemv_tc's */
	int tuned;         /* every rank has the same forms from its tuning table (cmx_cfg.ops_tuned): auto takes them */
	struct symm *symm; /* the communicator's symmetric memory (collmux_symm_alloc) */
	uint32_t symm_made; /* regions made so far: each one's number, the same on every rank */
	void *side;        /* collmux's own stream, for the flags of a refused call */
	void *push;        /* collmux's own stream (greatest priority), for the all-gather + GEMM's pushes */
	void *pushed;      /* events: the program's stream reached a call; the pushes (and copies) of it done */
	void *started;
};

/* Symmetric memory: the same number of bytes on every rank of a
 * communicator, each rank's mapped by its peers (peer[me] is this rank's). */
struct symm {
	char *peer[CMX_MAX_RANKS];
	size_t bytes;
	uint32_t serial; /* its number among the communicator's regions, in every call's digest */
	struct symm *next;
};
static int ops_made; /* workspaces made by this process (never freed) */
static pthread_mutex_t ops_mu = PTHREAD_MUTEX_INITIALIZER;

static int fail(const char *fn, cmx_comm *c, const char *why)
{
	fprintf(stderr, "collmux: %s on rank %d: %s\n", fn, c ? c->rank : cmx_log_rank(), why);
	return -1;
}

/* Waits for the communicator's last kernel; 0 when it failed. */
static int settled(struct cmx_ops *o)
{
	int d = 1;
	while (o->last && (d = cmx_cuda_event_done(o->last)) == 0)
		cmx_cpu_relax();
	return d > 0;
}

static const char not_device[] = "a, x and y must be in device memory";

static void *await_k; /* cmx_ops_await, looked up at set-up where some rank shares its GPU through MPS */

/* Makes c's ops workspace of `bytes`, or a larger one in place of the one
 * it has: collective, decided alike on every rank (from the arguments
 * every rank passes alike, and agreements). args: this rank's buffers
 * are fit for the call; where the call makes a collective step, every
 * rank learns whether all are, so that one rank's refusal is every rank's
 * (elsewhere the peers' kernels time out, as collmux.h says). NULL, or
 * why not. */
static const char *ready(cmx_comm *c, const void *buf, size_t bytes, int args)
{
	struct cmx_ops *o = c->ops;
	if (c->ops_state < 0)
		return "fused operations are off for this communicator (see the message of the call that failed)";
	if (o && o->cap >= bytes)
		return args ? NULL : not_device;
	/* a workspace the GPUs cannot hold is refused on every rank before
	 * anything is freed or made (each rank's old one is freed to grow) */
	size_t cap = o && o->cap ? o->cap : OPS_MIN;
	while (cap < bytes && cap <= SIZE_MAX / 4)
		cap *= 2;
	const size_t have = (cmx_cuda_up || cmx_cuda_probe()) && cmx_cuda_ctx_for(buf) ? cmx_cuda_mem_free() : SIZE_MAX;
	const size_t mates = o ? (size_t)o->mates : 1; /* each frees its old one and makes a new one on this GPU */
	if (!cmx_comm_agree(c, cap >= bytes && (have == SIZE_MAX || cap <= (have + mates * (o ? o->cap : 0)) / mates)))
		return "its workspace would be larger than some rank's GPU has free";
	if (!o) { /* the first operation: can every rank take part? */
		struct {
			cmx_place at;
			int args, ok, arch, room, algo, sms, cublas;
			uint32_t tuned;
		} me, *all = calloc((size_t)c->size, sizeof me);
		memset(&me, 0, sizeof me);
		pthread_mutex_lock(&ops_mu);
		me.room = ops_made < OPS_MAX;
		pthread_mutex_unlock(&ops_mu);
		me.algo = cmx_cfg.ops_algo;
		me.tuned = cmx_cfg.ops_tuned_n ? cmx_cfg.ops_tuned_hash : 0;
		me.args = args;
		me.ok = all && c->size <= CMX_MAX_RANKS && args && cmx_cuda_ctx_for(buf) && cmx_cuda_ipc_capable() &&
			cmx_place_here(c->rank, c->size, &me.at, &me.arch);
		if (me.ok) {
			me.sms = cmx_cuda_sm_count();
			me.cublas = cmx_cublas_ready();
		}
		const char *why = NULL;
		if (!cmx_comm_agree(c, all != NULL) || cmx_px.Allgather(&me, (int)sizeof me, cmx_abi.byte, all, (int)sizeof me, cmx_abi.byte, c->handle) != 0)
			why = "its set-up could not gather the ranks' facts";
		for (int p = 0; p < c->size && !why; p++)
			if (!all[p].args) { /* a refusal of this call only: the next may set up */
				free(all);
				return args ? "some rank passed buffers that are not in device memory" : not_device;
			}
		int sms = INT_MAX, cublas = 1, tc = 1, tuned = me.tuned != 0;
		for (int p = 0; p < c->size && !why; p++) {
			tuned &= all[p].tuned == me.tuned;
			sms = all[p].sms < sms ? all[p].sms : sms; /* the tiles' shape must be the same on every rank */
			cublas &= all[p].cublas;
			tc &= all[p].arch >= 80;
			if (!all[p].ok)
				why = c->size > CMX_MAX_RANKS ? "it has more than 8 ranks"
							  : "the CUDA driver's IPC, or a current device, is unavailable on some rank";
			else if (!all[p].room)
				why = "some rank made as many ops workspaces as a process may (16)";
			else if (all[p].algo != all[0].algo)
				why = "the ranks' COLLMUX_OPS_ALGO differ";
		}
		if (!why)
			why = cmx_fused_placement(&all[0].at, sizeof *all, c->size);
		/* the kernels after the placement, as the collectives' set-up
		 * has them (fused/host.c) */
		if (!why && !cmx_comm_agree(c, cmx_fused_kernel("cmx_ring", NULL) != NULL))
			why = "NVRTC or the fused kernels are unavailable on some rank";
		int mps = 0, mates = 0;
		for (int p = 0; p < c->size && !why; p++)
			mps |= all[p].at.mps, mates += strcmp(all[p].at.bus, me.at.bus) == 0;
		free(all);
		if (!why && mps && !cmx_fused_kernel("cmx_ops_await", &await_k)) /* consume() needs it then; agreed below */
			why = "the fused kernels lack cmx_ops_await (a stale kernel cache?)";
		if (!why && !(o = calloc(1, sizeof *o)))
			why = "out of memory";
		if (!why && !(o->err = cmx_cuda_mapped(sizeof *o->err, &o->err_d)))
			why = "no host-mapped memory for the kernels' reports";
		if (!why && (!(o->gone = cmx_cuda_malloc(sizeof(uint32_t))) || !cmx_cuda_memset(o->gone, 0, sizeof(uint32_t))))
			why = "no device memory for the kernels' reports";
		if (!cmx_comm_agree(c, !why) && !why)
			why = "some rank could not set up";
		if (why) {
			if (o && o->err)
				cmx_cuda_host_free((void *)o->err);
			if (o && o->gone)
				cmx_cuda_free(o->gone);
			free(o);
			c->ops_state = -1;
			return why;
		}
		o->sms = sms, o->cublas = cublas, o->tc = tc, o->tuned = tuned, o->mps = mps, o->mates = mates;
		if (me.tuned && !tuned)
			cmx_log(1, "the ranks' tuning tables choose the fused operations' forms differently: the built-in choice holds");
		c->ops = o;
		pthread_mutex_lock(&ops_mu);
		ops_made++;
		pthread_mutex_unlock(&ops_mu);
	} else { /* grow: every rank's kernels are done with the old one, then its mappings close, then it is freed */
		if (!cmx_comm_agree(c, args))
			return args ? "some rank passed buffers that are not in device memory" : not_device;
		int ok = cmx_comm_agree(c, settled(o));
		for (int p = 0; p < c->size && ok; p++)
			if (p != c->rank)
				cmx_cuda_ipc_close(o->peer[p]);
		if (!cmx_comm_agree(c, ok))
			return c->ops_state = -1, "the ops workspace could not be grown";
		cmx_cuda_free(o->peer[c->rank]);
		memset(o->peer, 0, sizeof o->peer);
	}
	if (!cmx_fused_map(c, 1, cap, 0, o->peer))
		return c->ops_state = -1, "the ops workspaces could not be mapped by every rank";
	o->cap = cap, o->seq = 0; /* zeroed flags: numbering starts again */
	c->ops_state = 1;
	c->devup = 1; /* every rank mapped device workspaces together: the router's agreements may start (dispatch/router.c, kinds_agreed) */
	return NULL;
}

/* Lets go of c's operations without waiting for their kernels
 * (MPI_Comm_free is local): the workspace and the report words (err,
 * gone), which a kernel may still write, stay (see above); the event goes, which CUDA
 * allows while it is pending. */
void cmx_ops_release(cmx_comm *c)
{
	struct cmx_ops *o = c->ops;
	if (!o)
		return;
	cmx_cuda_event_free(o->last);
	cmx_cuda_event_free(o->started);
	cmx_cuda_event_free(o->pushed);
	if (o->side) /* CUDA lets its pending work finish first */
		cmx_cuda_stream_free(o->side);
	if (o->push)
		cmx_cuda_stream_free(o->push);
	free(o);
	c->ops = NULL;
	c->ops_state = -1;
}

/* What the arguments of every operation need before its kernel: the
 * communicator's state (capi/ops.c found it, or why not), not an
 * intercommunicator, and no failure reported by an earlier kernel. */
static cmx_comm *comm_of(const char *fn, cmx_comm *c, const char *why)
{
	if (!c) {
		fail(fn, NULL, why);
		return NULL;
	}
	if (c->inter) {
		fail(fn, c, "intercommunicators are not supported");
		return NULL;
	}
	if (c->ops && *c->ops->err) {
		fail(fn, c, "an earlier fused operation on this communicator failed (its message above); fused operations are off for it");
		cmx_ops_release(c);
		return NULL;
	}
	return c;
}

/* Orders this call after the communicator's last one, which may have run
 * on another stream (ops.cu: two data halves suffice only so), and
 * numbers it. */
static int begin(struct cmx_ops *o, void *stream, ops_call_t *O, cmx_comm *c, uint32_t shape)
{
	if (o->last && o->last_stream != stream && !cmx_cuda_wait(stream, o->last))
		return 0;
	o->seq = cmx_fused_next_seq(o->seq);
	memset(O, 0, sizeof *O);
	for (int p = 0; p < c->size; p++)
		O->ws[p] = o->peer[p];
	const int half = (int)(o->seq & 1);
	O->flags = (uint64_t)half * CMX_OPS_TILES * CMX_MAX_RANKS * 8;
	O->data = OPS_FLAGS + (uint64_t)half * ((o->cap - OPS_FLAGS) / 2 & ~(size_t)255);
	O->n = c->size, O->me = c->rank;
	O->seq = o->seq, O->shape = shape;
	O->timeout_ns = (uint64_t)cmx_cfg.timeout * 1000000000ull;
	O->err = o->err_d;
	O->gone = o->gone;
	return 1;
}

static int end(struct cmx_ops *o, void *stream)
{
	o->last_stream = stream;
	return cmx_cuda_record(&o->last, stream);
}

/* This rank refuses a call (why) its peers may be making: after set-up,
 * where ready() took no collective step, nothing else tells them. So the
 * call is numbered as theirs are and its flags raised with a shape no call
 * has (cmx_ops_refuse, on collmux's own stream, ordered after the last
 * call): a peer that made it reports another shape at once, and this
 * rank's next call is not taken for this one. The kernel then waits for
 * the peers' first flags of the call (ops.cu says why); where every rank
 * refuses alike, that is all, and the communicator goes on. -1, with the
 * message. */
static int refuse(const char *fn, cmx_comm *c, const char *why)
{
	static void *k;
	struct cmx_ops *o = c->ops;
	ops_call_t O;
	void *f = cmx_fused_kernel("cmx_ops_refuse", &k), *args[] = {&O};
	if (!o->side)
		o->side = cmx_cuda_stream_new(1);
	if (!f || !o->side || !begin(o, o->side, &O, c, 0) || !cmx_cuda_launch(f, 1, 32, o->side, args) || !end(o, o->side))
		c->ops_state = -1; /* the peers time out instead; this rank's numbering may be off, so it stops */
	return fail(fn, c, why);
}

/* A call this rank could not order after its last one (no context, no
 * event to wait for) is not numbered here but is by the peers: this rank
 * stops (the peers time out waiting for its flags) rather than take their
 * next call's flags for this one's. */
static int unordered(const char *fn, cmx_comm *c)
{
	c->ops_state = -1;
	return fail(fn, c, "could not order the call after the communicator's last operation; fused operations are off for it");
}

/* A call the peers run could not be queued whole here: what was queued,
 * GEMMs into the peers' memory too, becomes the communicator's last
 * operation (which symm_free waits for), and the operations go off here
 * (the peers time out waiting for this rank's flags). -1, with the
 * message. */
static int broken(const char *fn, cmx_comm *c, void *stream, const char *what)
{
	char msg[128];
	const int err = cmx_cuda_last_error();
	end(c->ops, stream);
	c->ops_state = -1;
	snprintf(msg, sizeof msg, "%s could not be queued (CUDA error %d)", what, err);
	return fail(fn, c, msg);
}

static const char captured[] = "cannot be captured into a CUDA graph (its calls are numbered as they are made)";

/* Whether this rank makes a call of `bytes` on c: ready() sets the
 * operations up for it, then the call is refused where this rank must
 * (bad: a reason of its own found before, an argument that may differ
 * between ranks; a stream under capture, whose kernels would replay this
 * call's numbers and flags, which the peers' replays would find already
 * raised; args: buffers unfit, as ready() takes them). Where ready() took
 * a collective step, its agreement refused the call on every rank;
 * otherwise the peers learn it from refuse(), or, with agree, from an
 * agreement: a call whose peers would not wait on flags (the GEMV's nccl
 * form, whose peers would wait in NCCL for a rank that refused, with no
 * watchdog) takes one. 0, or -1 with the message. */
static int admit(const char *fn, cmx_comm *c, void *stream, const void *buf, uint64_t bytes, const char *bad, int args, int agree)
{
	if (!bad && cmx_cuda_capturing(stream))
		bad = captured;
	const int steady = c->ops && c->ops_state == 1 && c->ops->cap >= bytes; /* ready() takes no collective step */
	const char *why = ready(c, buf, bytes, args && !bad);
	if (steady && agree && !cmx_comm_agree(c, !bad && !why)) /* every rank refuses, none numbers the call */
		return fail(fn, c, bad ? bad : why ? why : "another rank refused the call (its message says why)");
	if (!bad && !why)
		return 0;
	return steady ? refuse(fn, c, bad ? bad : why) : fail(fn, c, bad ? bad : why);
}

/* The element types of the operations (COLLMUX_FLOAT32, _FLOAT16,
 * _BFLOAT16): their sizes, and their names in the kernels' names. */
static const int esize[] = {4, 2, 2};
static const char *const type_names[] = {"f32", "f16", "bf16"};
static const char bad_dtype[] = "dtype is not COLLMUX_FLOAT32, COLLMUX_FLOAT16 or COLLMUX_BFLOAT16";
static const char no_kernel[] = "the fused kernels lack this operation (a stale kernel cache?)";

/* The kernel base_TYPE (or base_TYPE_NB where nb is not 0) for dtype,
 * looked up once into *slot. */
static void *typed_kernel(const char *base, int dtype, int nb, void **slot)
{
	char name[40];
	if (nb)
		snprintf(name, sizeof name, "%s_%s_%d", base, type_names[dtype], nb);
	else
		snprintf(name, sizeof name, "%s_%s", base, type_names[dtype]);
	return cmx_fused_kernel(name, slot);
}

/* Land in ops.cu: the kernel that ends an operation whose kernels pushed
 * this rank's results into the peers' data halves */
typedef struct {
	void *out;
	uint64_t bytes, row, skip_lo, skip_hi;
	uint32_t tile;
} land_t;
static void *land_k;

static void *land_kernel(void) { return cmx_fused_kernel("cmx_ops_land", &land_k); }

/* The grid of a kernel whose blocks wait for the peers' kernels: all
 * resident at once (two blocks a multiprocessor). */
static unsigned waiting_grid(const struct cmx_ops *o, uint64_t blocks)
{
	const uint64_t most = 2u * (uint64_t)o->sms;
	return (unsigned)(blocks < 1 ? 1 : blocks < most ? blocks : most);
}

/* Queues f (its argument arg), a kernel whose blocks raise this rank's
 * flags of tiles [first, first + tiles) (where raise says so) and wait for
 * every rank's: as it is; or, where ranks share a GPU through MPS, after
 * cmx_ops_await has made those raises and waits with one block, f then
 * waiting for nothing. There another process's kernel that this rank
 * waits for needs room on the same GPU, and f's waiting blocks on every
 * multiprocessor left a fused GEMV block (a whole multiprocessor's
 * registers) none: every rank waited until COLLMUX_TIMEOUT. Ranks outside
 * the communicator may share the GPU too, so no share of the GPU that
 * counts only the communicator's ranks would do. */
static int consume(struct cmx_ops *o, ops_call_t *O, void *f, uint64_t blocks, void *arg, uint32_t first, uint32_t tiles, int raise,
		   int early, void *stream)
{
	ops_call_t W = *O;
	void *args[] = {&W, arg};
	if (o->mps) {
		struct {
			uint32_t first, tiles, raise;
		} A = {first, tiles, (uint32_t)raise}; /* Await in ops.cu */
		void *aargs[] = {O, &A};
		if (!cmx_cuda_launch(await_k, 1, CMX_OPS_THREADS, stream, aargs)) /* looked up where o->mps was set */
			return 0;
		W.split = 1;
	}
	/* early: the kernel before f raised every flag f waits for, after all
	 * it wrote that f reads (the fused GEMV before its sum), so f may be
	 * queued to start before that kernel ends (on sm_90 on, once all its
	 * blocks have started: f's waiting blocks then take no place it
	 * needs). Not under MPS: there f follows the await kernel and polls
	 * no flags, so only stream order tells it the data are there. */
	return (early && !o->mps ? cmx_cuda_launch_early : cmx_cuda_launch)(f, waiting_grid(o, blocks), CMX_OPS_THREADS, stream, args);
}

/* Queues a landing (the peers told, theirs awaited, the data half copied
 * into L's output; with no bytes, a barrier of the ranks' streams). */
static int land(struct cmx_ops *o, ops_call_t *O, land_t *L, void *stream)
{
	const uint64_t blocks = (L->bytes + (uint64_t)CMX_OPS_THREADS * 16 - 1) / ((uint64_t)CMX_OPS_THREADS * 16);
	return consume(o, O, land_k, blocks, L, L->tile, 1, 1, 0, stream);
}

/* The operations, as their digests tell them apart: a rank that makes
 * one while its peers make another fails on the shapes even where their
 * numbers agree. */
enum { OP_GEMV_AR = 1, OP_EMB_A2A, OP_GEMM_A2A, OP_GEMM_RS, OP_AG_GEMM };

/* a digest of the operation and what every rank must pass alike */
static uint32_t digest(int op, const int64_t *v, int n)
{
	uint32_t h = (2166136261u ^ (uint32_t)op) * 16777619u;
	for (int i = 0; i < n; i++)
		for (int b = 0; b < 8; b++)
			h = (h ^ (uint8_t)(v[i] >> (8 * b))) * 16777619u;
	return h;
}

/* How collmux_gemv_allreduce computes (COLLMUX_OPS_ALGO): the fused
 * kernel; cuBLAS's fp32 partials summed by collmux's kernel over NVLink;
 * or cuBLAS to the output's type and NCCL's all-reduce on the stream (the
 * unfused form, which programs write by hand). */
enum { GEMV_FUSED = 1, GEMV_SUM, GEMV_NCCL };

/* COLLMUX_OPS_ALGO=auto: the tuning table's form for the communicator's
 * ranks and the shape, where collmux tune --ops measured it and every rank
 * has the same forms (agreed at set-up), else, from 2 x H200
 * (docs/results/gpu-2026-11-30-fusedops):
 * at batch 1 cuBLAS + collmux's sum is 1.01-1.23x cuBLAS + NCCL (it needs
 * no copy and no NCCL launch), at batch 4 0.96-0.99x and at 16 down to
 * 0.60x (cuBLAS is slower with fp32 outputs), so NCCL's form past batch 1.
 * The fused kernel reached 0.76-0.87x at batch 1 (it streams A at about 3.3
 * TB/s where cuBLAS does 4.3) and fell further behind with the batch; on
 * tensor cores with streaming loads (sessions 17-20, one H200, one rank)
 * the whole call is 0.87x cuBLAS's GEMV alone at 8192 rows, 0.93-0.94x
 * at 16384 (batch up to 8) and 1.01-1.03x at 28672: auto does not take it
 * until two GPUs measure it against both unfused forms. */
static int gemv_form(const cmx_comm *c, int batch, int m)
{
	if (cmx_cfg.ops_algo)
		return cmx_cfg.ops_algo;
	/* collmux tune --ops: this machine's fastest */
	const int tuned = c->ops && c->ops->tuned ? cmx_ops_tuned_form(cmx_cfg.ops_tuned, cmx_cfg.ops_tuned_n, c->size, batch, m) : 0;
	if (tuned)
		return tuned;
	return batch == 1 ? GEMV_SUM : GEMV_NCCL;
}

/* The form c runs this call in, from gemv_form and what every rank has
 * (agreed: cuBLAS at set-up, NCCL by its own set-up, collective here);
 * auto falls back to a form that can run, a forced form fails. 0 with
 * *why when none can. */
static int gemv_form_for(cmx_comm *c, int batch, int m, const void *buf, const char **why)
{
	int form = gemv_form(c, batch, m);
	if (form == GEMV_NCCL && !cmx_nccl_ready(c, buf)) {
		if (cmx_cfg.ops_algo)
			return *why = "COLLMUX_OPS_ALGO=nccl, and NCCL cannot serve this communicator", 0;
		form = GEMV_SUM;
	}
	if (form != GEMV_FUSED && !c->ops->cublas) {
		if (cmx_cfg.ops_algo)
			return *why = "COLLMUX_OPS_ALGO names a form with cuBLAS, which some rank lacks", 0;
		form = GEMV_FUSED;
	}
	return form;
}

int cmx_ops_gemv_allreduce(cmx_comm *comm, const char *no_comm, void *stream, int dtype, int m, int k, int batch, const void *a,
			   long long lda, const void *x, long long ldx, void *y, long long ldy)
{
	static const char fn[] = "collmux_gemv_allreduce";
	static void *gemv_k[3][5], *tc_k[3][2], *sum_k[3];
	if (dtype < 0 || dtype > 2)
		return fail(fn, NULL, bad_dtype);
	/* what every rank passes alike is refused at once, as every rank does */
	if (m < 0 || batch < 1 || batch > 16 || (uint64_t)m > (uint64_t)CMX_OPS_TILES * 8 * CMX_OPS_RW)
		return fail(fn, NULL, "needs 0 <= m <= 131072 and 1 <= batch <= 16");
	cmx_comm *c = comm_of(fn, comm, no_comm);
	if (!c)
		return -1;
	/* what may differ between ranks is refused after ready(), whose
	 * collective steps every rank then takes */
	const char *bad = NULL;
	if (k < 0 || k > INT_MAX - 4096 || lda < k || ldx < k || ldy < m || lda > INT_MAX || ldx > INT_MAX || ldy > INT_MAX)
		bad = "needs 0 <= k <= 2^31 - 4097, k <= lda < 2^31, k <= ldx < 2^31 and m <= ldy < 2^31";
	if (m == 0) /* every rank passes the same m */
		return bad ? fail(fn, c, bad) : 0;
	/* room for the partials of every form (the nccl form uses none), the
	 * tensor-core GEMV's in up to segs_most segments of k (plan.c) */
	const uint64_t segs_most = cmx_gemv_segs_most(dtype == COLLMUX_FLOAT32, batch, m);
	const uint64_t data = (uint64_t)c->size * (uint64_t)m * (uint64_t)batch * 4 * segs_most;
	if (admit(fn, c, stream, y, OPS_FLAGS + 2 * (data + 256), bad, !bad && (k == 0 || (cmx_on_device(a) && cmx_on_device(x))) && cmx_on_device(y),
		  gemv_form(c, batch, m) == GEMV_NCCL))
		return -1;
	struct cmx_ops *o = c->ops;
	const char *why = NULL;
	const int form = gemv_form_for(c, batch, m, y, &why), fused = form == GEMV_FUSED;
	if (!form)
		return fail(fn, c, why);
	const size_t es = (size_t)esize[dtype];
	/* the form: from what every rank passes alike and COLLMUX_OPS_ALGO,
	 * which the first call agreed */
	const int64_t sh[] = {dtype, m, batch, form};
	void *f = NULL;
	ops_call_t O;
	void *args[2] = {&O, NULL};
	unsigned grid = 0;
	gemv_t G;
	struct {
		void *y;
		long long ldy;
		int m, batch, rows;
		_Bool pull;
		int segs;
		uint32_t flags, units;
	} S = {y, ldy, m, batch, CMX_OPS_THREADS, !fused, 1, 1, 0}; /* SumTo in ops.cu */
	void *fsum = typed_kernel("cmx_ops_sum", dtype, 0, &sum_k[dtype]);
	if (fused) {
		/* the kernel and its segments of k (plan.c: 16-bit types on
		 * tensor cores where every rank has them); for the loop, the
		 * batch rounded up to a kernel's and the rows a warp computes:
		 * as many as leave two tiles for each multiprocessor */
		int nbi = 0, rw = CMX_OPS_RW;
		const int tc = cmx_gemv_plan(o->tc, dtype == COLLMUX_FLOAT32, batch, m, o->sms, segs_most, &S.segs);
		while ((1 << nbi) < batch)
			nbi++;
		while (rw > 1 && (m + 8 * rw - 1) / (8 * rw) < 2 * o->sms)
			rw /= 2;
		f = tc ? typed_kernel("cmx_gemv_tc", dtype, batch > 8 ? 16 : 8, &tc_k[dtype][batch > 8])
		       : typed_kernel("cmx_gemv_ar", dtype, 1 << nbi, &gemv_k[dtype][nbi]);
		G = (gemv_t){a, x, y, lda, ldx, ldy, m, k, batch, rw, (uintptr_t)a % 16 == 0 && (size_t)lda * es % 16 == 0,
			     (uintptr_t)x % 16 == 0 && (size_t)ldx * es % 16 == 0, S.segs};
		const int rows = tc ? CMX_OPS_TC_ROWS : 8 * rw, group = (CMX_OPS_THREADS + rows * batch - 1) / (rows * batch);
		grid = (unsigned)((m + rows - 1) / rows) * (unsigned)S.segs; /* a block a unit: the scheduler balances them */
		args[1] = &G;
		/* a tile of the sum: as many of the GEMV's as give each of its
		 * threads an element, and their segments' flags */
		S.rows = rows * group, S.flags = (uint32_t)(group * S.segs), S.units = grid;
	}
	/* the sum's blocks, all resident at once (pull: they wait for each other's flags) */
	const unsigned tiles = (unsigned)((m + S.rows - 1) / S.rows);
	if (!fused)
		S.units = tiles;
	if (!fsum || (fused && !f))
		return refuse(fn, c, no_kernel);
	if (!cmx_cuda_ctx_for(y) || !begin(o, stream, &O, c, digest(OP_GEMV_AR, sh, 4)))
		return unordered(fn, c);
	if (form == GEMV_NCCL) {
		static const int kinds[] = {CMX_KIND_FLOAT32, CMX_KIND_FLOAT16, CMX_KIND_BFLOAT16};
		int ok = k ? cmx_cublas_gemv(stream, dtype, m, k, batch, a, lda, x, ldx, y, dtype, ldy) : 1;
		for (int b = 0; b < batch && ok && !k; b++)
			ok = cmx_cuda_memset_async((char *)y + (size_t)b * ldy * es, 0, (size_t)m * es, stream);
		/* one row of batch x m when the rows touch, else a row each */
		const int one = ldy == m;
		if (!ok || !cmx_nccl_sum_on(c, y, (size_t)m * (one ? batch : 1), kinds[dtype], one ? 1 : batch, (size_t)ldy * es, stream) ||
		    !end(o, stream)) {
			c->ops_state = -1;
			return fail(fn, c, "cuBLAS or NCCL could not queue its part (the NCCL path is off for this communicator?)");
		}
		return 0;
	}
	/* From here the peers run the call: a failure leaves them waiting for
	 * this rank's tiles until they time out, and turns the operations off
	 * here. */
	const int ok = (fused ? cmx_cuda_launch(f, grid, CMX_OPS_THREADS, stream, args)
			      : k ? cmx_cublas_gemv(stream, dtype, m, k, batch, a, lda, x, ldx, o->peer[c->rank] + O.data, COLLMUX_FLOAT32, m)
				  : cmx_cuda_memset_async(o->peer[c->rank] + O.data, 0, (size_t)m * batch * 4, stream)) &&
		       consume(o, &O, fsum, tiles, &S, 0, S.units, !fused, fused, stream) && end(o, stream);
	return ok ? 0 : broken(fn, c, stream, fused ? "the kernel" : "cuBLAS or the kernel");
}

int cmx_ops_embedding_alltoall(cmx_comm *comm, const char *no_comm, void *stream, int dtype, int mode, int dim, long long batch,
			       int tables, int table_first, int tables_total, const void *weights, const long long *rows,
			       const long long *offsets, const long long *indices, void *out)
{
	static const char fn[] = "collmux_embedding_alltoall";
	static void *pool_k[3];
	if (dtype < 0 || dtype > 2)
		return fail(fn, NULL, bad_dtype);
	/* what every rank passes alike is refused at once, as every rank does */
	if ((mode != COLLMUX_POOL_SUM && mode != COLLMUX_POOL_MEAN) || dim < 1 || batch < 0 || tables_total < 1)
		return fail(fn, NULL, "needs a pooling mode, dim >= 1, batch >= 0 and tables_total >= 1");
	cmx_comm *c = comm_of(fn, comm, no_comm);
	if (!c)
		return -1;
	/* what may differ between ranks is refused after ready(), whose
	 * collective steps every rank then takes */
	const char *bad = NULL;
	if (tables < 0 || tables > CMX_OPS_EMB_TABLES || table_first < 0 || table_first + tables > tables_total || (tables && !rows))
		bad = "needs 0 <= tables <= 128, 0 <= table_first and table_first + tables <= tables_total";
	for (int t = 0; !bad && t < tables; t++)
		if (rows[t] < 0 || rows[t + 1] < rows[t])
			bad = "rows must be tables + 1 row offsets into the weights, non-decreasing from 0 or more";
	const int n = c->size, me = c->rank;
	const long long mine = batch * (me + 1) / n - batch * me / n, most = (batch + n - 1) / n;
	const size_t es = (size_t)esize[dtype];
	const uint64_t data = (uint64_t)most * (uint64_t)tables_total * (uint64_t)dim * es;
	const int args = !bad && (!tables || (cmx_on_device(weights) && cmx_on_device(offsets) && cmx_on_device(indices))) && (!mine || cmx_on_device(out));
	if (admit(fn, c, stream, out ? out : weights, OPS_FLAGS + 2 * (data + 256), bad, args, 0))
		return -1;
	struct cmx_ops *o = c->ops;
	void *fpool = typed_kernel("cmx_emb_pool", dtype, 0, &pool_k[dtype]);
	if (!fpool || !land_kernel())
		return refuse(fn, c, no_kernel);
	struct {
		const void *w;
		const long long *offsets, *indices;
		void *out;
		long long batch;
		int dim, tables, table_first, tables_total, mean;
		_Bool vec;
		long long rows[CMX_OPS_EMB_TABLES + 1];
	} E = {weights, offsets, indices, out, batch, dim, tables, table_first, tables_total, mode == COLLMUX_POOL_MEAN,
	       dim % 4 == 0 && (uintptr_t)weights % (4 * es) == 0 && (uintptr_t)out % (4 * es) == 0, {0}}; /* Emb in ops.cu */
	if (tables)
		memcpy(E.rows, rows, (size_t)(tables + 1) * sizeof *rows);
	const uint64_t row = (uint64_t)tables_total * (uint64_t)dim * es; /* one sample of the output */
	land_t L = {out, (uint64_t)mine * row, row, (uint64_t)table_first * dim * es, (uint64_t)(table_first + tables) * dim * es, 0};
	const int64_t sh[] = {dtype, mode, dim, batch, tables_total};
	ops_call_t O;
	if (!cmx_cuda_ctx_for(out ? out : weights) || !begin(o, stream, &O, c, digest(OP_EMB_A2A, sh, 5)))
		return unordered(fn, c);
	const uint64_t bags = (uint64_t)tables * (uint64_t)batch, warps = CMX_OPS_THREADS / 32;
	void *pargs[] = {&O, &E};
	const int ok = (!bags || (bags + warps - 1) / warps < 0x7fffffffu) &&
		       (!bags || cmx_cuda_launch(fpool, (unsigned)((bags + warps - 1) / warps), CMX_OPS_THREADS, stream, pargs)) &&
		       land(o, &O, &L, stream) && end(o, stream);
	if (!ok) {
		return broken(fn, c, stream, "the kernels");
	}
	return 0;
}

/* The symmetric memory of c's operations that holds [p, p + bytes) on
 * this rank, and p's offset in it; NULL if none does. */
static const struct symm *symm_of(const struct cmx_ops *o, int me, const void *p, uint64_t bytes, uint64_t *off)
{
	for (const struct symm *r = o->symm; r && p; r = r->next)
		if ((const char *)p >= r->peer[me] && (uint64_t)((const char *)p - r->peer[me]) <= r->bytes &&
		    bytes <= r->bytes - (uint64_t)((const char *)p - r->peer[me]))
			return *off = (uint64_t)((const char *)p - r->peer[me]), r;
	return NULL;
}

/* GEMM + all-to-all (collmux.h). Each block (e, p), the rows of expert e
 * that came from rank p, is one cuBLAS GEMM whose output goes straight
 * into rank p's memory at the row the caller names (its stores cross
 * NVLink as each tile finishes, under the GEMMs still running): into its
 * data half, which the landing kernel then copies into out once every
 * rank's flag says its GEMMs are done; or, where out lies in symmetric
 * memory, into out itself, between two barriers of the ranks' streams
 * (every peer has reached the call before any rank writes into its out,
 * and every rank's GEMMs are done when the call is). */
int cmx_ops_gemm_alltoall(cmx_comm *comm, const char *no_comm, void *stream, int dtype, int k, int n, int experts, const void *a,
			  long long lda, const void *b, const long long *rows, const long long *dest, void *out, long long out_rows,
			  long long capacity)
{
	static const char fn[] = "collmux_gemm_alltoall";
	/* what every rank passes alike is refused at once, as every rank does */
	if (dtype < 0 || dtype > 2)
		return fail(fn, NULL, bad_dtype);
	if (k < 0 || n < 1 || capacity < 0 || (uint64_t)capacity > (UINT64_MAX / 4) / ((uint64_t)n * (uint64_t)esize[dtype]))
		return fail(fn, NULL, "needs k >= 0, n >= 1 and 0 <= capacity, capacity x n not too large");
	cmx_comm *c = comm_of(fn, comm, no_comm);
	if (!c)
		return -1;
	const int size = c->size;
	const size_t es = (size_t)esize[dtype];
	/* what may differ between ranks is judged here but refused after
	 * ready(), whose collective steps (set-up, growth) every rank then
	 * takes, and where one rank's refusal is every rank's */
	const char *bad = NULL;
	long long total = 0;
	if (experts < 0 || experts > 1 << 20 || lda < k || lda > INT_MAX || out_rows < 0 || out_rows > capacity || (experts && (!rows || !dest)))
		bad = "needs 0 <= experts <= 2^20, k <= lda < 2^31, 0 <= out_rows <= capacity, and rows and dest when experts > 0";
	for (long long i = 0; !bad && i < (long long)experts * size; i++) {
		if (rows[i] < 0 || dest[i] < 0 || dest[i] > capacity - rows[i] || rows[i] > INT_MAX)
			bad = "each block's rows must be 0 to 2^31 - 1, and land between row 0 and capacity of its rank's out";
		total += rows[i];
	}
	if (capacity == 0) /* every rank passes the same capacity: nothing moves anywhere */
		return bad || cmx_cuda_capturing(stream) ? fail(fn, c, bad ? bad : captured) : 0;
	const uint64_t row = (uint64_t)n * es, data = (uint64_t)capacity * row;
	const int args = !bad && (!total || (cmx_on_device(a) && (k == 0 || cmx_on_device(b)))) && (!out_rows || cmx_on_device(out));
	if (admit(fn, c, stream, out_rows ? out : a, OPS_FLAGS + 2 * (data + 256), bad, args, 0))
		return -1;
	struct cmx_ops *o = c->ops;
	if (!land_kernel())
		return refuse(fn, c, no_kernel);
	if (k && !o->cublas) /* agreed at set-up, and k is every rank's: every rank refuses alike */
		return refuse(fn, c, "cuBLAS, which computes its blocks, is not available on every rank");
	/* out in symmetric memory, room for capacity rows: every rank must pass
	 * one at the same offset (the digest tells a rank that did not) */
	uint64_t off = 0;
	const struct symm *sy = symm_of(o, c->rank, out, data, &off);
	const int64_t sh[] = {dtype, k, n, capacity, sy ? (int64_t)off + 1 : 0, sy ? (int64_t)sy->serial : -1};
	ops_call_t O;
	if (!cmx_cuda_ctx_for(out_rows ? out : a) || !begin(o, stream, &O, c, digest(OP_GEMM_A2A, sh, 6)))
		return unordered(fn, c);
	/* From here the peers run the call: a failure leaves them waiting for
	 * this rank's flags until they time out, and turns the operations off
	 * here. */
	land_t ready_l = {NULL, 0, row, 0, 0, 1}, L = {out, sy ? 0 : (uint64_t)out_rows * row, row, 0, 0, 0};
	int ok = !sy || land(o, &O, &ready_l, stream);
	const char *blk = a;
	for (int e = 0; e < experts && ok; e++)
		for (int p = 0; p < size && ok; p++) {
			const long long r = rows[e * size + p];
			char *to = (sy ? sy->peer[p] + off : o->peer[p] + O.data) + (uint64_t)dest[e * size + p] * row;
			if (r && k)
				ok = cmx_cublas_gemm(stream, dtype, (int)r, n, k, blk, lda, (const char *)b + (size_t)e * k * n * es, n, to, dtype, n);
			else if (r) /* an empty sum */
				ok = cmx_cuda_memset_async(to, 0, (size_t)r * row, stream);
			blk += (size_t)r * (size_t)lda * es;
		}
	if (!ok || !land(o, &O, &L, stream) || !end(o, stream)) {
		return broken(fn, c, stream, "cuBLAS or the kernel");
	}
	return 0;
}

/* GEMM + reduce-scatter (collmux.h). For each rank q, from the next one
 * on (so that the ranks' first GEMMs write into different peers), one
 * cuBLAS GEMM of the rows of q's block writes this rank's fp32 partial of
 * it straight into q's data half, at [this rank] (its stores cross NVLink
 * as the GEMM runs, under the GEMMs still to come); then ops_rsum, on
 * every rank, waits for every rank's GEMMs and sums the partials of its
 * own block in rank order, rounding once. */
int cmx_ops_gemm_reducescatter(cmx_comm *comm, const char *no_comm, void *stream, int dtype, long long m, int n, int k, const void *a,
			       long long lda, const void *b, long long ldb, void *out, long long ldo)
{
	static const char fn[] = "collmux_gemm_reducescatter";
	static void *rsum_k[3];
	/* what every rank passes alike is refused at once, as every rank does */
	if (dtype < 0 || dtype > 2)
		return fail(fn, NULL, bad_dtype);
	if (m < 0 || m > INT_MAX || n < 1 || (uint64_t)m * (uint64_t)n > (uint64_t)1 << 40)
		return fail(fn, NULL, "needs 0 <= m < 2^31, n >= 1 and m x n <= 2^40");
	cmx_comm *c = comm_of(fn, comm, no_comm);
	if (!c)
		return -1;
	const int size = c->size, me = c->rank;
	const size_t es = (size_t)esize[dtype];
	const long long mine = m * (me + 1) / size - m * me / size, most = (m + size - 1) / size;
	/* what may differ between ranks is refused after ready() (see above) */
	const char *bad = NULL;
	if (k < 0 || lda < k || lda > INT_MAX || ldb < n || ldb > INT_MAX || ldo < n)
		bad = "needs k >= 0, k <= lda < 2^31, n <= ldb < 2^31 and ldo >= n";
	if (m == 0) /* every rank passes the same m */
		return bad || cmx_cuda_capturing(stream) ? fail(fn, c, bad ? bad : captured) : 0;
	const uint64_t data = (uint64_t)size * (uint64_t)most * (uint64_t)n * 4;
	const int args = !bad && (k == 0 || (cmx_on_device(a) && cmx_on_device(b))) && (!mine || cmx_on_device(out));
	if (admit(fn, c, stream, mine ? out : k ? a : NULL, OPS_FLAGS + 2 * (data + 256), bad, args, 0)) /* NULL: the current context */
		return -1;
	struct cmx_ops *o = c->ops;
	void *f = typed_kernel("cmx_ops_rsum", dtype, 0, &rsum_k[dtype]);
	if (!f)
		return refuse(fn, c, no_kernel);
	if (!o->cublas) /* agreed at set-up: every rank refuses alike, whatever its k */
		return refuse(fn, c, "cuBLAS, which computes the partials, is not available on every rank");
	const int64_t sh[] = {dtype, m, n}; /* k may differ between ranks */
	ops_call_t O;
	if (!cmx_cuda_ctx_for(o->peer[me]) || !begin(o, stream, &O, c, digest(OP_GEMM_RS, sh, 3)))
		return unordered(fn, c);
	/* From here the peers run the call (see cmx_ops_gemm_alltoall) */
	int ok = 1;
	for (int j = 1; j <= size && ok; j++) {
		const int q = (me + j) % size;
		const long long r0 = m * q / size, rows = m * (q + 1) / size - r0;
		char *to = o->peer[q] + O.data + (uint64_t)me * (uint64_t)rows * (uint64_t)n * 4;
		if (rows && k)
			ok = cmx_cublas_gemm(stream, dtype, (int)rows, n, k, (const char *)a + (size_t)r0 * (size_t)lda * es, lda, b, ldb, to,
					     COLLMUX_FLOAT32, n);
		else if (rows) /* an empty sum */
			ok = cmx_cuda_memset_async(to, 0, (size_t)rows * (size_t)n * 4, stream);
	}
	struct {
		void *out;
		long long ldo;
		uint64_t elems, slot;
		uint32_t cols, tile;
	} R = {out, ldo, (uint64_t)mine * (uint64_t)n, (uint64_t)mine * (uint64_t)n, (uint32_t)n, 0}; /* RSum in ops.cu */
	const uint64_t blocks = (R.elems + CMX_OPS_THREADS - 1) / CMX_OPS_THREADS;
	if (!ok || !consume(o, &O, f, blocks, &R, R.tile, 1, 1, 0, stream) || !end(o, stream)) {
		return broken(fn, c, stream, "cuBLAS or the kernel");
	}
	return 0;
}

/* Signal in ops.cu: raise this rank's flag at rank `to` (the block pushed
 * before it has landed there), then wait for rank `from`'s here; -1:
 * neither */
typedef struct {
	int to, from;
	uint32_t tile;
} signal_t;

/* Step j of the gather at rank me: rank q = me - j's block of a here,
 * this rank's own a (j = 0) or where q pushed it into the data half, with
 * its row pitch in elements (*ld); S then waits for q's block. */
static const void *ag_block(signal_t *S, int j, int me, int size, const void *a, long long lda, const char *half, size_t block, int k,
			    long long *ld)
{
	const int q = (me - j + size) % size;
	S->to = -1, S->from = q;
	*ld = j ? k : lda;
	return j ? half + (size_t)q * block : a;
}

/* All-gather + GEMM (collmux.h). The copy engines push this rank's block
 * of a into every peer's data half, at [this rank], one peer after another
 * (from the next rank on, so that the ranks' first pushes go to different
 * peers) on collmux's stream, each followed by cmx_ops_signal, which
 * raises this rank's flag at that peer. On the program's stream cuBLAS
 * computes this rank's own rows of out from a at once, under the pushes,
 * then each peer's rows from the data half, in the order the peers push
 * here, each after cmx_ops_signal has found that peer's flag. Where ag is
 * given, collmux's stream copies the blocks into it likewise, and the
 * program's stream waits for collmux's at the end. Ordering: the pushes
 * of a call start once the program's stream has reached it, after this
 * rank's kernels of the call before, whose GEMMs read the half its pushes
 * write two calls on (ops.cu's two-halves argument holds: a rank's call
 * s + 1 waits for every peer's flag of s + 1). */
int cmx_ops_allgather_gemm(cmx_comm *comm, const char *no_comm, void *stream, int dtype, long long m, int n, int k, const void *a,
			   long long lda, const void *b, long long ldb, void *out, long long ldo, void *ag, long long ldag)
{
	static const char fn[] = "collmux_allgather_gemm";
	static void *signal_k;
	/* what every rank passes alike is refused at once, as every rank does */
	if (dtype < 0 || dtype > 2)
		return fail(fn, NULL, bad_dtype);
	if (m < 0 || m > INT_MAX || k < 0 || (uint64_t)m * (uint64_t)k > (uint64_t)1 << 40)
		return fail(fn, NULL, "needs 0 <= m < 2^31, k >= 0 and m x k <= 2^40");
	cmx_comm *c = comm_of(fn, comm, no_comm);
	if (!c)
		return -1;
	const int size = c->size, me = c->rank;
	const size_t es = (size_t)esize[dtype], block = (size_t)m * (size_t)k * es;
	/* what may differ between ranks is refused after ready() (see above) */
	const char *bad = NULL;
	if (n < 1 || lda < k || (uint64_t)lda * es > INT_MAX || ldb < n || ldb > INT_MAX || ldo < n || (uint64_t)ldo * es > INT_MAX ||
	    (ag && ((uint64_t)ldag < (uint64_t)k || (uint64_t)ldag * es > INT_MAX)))
		bad = "needs n >= 1, k <= lda < 2^31 bytes, n <= ldb < 2^31, n <= ldo < 2^31 bytes, and k <= ldag < 2^31 bytes where ag is given";
	if (m == 0) /* every rank passes the same m */
		return bad || cmx_cuda_capturing(stream) ? fail(fn, c, bad ? bad : captured) : 0;
	const int args = !bad && (k == 0 || (cmx_on_device(a) && cmx_on_device(b))) && cmx_on_device(out) && (!ag || !k || cmx_on_device(ag));
	if (admit(fn, c, stream, out, OPS_FLAGS + 2 * ((size > 1 ? (uint64_t)size * block : 0) + 256), bad, args, 0)) /* one rank pushes nothing */
		return -1;
	struct cmx_ops *o = c->ops;
	if (!cmx_fused_kernel("cmx_ops_signal", &signal_k))
		return refuse(fn, c, no_kernel);
	if (!o->cublas) /* agreed at set-up: every rank refuses alike */
		return refuse(fn, c, "cuBLAS, which computes the products, is not available on every rank");
	if (!cmx_cuda_ctx_for(out))
		return unordered(fn, c);
	if (!o->push && !(o->push = cmx_cuda_stream_high())) /* in the context of the communicator's device */
		return refuse(fn, c, "collmux could not make its stream for the copies");
	const int64_t sh[] = {dtype, m, k}; /* n may differ between ranks */
	ops_call_t O;
	if (!begin(o, stream, &O, c, digest(OP_AG_GEMM, sh, 3)))
		return unordered(fn, c);
	/* From here the peers run the call (see cmx_ops_gemm_alltoall) */
	char *const half = o->peer[me] + O.data;
	signal_t S = {-1, -1, 1};
	void *sargs[] = {&O, &S};
	int ok = cmx_cuda_record(&o->started, stream) && cmx_cuda_wait(o->push, o->started);
	for (int j = 1; j < size && ok; j++) {
		S.to = (me + j) % size, S.from = -1;
		ok = cmx_cuda_copy2d(o->peer[S.to] + O.data + (size_t)me * block, (size_t)k * es, a, (size_t)lda * es, (size_t)k * es,
				     (size_t)m, o->push) &&
		     cmx_cuda_launch(signal_k, 1, 32, o->push, sargs);
	}
	/* the gathered a: this rank's block, then each peer's once it is here */
	for (int j = 0; j < size && ok && ag && k; j++) {
		long long ld;
		const void *src = ag_block(&S, j, me, size, a, lda, half, block, k, &ld);
		ok = (j == 0 || cmx_cuda_launch(signal_k, 1, 32, o->push, sargs)) &&
		     cmx_cuda_copy2d((char *)ag + (size_t)S.from * m * (size_t)ldag * es, (size_t)ldag * es, src, (size_t)ld * es, (size_t)k * es,
				     (size_t)m, o->push);
	}
	ok = ok && cmx_cuda_record(&o->pushed, o->push);
	for (int j = 0; j < size && ok; j++) {
		long long ld;
		const void *src = ag_block(&S, j, me, size, a, lda, half, block, k, &ld);
		char *to = (char *)out + (size_t)S.from * m * (size_t)ldo * es;
		if (j && !cmx_cuda_launch(signal_k, 1, 32, stream, sargs))
			ok = 0;
		else if (k)
			ok = cmx_cublas_gemm(stream, dtype, (int)m, n, k, src, ld, b, ldb, to, dtype, ldo);
		else /* an empty sum */
			ok = cmx_cuda_memset2d_async(to, (size_t)ldo * es, 0, (size_t)n * es, (size_t)m, stream);
	}
	if (!ok || !cmx_cuda_wait(stream, o->pushed) || !end(o, stream)) {
		/* the copies queued so far (they read a, write ag) are part of what
		 * the call leaves queued, which the communicator's last operation
		 * covers */
		if (cmx_cuda_record(&o->pushed, o->push))
			cmx_cuda_wait(stream, o->pushed);
		return broken(fn, c, stream, "a copy, cuBLAS or the kernel");
	}
	return 0;
}

void *cmx_ops_symm_alloc(cmx_comm *c, const char *no_comm, size_t bytes)
{
	static const char fn[] = "collmux_symm_alloc";
	if (!c || c->inter)
		return fail(fn, c, c ? "intercommunicators are not supported" : no_comm), NULL;
	/* what only this rank knows (its size, which should be every rank's;
	 * CUDA and a current context, the memory's device; its operations'
	 * state, which a failed kernel sets on the ranks that saw it) goes into
	 * the first agreement, so that no rank takes a collective step alone */
	const int here = bytes >= 4 && bytes <= ((size_t)1 << 46) && (cmx_cuda_up || cmx_cuda_probe()) && cmx_cuda_ctx_for(NULL) &&
			 c->ops_state >= 0 && !(c->ops && *c->ops->err);
	uint64_t *all = calloc((size_t)c->size, sizeof *all), mine = bytes;
	int same = all && cmx_px.Allgather(&mine, 8, cmx_abi.byte, all, 8, cmx_abi.byte, c->handle) == 0;
	for (int p = 0; same && p < c->size; p++)
		same = all[p] == mine;
	free(all);
	if (!cmx_comm_agree(c, same && here))
		return fail(fn, c, "the ranks passed different sizes (or one not from 4 to 2^46), or some rank has no current CUDA context or has "
				   "the fused operations off for this communicator"), NULL;
	const char *why = ready(c, NULL, 0, 1);
	if (why)
		return fail(fn, c, why), NULL;
	struct cmx_ops *o = c->ops;
	struct symm *r = calloc(1, sizeof *r);
	char *peer[CMX_MAX_RANKS] = {NULL};
	/* the mapping's probe, which the peers read, is zeroed once all have;
	 * memory a peer may have mapped is not freed when that fails */
	if (!cmx_fused_map(c, r != NULL, bytes, 0, peer) || !cmx_comm_agree(c, cmx_cuda_memset(peer[c->rank], 0, bytes))) {
		free(r);
		return fail(fn, c, "the memory could not be allocated and mapped by every rank"), NULL;
	}
	memcpy(r->peer, peer, sizeof peer);
	r->bytes = bytes;
	r->serial = o->symm_made++;
	r->next = o->symm;
	o->symm = r;
	return r->peer[c->rank];
}

int cmx_ops_symm_free(cmx_comm *c, const char *no_comm, void *p)
{
	static const char fn[] = "collmux_symm_free";
	if (!c)
		return fail(fn, NULL, no_comm);
	/* not refused after a failed operation (teardown follows one): every
	 * rank's kernels have given up or finished by then */
	struct symm **at = c->ops ? &c->ops->symm : NULL;
	while (at && *at && (*at)->peer[c->rank] != p)
		at = &(*at)->next;
	if (!cmx_comm_agree(c, at && *at))
		return fail(fn, c, "some rank passed memory that collmux_symm_alloc did not give on this communicator (or its operations were "
				   "released after a failure: the memory stays allocated)");
	/* every rank's last operation is done (none writes here any more), then
	 * the peers' mappings close, then each rank frees its own */
	struct symm *r = *at;
	*at = r->next;
	settled(c->ops);
	cmx_comm_agree(c, 1);
	for (int q = 0; q < c->size; q++)
		if (q != c->rank)
			cmx_cuda_ipc_close(r->peer[q]);
	cmx_comm_agree(c, 1);
	cmx_cuda_free(r->peer[c->rank]);
	free(r);
	return 0;
}
