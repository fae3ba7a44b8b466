/*
 * fused.c: the fused backend. Device collectives of ranks that share a
 * node and see each other's GPUs run as one kernel each (fused/kernels.cu):
 * copy into a CUDA-IPC workspace, signal, read the peers over NVLink.
 * Set-up is collective and agreed by all ranks; anything missing (NVRTC,
 * peer access, distinct GPUs, one node) turns the path off for that
 * communicator, with the reason in COLLMUX_LOG=info.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "_cgo_export.h"
#include "cmx.h"

#define MAX_RANKS 8   /* CMX_MAX_RANKS in kernels.cu */
#define MAX_BLOCKS 64 /* CMX_MAX_BLOCKS in kernels.cu */
#define SLOT (8u << 20)
#define FLAGS_BYTES (MAX_BLOCKS * MAX_RANKS * 4)
#define PROBE_OFF (2 * (size_t)SLOT + FLAGS_BYTES)
#define WORKSPACE (PROBE_OFF + 64)

/* Kernel parameter blocks, laid out as Peers and Call in kernels.cu. */
typedef struct {
	char *buf[MAX_RANKS];
	uint32_t *flags[MAX_RANKS];
} peers_t;
typedef struct {
	int n, me, root;
	uint32_t epoch;
	uint64_t timeout_ns;
	uint32_t *err;
} call_t;

struct cmx_fused {
	char *peer[MAX_RANKS]; /* every rank's workspace, mapped here (peer[me] is ours) */
	uint32_t epoch;
	void *stream;
	volatile uint32_t *err_h; /* written by the kernel's watchdog */
	void *err_d;
};

/* ---- the module: compiled once per process ---- */
enum { T_F32, T_F64, T_I32, T_U32, T_I64, T_U64, T_F16, T_BF16, NT };
static const char *tnames[NT] = {"f32", "f64", "i32", "u32", "i64", "u64", "f16", "bf16"};
static const char *onames[3] = {"sum", "min", "max"};
static void *module, *fn_move, *fn_ar[NT][3];
static int loaded;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* Workspaces stay mapped by the peers until the process ends (freeing one
 * safely would need the peers' agreement at MPI_Comm_free), so at most
 * MAX_COMMS communicators of a process get one; the others use NCCL. */
#define MAX_COMMS 16
static int comms_with_workspace;

static void load(void)
{
	int arch;
	char bus[32];
	char *image = NULL;
	size_t len = 0;
	if (!cmx_cuda_fused_capable() || !cmx_cuda_device(&arch, bus, sizeof bus))
		return;
	if (!collmux_go_fused_module(arch, cmx_cuda_driver_version(), &image, &len))
		return;
	fn_move = cmx_cuda_function(image, "cmx_move", &module);
	loaded = fn_move != NULL;
	char name[64];
	for (int t = 0; t < NT; t++)
		for (int o = 0; o < 3; o++) {
			snprintf(name, sizeof name, "cmx_allreduce_%s_%s", tnames[t], onames[o]);
			loaded = loaded && (fn_ar[t][o] = cmx_cuda_function(image, name, &module));
		}
	/* image stays allocated: with lazy module loading (the default since
	 * CUDA 12.2) the driver reads it again when a kernel first launches */
	cmx_log(1, "fused kernels %s (sm_%d)", loaded ? "loaded" : "failed to load", arch);
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
		int ok, arch;
	} me, *all = calloc((size_t)c->size, sizeof me);
	memset(&me, 0, sizeof me);
	me.ok = all && c->size <= MAX_RANKS && comms_with_workspace < MAX_COMMS && cmx_cuda_ctx_for(buf) && (pthread_once(&load_once, load), loaded) &&
		cmx_cuda_device(&me.arch, me.bus, sizeof me.bus);
	cmx_node_name(c->rank, c->size, me.host, sizeof me.host);
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
	struct cmx_fused *f = calloc(1, sizeof *f);
	cmx_ipc_handle h, *hs = calloc((size_t)c->size, sizeof h);
	int ok = f && hs && (f->peer[c->rank] = cmx_cuda_malloc(WORKSPACE)) && cmx_cuda_memset(f->peer[c->rank], 0, WORKSPACE) &&
		 cmx_cuda_ipc_handle(f->peer[c->rank], &h) && (f->stream = cmx_cuda_stream_new()) &&
		 (f->err_h = cmx_cuda_mapped(sizeof(uint32_t), &f->err_d));
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
			c->fused = f;
			c->fused_state = 1;
			comms_with_workspace++;
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

void cmx_fused_release(cmx_comm *c)
{
	if (!c || !c->fused)
		return;
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
	void *fn, *args[6];
	const char *in = ip ? a->rbuf : a->sbuf;
	char *out = a->rbuf;
	uint64_t bytes = 0, count = 0;
	int mode = 0, kind, size, root = 0, t = -1, o = -1;
	/* what the kernels can express; every input here is agreed across ranks */
	switch (a->coll) {
	case CMX_COLL_ALLREDUCE: {
		if (!cmx_dtype_info(a->rtype, &kind, &size) || (t = type_of(kind)) < 0 || (o = op_of(cmx_op_info(a->op))) < 0)
			return 0;
		count = (uint64_t)a->rcount, bytes = count * (uint64_t)size;
		if (bytes > SLOT)
			return 0;
		break;
	}
	case CMX_COLL_ALLGATHER:
	case CMX_COLL_ALLTOALL:
	case CMX_COLL_BCAST:
		if (!(size = cmx_move_size(a->rtype)) || (!ip && a->coll != CMX_COLL_BCAST && !cmx_move_size(a->stype)))
			return 0;
		bytes = (uint64_t)a->rcount * (uint64_t)size; /* per rank */
		if ((a->coll == CMX_COLL_ALLTOALL ? bytes * n : bytes) > SLOT)
			return 0;
		mode = a->coll == CMX_COLL_ALLGATHER ? 0 : a->coll == CMX_COLL_BCAST ? 1 : 2;
		if (a->coll == CMX_COLL_ALLGATHER && ip)
			in = a->rbuf + (size_t)me * bytes;
		if (a->coll == CMX_COLL_BCAST)
			in = a->rbuf, root = a->root;
		break;
	default:
		return 0;
	}
	if (c->fused_state == 0)
		setup(c, out);
	if (c->fused_state != 1 || !cmx_cuda_ctx_for(out))
		return 0;
	fn = t >= 0 ? fn_ar[t][o] : fn_move; /* the module is loaded by the first set-up */
	struct cmx_fused *f = c->fused;
	f->epoch++;
	peers_t P;
	memset(&P, 0, sizeof P);
	for (int p = 0; p < n; p++) {
		P.buf[p] = f->peer[p] + (f->epoch & 1) * (size_t)SLOT;
		P.flags[p] = (uint32_t *)(f->peer[p] + 2 * (size_t)SLOT);
	}
	call_t C = {n, me, root, f->epoch, (uint64_t)cmx_cfg.timeout * 1000000000ull, f->err_d};
	unsigned grid = (unsigned)((bytes + 2047) / 2048); /* 2 KiB a block, up to 32 blocks */
	grid = grid < 1 ? 1 : grid > 32 ? 32 : grid;
	args[0] = &P, args[1] = &C, args[2] = &in, args[3] = &out;
	args[4] = a->coll == CMX_COLL_ALLREDUCE ? (void *)&count : (void *)&bytes;
	args[5] = &mode;
	if (!cmx_cuda_launch(fn, grid, 512, f->stream, args) || !cmx_cuda_sync(f->stream)) {
		fprintf(stderr, "collmux: %s on rank %d of %d: fused kernel failed to run (CUDA error %d)\n", cmx_fn_names[a->fn], me, n,
			cmx_cuda_last_error());
		*rc = cmx_error(a->comm, cmx_abi.err_other);
		return 1;
	}
	if (CMX_UNLIKELY(*f->err_h)) {
		fprintf(stderr, "collmux: %s on rank %d of %d: ranks", cmx_fn_names[a->fn], me, n);
		for (int p = 0; p < n; p++)
			if (*f->err_h & (1u << p))
				fprintf(stderr, " %d", p);
		fprintf(stderr, " did not arrive within COLLMUX_TIMEOUT=%d s; the fused path is off for this communicator\n", cmx_cfg.timeout);
		c->fused_state = -1;
		*rc = cmx_error(a->comm, cmx_abi.err_other);
		return 1;
	}
	*rc = 0;
	return 1;
}
