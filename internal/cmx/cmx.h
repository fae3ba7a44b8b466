/*
 * cmx.h: the declarations the C of every folder shares: the call
 * descriptor, the real MPI (mpi/), the configuration and state (core.c),
 * CUDA (cuda/), the arrival gate (gate/), requests (mpi/request.c), the
 * backends (fused/, nccl/, staged/) and the router (dispatch/). Everything
 * is hidden from the library's dynamic symbol table except what CMX_EXPORT
 * marks.
 *
 * Handles. One binary serves every MPI ABI, so handles cross the C boundary
 * as uintptr_t. On x86-64 (SysV) a 32-bit MPICH handle arrives in a 64-bit
 * register or stack slot whose upper half is unspecified: it is forwarded
 * untouched (the callee reads the low 32 bits) and truncated with
 * cmx_norm() before it is decoded or compared.
 */
#ifndef CMX_H
#define CMX_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "zcoll.h"
#include "zunserved.h"

#define CMX_EXPORT __attribute__((visibility("default")))
#define CMX_LIKELY(x) __builtin_expect(!!(x), 1)
#define CMX_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define CMX_NOINLINE __attribute__((noinline))


typedef uintptr_t cmx_h;
typedef int64_t cmx_count;
typedef intptr_t cmx_aint;
typedef int64_t cmx_offset; /* MPI_Offset */
_Static_assert(sizeof(cmx_aint) == sizeof(cmx_count), "MPI_Aint and MPI_Count have one width");

#define CMX_ERR_COUNT 2 /* MPI_ERR_COUNT in every ABI */

/* The ABIs (CMX_ABI_*), where a call's buffers live (CMX_MEM_*), datatype
 * classes (CMX_DCLASS_*), backends (CMX_BACKEND_*), fused algorithms
 * (CMX_ALGO_*) and log levels (CMX_LOG_*) are Go's enums, generated into
 * zcoll.h from their Go constants. */

typedef struct cmx_req cmx_req;   /* a request collmux owns (mpi/request.c) */
typedef struct cmx_comm cmx_comm; /* collmux's state of a communicator (below) */
typedef struct cmx_prepared cmx_prepared; /* a persistent call's start, prepared (below) */

/* One intercepted call, whatever its shape (filled by zwrappers.c). */
typedef struct cmx_args {
	int fn, coll, form, large; /* form: CMX_FORM_* */
	const void *sbuf;
	void *rbuf;
	cmx_count scount, rcount;
	const void *scounts, *sdispls, *rcounts, *rdispls; /* int* or MPI_Count* / MPI_Aint* when large */
	cmx_h stype, rtype, op, comm, info;
	const void *stypes, *rtypes; /* MPI_Datatype[] of the *w collectives: read with cmx_type_at */
	int root, dest, source, stag, rtag; /* point-to-point envelope */
	void *status;                        /* MPI_Status * */
	void *req;                           /* MPI_Request *: written through cmx_req_put */
	void *msg;                           /* MPI_Message * (Mrecv, Imrecv) */
	cmx_req *entry; /* nonblocking: the request entry a backend is building, which the layers below add to */
	cmx_prepared *prep; /* a start of a persistent call: where the backend that runs it may prepare the next starts */
	/* decoded by the router, once, before any backend runs the call;
	 * backends read these and never decode the handles themselves */
	int mem;              /* CMX_MEM_* of the buffers significant on this rank */
	int role;             /* CMX_ROLE_* of this rank in the call */
	int used[2];          /* the send (0) and receive (1) side is significant here (cmx_side_used) */
	int opk;              /* CMX_OP_* of op; CMX_OP_USER for a user op or none */
	int kind[2], size[2]; /* element kind (CMX_KIND_*) and size of stype and rtype when predefined; kind -1 otherwise */
	int move[2];          /* of a side used here: bytes per element where its datatype moves as bytes, else 0 */
	int dclass;           /* the datatype class the ranks agreed on, plus 1 (dispatch/router.c, kinds_agreed); 0: this rank's own */
} cmx_args;

/* ---- the real MPI ---- */

/* Predefined datatype or op, as generated from package mpi. For ops, kind
 * holds the CMX_OP_* value. */
typedef struct {
	const char *name, *ompi;
	uint32_t mpich, std;
	uint8_t kind, size;
} cmx_predef;
extern const cmx_predef cmx_predef_dtypes[], cmx_predef_ops[];
extern const unsigned char cmx_op_valid[CMX_NOP][CMX_NKIND];

typedef struct {
	int64_t in_place;
	uint32_t comm_world, comm_self, comm_null, dtype_null, op_null, info_null;
	int32_t root, proc_null, err_other, err_in_status, status_error;
	uint32_t request_null;
	int64_t status_ignore;
	int32_t status_size;
	int32_t cart, graph, dist_graph;
	int32_t thread_multiple;
} cmx_abi_consts;
extern const cmx_abi_consts cmx_consts_mpich, cmx_consts_mpi_abi, cmx_consts_openmpi;

/* The ABI in force, resolved once. abi uses package mpi's numbering. */
typedef struct {
	int abi; /* CMX_ABI_* */
	int int_handles;
	const void *in_place;
	cmx_h comm_world, comm_self, comm_null, dtype_null, op_null, info_null;
	cmx_h uint64, op_sum, op_min, op_max, byte, int_; /* for collmux's own calls */
	cmx_h float_, double_;     /* the parts of a complex sum (dispatch) */
	cmx_h two_int;             /* MPI_2INT: the one pair whose elements are of one kind */
	int root, proc_null, err_other;
	int err_in_status, status_error; /* MPI_ERR_IN_STATUS; the offset of MPI_ERROR in MPI_Status */
	cmx_h request_null;
	const void *status_ignore; /* MPI_STATUS_IGNORE and MPI_STATUSES_IGNORE */
	int status_size;           /* sizeof(MPI_Status) */
	int cart, graph, dist_graph; /* MPI_Topo_test's answers */
	int thread_multiple;         /* MPI_THREAD_MULTIPLE: 3, or 4096 in the standard ABI */
	const char *lib;           /* path of the MPI library */
} cmx_abi_t;
extern cmx_abi_t cmx_abi;

static inline cmx_h cmx_norm(cmx_h h) { return cmx_abi.int_handles ? (cmx_h)(uint32_t)h : h; }

/* Real PMPI entry points of the intercepted functions (NULL if absent). */
extern void *cmx_pmpi[CMX_NFN];
extern const char *const cmx_fn_names[CMX_NFN];
extern const short cmx_fn_nb[CMX_NFN];              /* persistent fn -> the nonblocking fn it starts */
extern const unsigned char cmx_coll_class[CMX_NCOLL]; /* CMX_CLASS_* of each family */

/* MPI_Request and MPI_Message are ints in the MPICH ABI and pointers in the
 * others: read and write them through these, never as cmx_h. */
static inline cmx_h cmx_req_get(const void *p)
{
	return cmx_abi.int_handles ? (cmx_h)(uint32_t) * (const int *)p : *(const cmx_h *)p;
}
static inline void cmx_req_put(void *p, cmx_h h)
{
	if (cmx_abi.int_handles)
		*(int *)p = (int)h;
	else
		*(cmx_h *)p = h;
}
/* the i-th datatype of an MPI_Datatype array (ints in the MPICH ABI) */
static inline cmx_h cmx_type_at(const void *arr, int i)
{
	return cmx_abi.int_handles ? (cmx_h)(uint32_t)((const int *)arr)[i] : ((const cmx_h *)arr)[i];
}
/* the i-th request of an array of them */
static inline void *cmx_req_at(void *arr, int i) { return (char *)arr + (size_t)i * (cmx_abi.int_handles ? sizeof(int) : sizeof(cmx_h)); }

/* Other PMPI functions the core uses. */
typedef int (*cmx_copy_fn)(cmx_h, int, void *, void *, void *, int *);
typedef int (*cmx_del_fn)(cmx_h, int, void *, void *);
typedef struct {
	int (*Init)(int *, char ***);
	int (*Init_thread)(int *, char ***, int, int *);
	int (*Query_thread)(int *);
	int (*Initialized)(int *);
	int (*Finalized)(int *);
	int (*Comm_size)(cmx_h, int *);
	int (*Comm_rank)(cmx_h, int *);
	int (*Comm_test_inter)(cmx_h, int *);
	int (*Comm_remote_size)(cmx_h, int *);
	int (*Comm_create_keyval)(cmx_copy_fn, cmx_del_fn, int *, void *);
	int (*Comm_set_attr)(cmx_h, int, void *);
	int (*Comm_get_attr)(cmx_h, int, void *, int *);
	int (*Type_size)(cmx_h, int *);
	int (*Reduce)(const void *, void *, int, cmx_h, cmx_h, int, cmx_h);
	int (*Abort)(cmx_h, int);
	int (*Comm_call_errhandler)(cmx_h, int);
	int (*Win_call_errhandler)(cmx_h, int);
	int (*File_call_errhandler)(cmx_h, int);
	int (*Session_call_errhandler)(cmx_h, int); /* MPI-4; NULL in Open MPI 4.1 */
	int (*Bcast)(void *, int, cmx_h, int, cmx_h);
	int (*Allreduce)(const void *, void *, int, cmx_h, cmx_h, cmx_h);
	int (*Allgather)(const void *, int, cmx_h, void *, int, cmx_h, cmx_h);
	int (*Gather)(const void *, int, cmx_h, void *, int, cmx_h, int, cmx_h);
	int (*Type_get_extent)(cmx_h, cmx_aint *, cmx_aint *);
	int (*Type_get_true_extent)(cmx_h, cmx_aint *, cmx_aint *);
	/* a derived datatype's parts (cmx_sig_kind) and packing (repack.c) */
	int (*Type_get_envelope)(cmx_h, int *, int *, int *, int *);
	int (*Type_get_contents)(cmx_h, int, int, int, int *, cmx_aint *, void *);
	int (*Type_free)(void *);
	int (*Pack)(const void *, int, cmx_h, void *, int, int *, cmx_h);
	int (*Unpack)(const void *, int, int *, void *, int, cmx_h, cmx_h);
	/* requests (requests.c); MPI_Request and MPI_Status travel as void * */
	int (*Send_init)(const void *, int, cmx_h, int, int, cmx_h, void *);
	int (*Barrier_init)(cmx_h, cmx_h, void *); /* MPI-4; NULL in Open MPI 4.1 */
	int (*Start)(void *);
	int (*Startall)(int, void *);
	int (*Wait)(void *, void *);
	int (*Test)(void *, int *, void *);
	int (*Waitall)(int, void *, void *);
	int (*Testall)(int, void *, int *, void *);
	int (*Waitany)(int, void *, int *, void *);
	int (*Testany)(int, void *, int *, int *, void *);
	int (*Waitsome)(int, void *, int *, int *, void *);
	int (*Testsome)(int, void *, int *, int *, void *);
	int (*Request_get_status)(cmx_h, int *, void *);
	int (*Request_free)(void *);
	int (*Cancel)(void *);
	int (*Grequest_start)(void *, void *, void *, void *, void *);
	int (*Grequest_complete)(cmx_h);
	int (*Status_set_elements)(void *, cmx_h, int);
	int (*Status_set_cancelled)(void *, int);
	int (*Test_cancelled)(const void *, int *);
	int (*Get_count)(const void *, cmx_h, int *);
	int (*Get_elements_x)(const void *, cmx_h, int64_t *); /* MPI-3: MPI_Count counts past INT_MAX */
	/* neighborhood collectives: how many neighbours */
	int (*Topo_test)(cmx_h, int *);
	int (*Cartdim_get)(cmx_h, int *);
	int (*Graph_neighbors_count)(cmx_h, int, int *);
	int (*Dist_graph_neighbors_count)(cmx_h, int *, int *, int *);
	int (*Cart_shift)(cmx_h, int, int, int *, int *);
	int (*Graph_neighbors)(cmx_h, int, int, int *);
	int (*Dist_graph_neighbors)(cmx_h, int, int *, int *, int, int *, int *);
	/* Fortran handles (MPI_Fint, an int) to C ones, for the Fortran entry points */
	cmx_h (*Comm_f2c)(int);
	cmx_h (*Type_f2c)(int);
	cmx_h (*Op_f2c)(int);
	int (*Status_c2f)(const void *, int *);
	int (*Request_c2f)(cmx_h);
	cmx_h (*Request_f2c)(int);
	cmx_h (*Info_f2c)(int);
	/* the collmux_overlap info key (capi/overlap.c); Info_get_string is MPI-4 */
	int (*Comm_set_info)(cmx_h, cmx_h);
	int (*Comm_dup_with_info)(cmx_h, cmx_h, void *);
	int (*Info_get)(cmx_h, const char *, int, char *, int *);
	int (*Info_get_string)(cmx_h, const char *, int *, char *, int *);
	/* a communicator of its own and an error handler, for asking the MPI
	 * what it accepts (cmx_mpi_probe) */
	int (*Comm_dup)(cmx_h, cmx_h *);
	int (*Comm_free)(cmx_h *);
	int (*Comm_create_errhandler)(void (*)(cmx_h *, int *, ...), cmx_h *);
	int (*Comm_set_errhandler)(cmx_h, cmx_h);
	int (*Errhandler_free)(cmx_h *);
} cmx_pmpi_extra_t;
extern cmx_pmpi_extra_t cmx_px;

/* Once MPI is initialised, before any call is routed: what the MPI
 * accepts beyond the standard (character types it reduces as integers). */
void cmx_mpi_probe(void);
/* Decodes a predefined datatype: returns 1 and fills kind/size, or 0. */
int cmx_dtype_info(cmx_h dtype, int *kind, int *size);
/* Decodes a predefined op into CMX_OP_*; CMX_OP_USER when not predefined. */
int cmx_op_info(cmx_h op);

/* ---- configuration, set once by Go at initialisation ---- */
#define CMX_OPS_TUNED 64 /* forms of the fused operations a tuning table may hold (dispatch.MaxOpsRanges) */
/* A tuning table's form of collmux_gemv_allreduce: on communicators of
 * `ranks` ranks, batches batch_lo to batch_hi and m from lo to hi compute
 * in form (as COLLMUX_OPS_ALGO numbers them). */
typedef struct {
	int ranks, batch_lo, batch_hi, form;
	uint64_t lo, hi;
} cmx_ops_pick;
typedef struct {
	int disable; /* COLLMUX_DISABLE: pure forwarder */
	int stats;   /* COLLMUX_STATS set */
	int log;     /* COLLMUX_LOG level: CMX_LOG_* */
	int check;   /* COLLMUX_CHECK: verify that ranks agree on every call */
	int trace;   /* COLLMUX_TRACE set: record every routed call (dispatch/trace.c) */
	int timeout; /* COLLMUX_TIMEOUT: seconds a device collective waits for its peers before it fails */
	int overlap;   /* COLLMUX_OVERLAP: every communicator's collectives run beside computation */
	int linger_us; /* COLLMUX_FUSED_LINGER: idle microseconds before the resident kernel stops */
	int order_default_stream; /* COLLMUX_STREAM_ORDER=default: device calls wait for the legacy default stream */
	int fused_algo; /* COLLMUX_FUSED_ALGO: how the fused kernels all-reduce, CMX_ALGO_* */
	int ops_algo;   /* COLLMUX_OPS_ALGO: 0 auto, else a form of fused/ops.c (1 fused, 2 cuBLAS + sum, 3 cuBLAS + NCCL) */
	cmx_ops_pick ops_tuned[CMX_OPS_TUNED]; /* the tuning table's forms of collmux_gemv_allreduce, which auto takes */
	int ops_tuned_n;
	uint32_t ops_tuned_hash; /* identifies them: a communicator's ranks must have the same (fused/ops.c) */
	uint32_t rules_hash; /* identifies the rule set; every rank must have the same */
	int shape_rules;     /* some rule depends on communicator shape: routes per communicator */
	int nvlink_rules;    /* some rule depends on the NVLink class: shapes must learn it */
	int topo_nodes;      /* COLLMUX_TOPO_OVERRIDE (tests): each communicator's ranks pretend to sit on this many nodes */
	char nccl_lib[256];  /* COLLMUX_NCCL_LIB */
	char nvrtc_lib[256]; /* COLLMUX_NVRTC_LIB ("": the usual names) */
} cmx_config;

/* Routes, compiled by package dispatch from the rule list: for each
 * collective and memory kind, disjoint size ranges in order. */
#define CMX_MAX_ROUTES 16
typedef struct {
	uint64_t lo, hi;
	int32_t backend, rule;
} cmx_route;
typedef struct {
	int32_t n;
	cmx_route r[CMX_MAX_ROUTES];
} cmx_routes;
/* by overlap (alone, beside computation), then form (blocking, then
 * nonblocking: MPI_I… and persistent starts): dispatch.Mode.Index */
typedef cmx_routes cmx_route_table_t[2][2][CMX_NCOLL][CMX_NMEM][CMX_NDCLASS];
/* The table for every communicator when no rule looks at shape. A new
 * rule set (collmux_set_rules) gets a new table, published by this pointer,
 * so that threads routing a call meanwhile never read one half-written;
 * the old ones stay valid for calls still reading them. */
extern cmx_route_table_t *cmx_route_table;
extern cmx_config cmx_cfg;

/* ---- state and the hot path ---- */
typedef struct {
	volatile int ready;   /* initialisation done (release/acquire) */
	int forward_only;     /* no call can leave MPI: wrappers forward at once */
	int host_fast;        /* no per-call work on host calls: forward at once while CUDA is not up */
	int fortran_direct;   /* Fortran calls convert and call collmux's C entry points (Open MPI), else forward */
	volatile int mpi_set; /* keyvals and finalize hook in place */
	volatile int finalized;
	int comm_keyval, self_keyval;
	int req_keyval; /* on communicators collmux holds requests of: tells when one is freed */
	int req_keyval_ok;
	int log_rank; /* 1 + the rank in MPI_COMM_WORLD once MPI is initialised; 0 before */
} cmx_state_t;
extern cmx_state_t cmx_state;

void cmx_init(void);
void cmx_mpi_load(void); /* finds the real MPI, its ABI and its PMPI functions (mpi/pmpi.c) */
void cmx_go_start(void); /* starts the Go runtime, once (internal/cmx/gostart.c) */
void *cmx_mpi_sym(const char *name); /* a symbol of the real MPI library */
int cmx_mpi_usable(void); /* between MPI_Init and MPI_Finalize (core.c) */
int cmx_forked(void);     /* in a child of fork (aside.c) */
void cmx_fatal(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void cmx_config_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2))); /* stops the job, through MPI_Abort once MPI is up */
void cmx_go_fatal(char *msg) __attribute__((noreturn)); /* Go's configuration errors (aside.c) */
void cmx_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int cmx_log_rank(void); /* the rank log lines name (in MPI_COMM_WORLD); -1 before MPI is initialised */

extern volatile int cmx_cuda_up; /* the process has initialised CUDA */
int cmx_cuda_probe(void);        /* checks (and latches) cmx_cuda_up */

/* cmx_forward_now: the wrappers' first test, loads and no call (so the
 * compiler gives the pass-through no stack frame): collmux is set up and
 * no call of this process can leave MPI. False sends the call to its
 * route_* function, which asks cmx_passthrough. */
static inline int cmx_forward_now(int fn)
{
	return __atomic_load_n(&cmx_state.ready, __ATOMIC_ACQUIRE) && cmx_state.forward_only && cmx_pmpi[fn] != NULL;
}

/* cmx_passthrough is the whole cost of collmux on a call that stays on MPI:
 * one load and a branch once initialised. */
static inline int cmx_passthrough(int fn)
{
	if (CMX_UNLIKELY(!__atomic_load_n(&cmx_state.ready, __ATOMIC_ACQUIRE)))
		cmx_init();
	if (CMX_UNLIKELY(cmx_pmpi[fn] == NULL))
		return 0;
	return cmx_state.forward_only || (cmx_state.host_fast && !cmx_cuda_up && !cmx_cuda_probe());
}

int cmx_dispatch(cmx_args *a);
void cmx_backends_release(cmx_comm *c); /* every backend's state of c, and its gate */
void cmx_backends_finalize(void);       /* MPI_Finalize: every backend lets go */
int cmx_forward(const cmx_args *a);
int cmx_forward_fn(const cmx_args *a); /* generated: call cmx_pmpi[a->fn] */
int cmx_mpi_setup(void);               /* keyvals and finalize hook (dispatch/setup.c); 0 when MPI is not usable */
void cmx_learn_rank(void);             /* log lines name the world rank from now on */
void cmx_mpi_early(void);              /* what MPI_Init does before the real one: cmx_mpi_load, once (capi/init.c) */
void cmx_set_up(int rc);               /* what MPI_Init does first once the real one returned rc: collmux's set-up (capi/init.c) */
int cmx_after_init(int rc);            /* then, what MPI_Init does last (capi/init.c) */

/* Fortran entry points (fortran.c, zfortran.c) */
static inline int cmx_fortran_direct(void) /* convert and call collmux's C entry points (Open MPI) */
{
	if (CMX_UNLIKELY(!__atomic_load_n(&cmx_state.ready, __ATOMIC_ACQUIRE)))
		cmx_init();
	return cmx_state.fortran_direct;
}
void *cmx_fortran_lookup(void **next, const char *sym);
/* The MPI's own Fortran function *next when a call forwards to it at once
 * (collmux set up, not converting, the function looked up before), else
 * NULL: loads only, so a forwarding entry point needs no stack frame. */
static inline void *cmx_fortran_forward(void **next)
{
	return __atomic_load_n(&cmx_state.ready, __ATOMIC_ACQUIRE) && !cmx_state.fortran_direct ? __atomic_load_n(next, __ATOMIC_ACQUIRE)
												: NULL;
}
static inline void *cmx_fortran_next(void **next, const char *sym) /* the MPI's own Fortran function sym, looked up once */
{
	void *f = __atomic_load_n(next, __ATOMIC_ACQUIRE);
	return CMX_LIKELY(f != NULL) ? f : cmx_fortran_lookup(next, sym);
}
void *cmx_f_buf(void *p);                         /* Fortran MPI_IN_PLACE / MPI_BOTTOM to C */
typedef struct {
	uint64_t w[8];
} cmx_f_status_t;                                       /* room for any ABI's MPI_Status */
void *cmx_f_status(int *f, cmx_f_status_t *c);          /* the C status a call fills for Fortran status f */
void cmx_f_status_back(int *f, cmx_f_status_t *c, int rc); /* c into f, unless f is MPI_STATUS_IGNORE */
int cmx_error(cmx_h comm, int code);   /* raise code through comm's error handler, return it */
/* Which node rank of size sits on, as a string: the host name, or a
 * pretended node under COLLMUX_TOPO_OVERRIDE=N (tests). */
void cmx_node_name(int rank, int size, char *buf, int len);
/* Where a rank runs, as a set-up compares it across the ranks (a row of
 * its allgather): node name, GPU bus id, and whether the GPU's contexts
 * are shared through MPS. */
typedef struct {
	char host[64], bus[32];
	int mps;
} cmx_place;
/* Rank rank of size's place, and its GPU's compute capability; 0 without
 * a current CUDA device. */
int cmx_place_here(int rank, int size, cmx_place *at, int *arch);

/* ---- per-communicator state, cached as an MPI attribute ---- */
struct cmx_comm {
	cmx_h handle;
	int size, rank, inter;
	int nccl_state;  /* 0 not tried, 1 ready, -1 unusable */
	void *nccl;      /* ncclComm_t */
	void *stream;    /* CUstream of collmux's NCCL work on this comm */
	void *nccl_ctx;  /* the CUcontext it was set up in: a call that holds no buffer here runs there */
	void *after_legacy; /* CUevent that orders it after the legacy default stream */
	void *scratch;   /* device scratch (in-place alltoall), grown on demand */
	void *scratch_old; /* outgrown, freed at the next call before its gate */
	size_t scratch_cap;
	struct cmx_comm *next; /* list of comms holding NCCL state */
	struct cmx_fused *fused; /* fused-kernel workspace; NULL until tried */
	int fused_state;         /* 0 not tried, 1 ready, -1 unusable */
	struct cmx_gate *gate;   /* arrival gate of the device backends (gate.c) */
	int gate_state;          /* 0 not tried, 1 open, -1 none (ranks on several nodes) */
	cmx_route_table_t *routes; /* compiled for this communicator's shape */
	unsigned routes_gen;       /* cmx_routes_gen when routes was set */
	int nodes, rpn;            /* shape, once learnt (0: not yet) */
	int nvlink;                /* the least NVLink class of its nodes (nvlink.Class); -1: not learnt */
	int overlap;               /* its collectives run beside computation: COLLMUX_OVERLAP or its collmux_overlap info key, agreed */
	int devup;                 /* its ranks have made a device call together, alike (dispatch/router.c, kinds_agreed) */
	struct cmx_copy *copy;     /* the copy engines' state (copy/); NULL until tried */
	int copy_state;            /* 0 not tried, 1 ready, -1 unusable */
	struct cmx_ops *ops;       /* fused operations' workspace (fused/ops.c); NULL until the first */
	int ops_state;             /* 0 not tried, 1 ready, -1 unusable */
};
static inline int cmx_gate_refuses(const cmx_comm *c, const cmx_args *a)
{
	return a->form == CMX_FORM_NONBLOCKING && c->gate;
}

extern volatile unsigned cmx_routes_gen; /* bumped when the rules in force change */
int cmx_rules_agree(int ok, uint32_t hash); /* over MPI_COMM_WORLD: every rank ok, with one hash */
void cmx_set_fast_paths(void);              /* recompute forward_only / host_fast from the configuration */
/* collmux's state of comm (made at first use); NULL with *rc = 0 for
 * MPI_COMM_NULL or when it cannot be had, NULL with MPI's error code in
 * *rc when MPI refused the communicator (its error handler has run). */
cmx_comm *cmx_comm_get(cmx_h comm, int *rc);
int cmx_comm_shape(cmx_comm *c); /* collective: learns c->nodes, rpn and nvlink; 0 on failure */
extern int cmx_live_comms;

/* ---- CUDA (cuda.c): the driver, loaded with dlopen ---- */
int cmx_cuda_load(void);         /* 1 when libcuda is present */
extern int cmx_cuda_present;     /* libcuda loaded */
int cmx_mem_kind(const void *p); /* CMX_MEM_* of one pointer */
int cmx_cuda_ctx_for(const void *p); /* make p's context current; 0 on failure */
/* the same, else (p is none of the device's, an empty rank's NULL) ctx */
int cmx_cuda_ctx_or(const void *p, void *ctx);
void *cmx_cuda_ctx_current(void); /* this thread's current CUcontext, or NULL */
int cmx_cuda_ctx_holds(const void *p); /* p was allocated in the current context */
int cmx_cuda_copy(void *dst, const void *src, size_t n, void *stream); /* async on stream */
/* rows of `width` bytes, each `spitch` bytes after the last in src and
 * `dpitch` in dst (device memory both), async on stream */
int cmx_cuda_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows, void *stream);
/* Blocks of a receive region that a datatype puts data in (staged.c's
 * mask), copied back alone. */
typedef struct {
	size_t off, len;
} cmx_run;
/* Copies len bytes from host to device, or only the n runs where runs is
 * not NULL, on the legacy default stream, and waits; 0 on a failure. */
int cmx_cuda_copy_runs(void *dev, const char *from, size_t len, const cmx_run *runs, int n);
int cmx_cuda_sync(void *stream);
int cmx_cuda_last_error(void); /* CUresult of the last failure on this thread */
void *cmx_cuda_stream_new(int nonblocking);
int cmx_cuda_query(void *stream); /* 1 idle, 0 busy, -1 failed */
int cmx_cuda_legacy_idle(void);    /* waits for the legacy default stream */
int cmx_cuda_after_legacy(void *stream, void **event); /* stream's next work waits for the legacy stream's, on the device */
void *cmx_cuda_event_after(void *stream); /* an event recorded on stream now; NULL on failure */
int cmx_cuda_record(void **event, void *stream); /* records *event (made at the first call) on stream */
int cmx_cuda_wait(void *stream, void *event);    /* stream's next work waits for event, on the device */
int cmx_cuda_sm_count(void);                     /* multiprocessors of the current device; 1 when unknown */
int cmx_cuda_capturing(void *stream);            /* stream is being captured into a CUDA graph */
int cmx_cuda_event_done(void *event);     /* 1 done, 0 not yet, -1 failed */
void cmx_cuda_event_free(void *event);
void cmx_cuda_stream_free(void *stream);
void *cmx_cuda_malloc(size_t n);
void cmx_cuda_free(void *p);
void *cmx_cuda_host_alloc(size_t n);
void cmx_cuda_host_free(void *p);
typedef struct {
	char reserved[64];
} cmx_ipc_handle; /* CUipcMemHandle */
int cmx_cuda_fused_capable(void);
int cmx_cuda_ipc_capable(void);
int cmx_cuda_device(int *arch, char *busid, int len);
int cmx_cuda_mps(void);
int cmx_cuda_driver_version(void);
void *cmx_cuda_function(const void *image, const char *name, void **module);
int cmx_cuda_launch(void *f, unsigned grid, unsigned block, void *stream, void **args);
/* f queued so that it may start while the kernel before it in stream
 * finishes, once that kernel's blocks have all started (and run
 * griddepcontrol.launch_dependents): programmatic dependent launch, CUDA
 * 12 and sm_90 on; as cmx_cuda_launch where the driver will not. f must
 * itself wait for what it reads from that kernel, as the fused kernels'
 * flags make it. */
int cmx_cuda_launch_early(void *f, unsigned grid, unsigned block, void *stream, void **args);
int cmx_cuda_ipc_handle(void *dptr, cmx_ipc_handle *h);
void *cmx_cuda_ipc_open(cmx_ipc_handle h);
void cmx_cuda_ipc_close(void *p);
int cmx_cuda_export(const void *p, uint64_t *id, uint64_t *off, cmx_ipc_handle *h); /* p's allocation, for a peer to map */
void *cmx_cuda_stream_high(void); /* non-blocking, of the greatest priority */
int cmx_cuda_memset(void *dptr, int v, size_t n);
size_t cmx_cuda_mem_free(void); /* free bytes of the current context's device; SIZE_MAX where the driver cannot say */
int cmx_cuda_memset_async(void *dptr, int v, size_t n, void *stream);
int cmx_cuda_memset2d_async(void *dptr, size_t pitch, int v, size_t width, size_t rows, void *stream); /* rows of width bytes, pitch apart */
int cmx_cuda_dtoh(void *dst, const void *src, size_t n);
void *cmx_cuda_mapped(size_t n, void **dptr);

/* cuBLAS (cuda/cublas.c), loaded at first use: y ([b][row], row stride
 * ldy, of element type ytype) = A x_b for row-major A (m x k, row stride
 * lda) and x (batch x k, row stride ldx) of element type dtype (types:
 * COLLMUX_FLOAT32, _FLOAT16, _BFLOAT16), accumulated in fp32, queued on
 * stream; 0 where cuBLAS is unavailable or refuses. */
int cmx_cublas_ready(void); /* cuBLAS loaded (at the first call) and a handle made */
int cmx_cublas_gemv(void *stream, int dtype, int m, int k, int batch, const void *a, long long lda, const void *x, long long ldx, void *y,
		    int ytype, long long ldy);
/* row-major C (rows x n, row stride ldc, element type ctype) = A (rows x
 * k, lda) B (k x n, ldb), both of element type dtype, accumulated in
 * fp32, queued on stream */
int cmx_cublas_gemm(void *stream, int dtype, int rows, int n, int k, const void *a, long long lda, const void *b, long long ldb, void *c,
		    int ctype, long long ldc);

/* ---- the copy engines (copy/) ---- */
int cmx_copy_run(cmx_comm *c, const cmx_args *a, int *rc);
void cmx_copy_release(cmx_comm *c);

/* ---- the functions collmux does not serve on device memory (capi/unserved.tab) ---- */
/* Whose error handler a refused call raises its error on: the window's,
 * file's, communicator's or session's among its parameters, MPI_COMM_WORLD's
 * for calls without one, none for the MPI_T functions (they return it). */
enum { CMX_ERRH_COMM, CMX_ERRH_WIN, CMX_ERRH_FILE, CMX_ERRH_SESSION, CMX_ERRH_WORLD, CMX_ERRH_NONE };
typedef struct {
	const char *name;
	unsigned char category, errh; /* CMX_UCAT_*, CMX_ERRH_* */
	short base;                   /* a _c function's int-count twin; -1 */
} cmx_ufn_info;
extern const cmx_ufn_info cmx_ufn[CMX_NUFN]; /* generated: mpi/zunserved.c */
extern const char *const cmx_ucat_names[CMX_NUCAT], *const cmx_ucat_reasons[CMX_NUCAT];
extern void *cmx_upmpi[CMX_NUFN]; /* the MPI's PMPI_ function of each; NULL where it lacks it */
void cmx_unserved_resolve(void);  /* fills cmx_upmpi (mpi/unserved.c) */

/* The whole cost of an unserved function while no CUDA context is up, as
 * cmx_passthrough's: a load and a branch, and while a driver is loaded but
 * not initialised, its probe (cmx_cuda_probe). 0 sends the call to its
 * checks (where the MPI lacks the function too: a _c one narrowed to its
 * int twin; cmx_mem_kind probes for those). */
static inline int cmx_unserved_pass(int ufn)
{
	if (CMX_UNLIKELY(!__atomic_load_n(&cmx_state.ready, __ATOMIC_ACQUIRE)))
		cmx_init();
	if (CMX_UNLIKELY(cmx_upmpi[ufn] == NULL))
		return 0;
	return cmx_state.forward_only || (!cmx_cuda_up && !cmx_cuda_probe());
}
/* p is device memory the host cannot touch (MPI_BOTTOM, NULL and
 * MPI_IN_PLACE are not; managed memory is host-accessible) */
static inline int cmx_on_device(const void *p)
{
	return p && p != cmx_abi.in_place && cmx_mem_kind(p) == CMX_MEM_DEVICE;
}
static inline int cmx_fits_int(int64_t v) { return v >= INT_MIN && v <= INT_MAX; }
enum { CMX_REFUSE_DEVICE, CMX_REFUSE_ABSENT };
/* A refused call: says why (once per function) and fails with
 * MPI_ERR_OTHER through cmx_unserved_fail. why: CMX_REFUSE_*. */
int cmx_unserved_refuse(int ufn, cmx_h obj, void *req, int why);
/* The resolver of an unserved function's export (an ifunc): wrapper, or
 * NULL where the loaded MPI defines neither pname nor pbase (its int-count
 * twin; NULL for none), so that the program sees the function absent as it
 * is without collmux. Called by the dynamic linker, maybe before collmux
 * is relocated (then it answers wrapper). */
void *cmx_export_unless_absent(void *wrapper, const char *pname, const char *pbase);
/* Raises code on obj's error handler (as cmx_ufn[ufn].errh says), sets
 * *req (when given) to MPI_REQUEST_NULL, and returns code. */
int cmx_unserved_fail(int ufn, cmx_h obj, void *req, int code);

/* NVRTC (nvrtc.c): compiles src for sm_<arch>; the cubin and log are malloc'd */
int cmx_nvrtc_compile(const char *src, int arch, char **cubin, size_t *len, char **log);

/* ---- arrival gate (gate.c): device work starts once every rank is in the call ---- */
typedef struct cmx_gate cmx_gate;
cmx_gate *cmx_comm_gate(cmx_comm *c); /* collective at first use; NULL: not MPI_THREAD_MULTIPLE, or several nodes */
void cmx_gate_close(cmx_comm *c);
void cmx_gate_arrive(cmx_gate *g);                /* this rank is in the next call */
/* A nonblocking call must not wait for its peers, which the gate would
 * make it do (a peer may reach the call only after this rank's next
 * point-to-point call): where a communicator has a gate, the device
 * backends decline nonblocking calls, which are then staged. Every rank
 * has the same thread level, so all decline alike. */
static inline int cmx_gate_refuses(const cmx_comm *c, const cmx_args *a);
/* 1 once every rank is in the call. 0 when this rank is not ready (it
 * gives up at once; the caller reports why) or after COLLMUX_TIMEOUT or
 * when a peer gave up (reported here); the peers then fail the call too. */
int cmx_gate_wait(cmx_gate *g, const cmx_args *a, int ready);

/* A random number, never 0, for what processes name for each other (the
 * gate's shared page, a fused workspace): pids repeat over time and
 * across pid namespaces that share /dev/shm and the GPUs. */
static inline uint64_t cmx_nonce(void)
{
	uint64_t v = 0;
	if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v)
		v = (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)&v ^ (uint64_t)clock();
	return v ? v : 1;
}

/* monotonic time, for timing calls and waits */
static inline uint64_t cmx_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void cmx_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

/* A full fence against a device's view of host memory: this thread's
 * stores before it are seen by the device before its loads after it are
 * made. x86's mfence (a sequentially consistent fence) orders them for
 * every observer; arm64's such fence (dmb ish) orders them for the CPUs'
 * domain alone, so there it is dmb osh, as Linux's dma_mb. */
static inline void cmx_device_fence(void)
{
#if defined(__aarch64__)
	__asm__ volatile("dmb osh" ::: "memory");
#else
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

/* ---- backends ---- */
/* Each returns 1 and sets *rc when it ran the call, 0 when it declines it
 * (the dispatcher then tries the next path). */
int cmx_nccl_load(void);
int cmx_nccl_run(cmx_comm *c, const cmx_args *a, int *rc);
/* For collmux's own operations (fused/ops.c): in-place sum all-reduces of
 * `rows` rows of n elements (CMX_KIND_* kind), `stride` bytes apart, as
 * one NCCL group queued on the program's stream, with no gate and no
 * wait. Collective; sets up c's NCCL communicator at the first. 1 queued. */
int cmx_nccl_sum_on(cmx_comm *c, void *buf, size_t n, int kind, size_t rows, size_t stride, void *stream);
int cmx_nccl_ready(cmx_comm *c, const void *buf); /* collective: c's NCCL communicator, set up at the first call; 1 when usable */
void cmx_nccl_release(cmx_comm *c);
void cmx_nccl_release_all(void);
int cmx_staged_run(cmx_comm *c, const cmx_args *a, int *rc);
void cmx_staged_finalize(void); /* frees the pinned staging memory (MPI_Finalize) */
int cmx_fused_run(cmx_comm *c, const cmx_args *a, int *rc);
int cmx_fused_ready(cmx_comm *c, const void *buf); /* collective: c's fused workspace, set up at the first call; 1 when usable */
/* rings p's job again if c's fused state is still the one it was made on
 * (1, the result in *rc), else 0: the start is routed anew */
int cmx_fused_restart(cmx_comm *c, const cmx_args *a, const cmx_prepared *p, int *rc);
void cmx_fused_release(cmx_comm *c);
void cmx_fused_release_all(void); /* stops every resident kernel (MPI_Finalize) */
/* collmux.h's fused operations (fused/ops.c), entered from capi/ops.c with
 * the communicator's state, or NULL and why not */
int cmx_ops_gemv_allreduce(cmx_comm *comm, const char *no_comm, void *stream, int dtype, int m, int k, int batch, const void *a,
			   long long lda, const void *x, long long ldx, void *y, long long ldy);
int cmx_ops_embedding_alltoall(cmx_comm *comm, const char *no_comm, void *stream, int dtype, int mode, int dim, long long batch,
			       int tables, int table_first, int tables_total, const void *weights, const long long *rows,
			       const long long *offsets, const long long *indices, void *out);
int cmx_ops_gemm_alltoall(cmx_comm *comm, const char *no_comm, void *stream, int dtype, int k, int n, int experts, const void *a,
			  long long lda, const void *b, const long long *rows, const long long *dest, void *out, long long out_rows,
			  long long capacity);
int cmx_ops_gemm_reducescatter(cmx_comm *comm, const char *no_comm, void *stream, int dtype, long long m, int n, int k, const void *a,
			       long long lda, const void *b, long long ldb, void *out, long long ldo);
int cmx_ops_allgather_gemm(cmx_comm *comm, const char *no_comm, void *stream, int dtype, long long m, int n, int k, const void *a,
			   long long lda, const void *b, long long ldb, void *out, long long ldo, void *ag, long long ldag);
void *cmx_ops_symm_alloc(cmx_comm *comm, const char *no_comm, size_t bytes);
int cmx_ops_symm_free(cmx_comm *comm, const char *no_comm, void *p);
/* The region of the send (which=0) or receive (which=1) buffer this rank's
 * call reads or writes, in bytes from the buffer's address. Empty (lo > hi)
 * when the buffer is not significant. nin and nout: how many blocks the
 * receive and send arguments hold (cmx_peers). On an intercommunicator,
 * root is the process that passes MPI_ROOT; the other group's processes
 * are leaves. 0 when a datatype's extent is unknown. */
int cmx_region(const cmx_args *a, const cmx_comm *c, int nin, int nout, int which, int64_t *lo, int64_t *hi);
/* buf + off as an address, also for buf MPI_BOTTOM (null), whose regions
 * are the absolute addresses in the datatypes */
#define CMX_AT(buf, off) ((char *)((uintptr_t)(buf) + (uintptr_t)(int64_t)(off)))
/* A data-movement collective on device memory whose datatype on this rank
 * does not move as bytes, run by a device backend on a packed copy
 * (staged/repack.c): cmx_repack makes *b, the same call on bytes in device
 * scratch, and returns 1; 0 when no side needs it; -1 when it failed (said
 * why). After running b, cmx_repack_done unpacks what was received (a
 * nonblocking call's at its completion) and returns the call's result. */
typedef struct cmx_packed cmx_packed;
int cmx_repack(const cmx_comm *c, const cmx_args *a, cmx_args *b, cmx_packed **rp);
int cmx_repack_done(cmx_packed *rp, const cmx_args *a, int rc);
int64_t cmx_type_size(cmx_h dtype, int ask);
/* The bytes a receive wrote, by its status; len when it cannot say. */
size_t cmx_received(const void *status, size_t len);
/* The size of one element the device backends may move as bytes: a
 * predefined type's (not a value/index pair), or a derived type's that is
 * one contiguous run; 0 otherwise. */
int cmx_move_size(cmx_h dtype);
/* dtype's extent and its true lower bound and extent; predefined types
 * need no MPI call. 0 when MPI cannot say. */
int cmx_type_extents(cmx_h dtype, cmx_aint *ext, cmx_aint *tlb, cmx_aint *text);
/* The kind (CMX_KIND_*) of every basic element in dtype's type signature
 * when they are all of one kind, found through the datatype's parts;
 * CMX_KIND_OTHER when they are of several kinds or the parts are unknown.
 * Ranks passing the same signature through different datatypes (a
 * contiguous type of floats on one, floats on another) get the same kind. */
int cmx_sig_kind(cmx_h dtype);
/* Whether dtype is derived (not predefined, named or Fortran
 * parameterized); asks MPI unless collmux's table knows the type. */
int cmx_type_derived(cmx_h dtype);
/* How many blocks the send (*nout) and receive (*nin) arrays of a call
 * hold: the communicator's size, the remote group's on an
 * intercommunicator, the out- and in-degree of the topology for the
 * neighborhood collectives. Returns 0, MPI's error code (a bad
 * communicator; its error handler was called), or -1 for a neighborhood
 * call on a communicator without a topology. */
int cmx_peers(const cmx_args *a, int *nin, int *nout);
/* The ranks a neighborhood call receives from (src, nin of them) and
 * sends to (dst, nout), in the order of its blocks; *cart is set for a
 * Cartesian topology, whose blocks pair up by dimension (negative, then
 * positive direction). 0 on success. */
int cmx_neighbors(const cmx_args *a, int nin, int nout, int *src, int *dst, int *cart);
/* Collective over c: 1 when ok is set on every rank. Backends agree with
 * it before and after any set-up step that could fail on one rank only. */
int cmx_comm_agree(const cmx_comm *c, int ok);

/* The buffer rules of a family, generated from capi/collectives.tab's
 * family lines (their comment says what each value means). who is a set
 * of roles (CMX_ROLE_*): those on which a side is significant. */
enum { CMX_ROLE_LEAF = 1, CMX_ROLE_ROOT = 2, CMX_ROLE_INTER_ROOT = 4 }; /* a bystander has none */
enum { CMX_WHO_ALL = 7, CMX_WHO_ROOT = 6, CMX_WHO_LEAF = 3 };
enum { CMX_SPAN_ONE = 1, CMX_SPAN_EACH, CMX_SPAN_V, CMX_SPAN_W, CMX_SPAN_TOTAL, CMX_SPAN_OWN };
enum { CMX_FAM_ROOTED = 1, CMX_FAM_REDUCES = 2, CMX_FAM_NEIGHBORS = 4, CMX_FAM_UNEVEN = 8 };
typedef struct {
	unsigned char flags; /* CMX_FAM_* */
	unsigned char sized; /* the side that gives the message size: 0 send, 1 receive */
	unsigned char who[2], span[2];
} cmx_family;
extern const cmx_family cmx_families[CMX_NCOLL];

static inline int cmx_rooted(int coll) { return cmx_families[coll].flags & CMX_FAM_ROOTED; }

/* This process's role in call a: an unrooted call's ranks are all leaves;
 * on an intercommunicator the root passes MPI_ROOT and the rest of its
 * group MPI_PROC_NULL (bystanders, no role). */
static inline int cmx_role(const cmx_args *a, int inter, int rank)
{
	if (!cmx_rooted(a->coll))
		return CMX_ROLE_LEAF;
	if (inter)
		return a->root == cmx_abi.root ? CMX_ROLE_INTER_ROOT : a->root == cmx_abi.proc_null ? 0 : CMX_ROLE_LEAF;
	return a->root == rank ? CMX_ROLE_ROOT : CMX_ROLE_LEAF;
}

/* Whether this process is the root of a rooted call. */
static inline int cmx_is_root(const cmx_args *a, int inter, int rank) { return cmx_role(a, inter, rank) & (CMX_ROLE_ROOT | CMX_ROLE_INTER_ROOT); }

/* Whether side w's count, displacement and datatype arrays are read on
 * this rank (root: it is the call's root): a non-root's receive arrays
 * of Gatherv and send arrays of Scatterv may be anything, and so may the
 * send arrays of a call in place. */
static inline int cmx_arrays_read(const cmx_args *a, int w, int root)
{
	return w ? a->coll != CMX_COLL_GATHERV || root : (a->coll != CMX_COLL_SCATTERV || root) && a->sbuf != cmx_abi.in_place;
}

/* Whether a call's displacement arrays are MPI_Aint (else int): the _c
 * functions', and MPI_Neighbor_alltoallw's in both widths. */
static inline int cmx_displs_aint(const cmx_args *a) { return a->large || a->coll == CMX_COLL_NEIGHBOR_ALLTOALLW; }

/* Side w's buffer is MPI_BOTTOM (the null address): its data is where the
 * datatypes' absolute displacements put it. */
static inline int cmx_at_bottom(const cmx_args *a, int w) { return a->used[w] && !(w ? a->rbuf : a->sbuf); }

/* Whether kind is a complex number's (CMX_KIND_COMPLEX*). */
static inline int cmx_kind_complex(int kind) { return kind == CMX_KIND_COMPLEX64 || kind == CMX_KIND_COMPLEX128; }

/* Memory the MPI can read itself (host or managed): no device path and
 * no staging for it. */
static inline int cmx_host_readable(int mem) { return mem == CMX_MEM_HOST || mem == CMX_MEM_MANAGED; }

/* Whether the send (w=0) or receive (w=1) side (buffer, count, datatype)
 * of a call is significant for this role: by the family's rules, and not
 * MPI_IN_PLACE. */
static inline int cmx_side_used(const cmx_args *a, int role, int w)
{
	return (cmx_families[a->coll].who[w] & role) && (w ? a->rbuf : a->sbuf) != cmx_abi.in_place;
}

/* i-th entry of a counts or displacements array of a call */
static inline int64_t cmx_at(const void *arr, int i, int large)
{
	return large ? ((const int64_t *)arr)[i] : ((const int *)arr)[i];
}

/* the sum of the first n entries of a counts array (0 for none) */
static inline int64_t cmx_count_sum(const void *arr, int n, int large)
{
	int64_t s = 0;
	for (int i = 0; arr && i < n; i++)
		s += cmx_at(arr, i, large);
	return s;
}

/* Elements side w of a call spans on this rank (rank me, n peers on that
 * side) where it is one run of one datatype (span one, each, total, own);
 * -1 for the per-peer spans (v, w), which are walked block by block. */
static inline int64_t cmx_side_count(const cmx_args *a, int w, int n, int me)
{
	switch (cmx_families[a->coll].span[w]) {
	case CMX_SPAN_EACH:
		return n * (w ? a->rcount : a->scount);
	case CMX_SPAN_V:
	case CMX_SPAN_W:
		return -1;
	case CMX_SPAN_OWN: /* in place, the receive buffer holds the input too */
		if (a->sbuf != cmx_abi.in_place)
			return a->rcounts ? cmx_at(a->rcounts, me, a->large) : a->rcount;
		/* fall through */
	case CMX_SPAN_TOTAL:
		return a->rcounts ? cmx_count_sum(a->rcounts, n, a->large) : n * a->rcount;
	default:
		return w ? a->rcount : a->scount;
	}
}

/* ---- requests (mpi/request.c): what completion calls must know ---- */
/* An entry for a nonblocking call collmux finishes when it completes:
 * made before the call, filed under the request the MPI wrote to *req
 * once it succeeded, or dropped (with what it keeps) if it failed. */
cmx_req *cmx_req_new(const cmx_args *a);
void cmx_req_file(cmx_req *e, const void *req);
void cmx_req_drop(cmx_req *e);
void cmx_req_keep(cmx_req *e, void *p); /* free(p) once the request completes */
void cmx_req_pinned(cmx_req *e, void *p, size_t n); /* cmx_pinned_put(p, n) then */
/* pinned host memory of at least n bytes, from a pool (cuda/pinned.c) */
void *cmx_pinned_get(size_t n);
void cmx_pinned_put(void *p, size_t n);
void cmx_pinned_release(void); /* frees what the pool holds (MPI_Finalize) */
/* On completion, copy len bytes from host `from` to device `dev` (with
 * trim, only the bytes the status says arrived; with runs, n of them,
 * only those blocks, and the request frees runs). */
void cmx_req_copy_back(cmx_req *e, void *dev, const void *from, size_t len, int trim, cmx_run *runs, int n);
/* Once the request collmux filed under *req completes (after any copy
 * back), fn(arg, 1), whose result becomes the completion's; fn(arg, 0)
 * instead when it failed or is dropped first. -1 when collmux holds no
 * such request. */
int cmx_req_then(const void *req, int (*fn)(void *, int), void *arg);
/* *a->req: a generalized request for device work, complete once poll(arg,
 * v) returns 1 (-1: failed); drop(arg), if given, when it is released. */
int cmx_req_device(const cmx_args *a, int (*poll)(void *, uint64_t), void *arg, uint64_t v, void (*drop)(void *));
/* *a->req: a persistent call collmux runs itself, each start calling
 * start (the router) with the call in its nonblocking form, and with
 * prep pointing to the request's cmx_prepared */
int cmx_req_persistent(const cmx_args *a, int (*start)(cmx_args *));
/* A persistent call's start as the backend that ran it left it for the
 * next starts (dispatch/router.c): while the rules, the communicator's
 * mode and that backend's state are as they were, a start runs the same
 * job again without routing. Zeroed: nothing prepared. */
typedef struct {
	uint32_t code, nb, root;
	const void *in;
	void *out;
	uint64_t count;
} cmx_fused_job; /* a job of the resident kernel (fused/host.c) */
struct cmx_prepared {
	int backend;        /* CMX_BACKEND_*; CMX_BACKEND_MPI (0): nothing prepared */
	int rule, overlap;  /* the route's rule, and c->overlap it was routed with */
	unsigned routes_gen; /* c->routes_gen then */
	int64_t bytes;      /* what statistics count it as */
	const void *state;  /* the backend's state it ran on, checked at each start */
	cmx_fused_job job;
};
extern int cmx_req_live; /* requests collmux holds (mpi/request.c) */
/* collmux holds some request (one load; sets collmux up first if needed) */
static inline int cmx_req_owns_any(void)
{
	if (CMX_UNLIKELY(!__atomic_load_n(&cmx_state.ready, __ATOMIC_ACQUIRE)))
		cmx_init();
	return __atomic_load_n(&cmx_req_live, __ATOMIC_RELAXED) != 0;
}
/* The completion calls' first test, loads only (so the compiler gives the
 * pass-through no stack frame): collmux is set up and holds no request. */
static inline int cmx_req_none_owned(void)
{
	return __atomic_load_n(&cmx_state.ready, __ATOMIC_ACQUIRE) && __atomic_load_n(&cmx_req_live, __ATOMIC_RELAXED) == 0;
}
/* What the completion calls (capi/requests.c) do once collmux holds a
 * request (mpi/request.c): op is which call. */
enum { CMX_REQ_WAIT, CMX_REQ_TEST, CMX_REQ_WAITALL, CMX_REQ_TESTALL, CMX_REQ_WAITANY, CMX_REQ_TESTANY, CMX_REQ_WAITSOME, CMX_REQ_TESTSOME,
       CMX_REQ_GETSTATUS };
int cmx_req_completion(int op, int n, void *reqs, int *flag, int *idx, int *outcount, int *indices, void *statuses);
int cmx_req_get_status(cmx_h req, int *flag, void *status);
int cmx_req_cancel(void *req);
int cmx_req_free(void *req); /* MPI_Request_free */
int cmx_req_start(void *req);
void cmx_req_finalize(void);                        /* finishes requests the program freed while active */
int cmx_req_comm_freed(cmx_h comm, int keyval, void *val, void *extra); /* req_keyval's delete callback */

/* ---- timelines (COLLMUX_TRACE, dispatch/trace.c) ---- */
#define CMX_TRACE_MAX (1u << 20) /* events kept per process; later calls are counted as dropped */
typedef struct {
	uint64_t t0, dur, bytes; /* t0: CLOCK_MONOTONIC ns */
	int32_t tid, rc;
	int16_t fn;
	uint8_t coll, backend, mem, form;
} cmx_trace_ev;
void cmx_trace_start(void); /* MPI_Init, every rank: the buffer and the shared instant (collective) */
void cmx_trace_add(const cmx_args *a, int backend, int64_t bytes, uint64_t t0, uint64_t t1, int rc);
void cmx_trace_write(void); /* the finalize hook: this rank's file */

/* ---- NVTX ranges (dispatch/nvtx.c), for Nsight Systems ---- */
void cmx_nvtx_load(void); /* at start-up: the tool named by NVTX_INJECTION64_PATH, if any */
extern int cmx_nvtx_on;   /* a tool took the ranges: the router pushes one per backend it tries */
void cmx_nvtx_push(const cmx_args *a, int backend, int64_t bytes); /* bytes < 0: not known */
void cmx_nvtx_pop(void);

#include "goexports.h"

/* ---- statistics ---- */
#define CMX_NBUCKET 34 /* bucket 0: 0 B; bucket b: [2^(b-1), 2^b); the last is open */
typedef struct {
	uint64_t calls, bytes, ns;
	uint64_t uj; /* the GPU's energy over the calls' time, microjoules (device backends; cmx_energy_flush) */
} cmx_stat;
extern cmx_stat cmx_stats[CMX_NCOLL][CMX_NBACKEND][CMX_NBUCKET];
void cmx_energy_flush(void);          /* shares out the energy read since the last share (router.c) */
int cmx_nvml_energy(uint64_t *mj); /* this process's GPU's energy counter, millijoules; 0 when NVML has none */
extern int32_t cmx_stat_rule[CMX_NCOLL][CMX_NBACKEND][CMX_NBUCKET]; /* rule index + 1 that routed the cell's calls */
/* At finalize each rank sends rank 0 its host name in CMX_HOSTLEN bytes
 * (NUL-padded), then {calls, bytes, ns} of each cell with calls on any rank */
#define CMX_HOSTLEN 72

#endif
