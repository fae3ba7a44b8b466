//go:build collmux_lib

/*
 * pmpi.c: the real MPI underneath: finding its library (also when it was
 * loaded RTLD_LOCAL), recognising its ABI, resolving the PMPI functions,
 * and decoding predefined handles from the tables of package mpi
 * (zabi.c).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

#include "cmx.h"

cmx_abi_t cmx_abi;
cmx_pmpi_extra_t cmx_px;
void *cmx_pmpi[CMX_NFN];

static void *mpi_lib; /* dlopen handle of the library that defines PMPI_Init */

/* ---- locating libmpi ---- */

/* A library loaded RTLD_LOCAL (as Python loads extension modules and their
 * libmpi) is invisible to RTLD_NEXT, so when that fails every loaded object
 * is asked in turn, through a no-load dlopen of its own name. */
struct lib_search {
	void *self, *found;
};

static int find_in_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct lib_search *s = data;
	(void)size;
	if (!info->dlpi_name || !info->dlpi_name[0])
		return 0;
	void *h = dlopen(info->dlpi_name, RTLD_NOLOAD | RTLD_LAZY);
	if (!h)
		return 0;
	if (h != s->self && dlsym(h, "PMPI_Init")) {
		s->found = h;
		return 1;
	}
	dlclose(h);
	return 0;
}

static void *find_mpi_library(void)
{
	void *h = NULL;
	void *p = dlsym(RTLD_NEXT, "PMPI_Init");
	Dl_info di;
	if (p && dladdr(p, &di) && di.dli_fname)
		h = dlopen(di.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
	if (!h) {
		struct lib_search s = {NULL, NULL};
		if (dladdr((void *)&cmx_mpi_load, &di))
			s.self = dlopen(di.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
		dl_iterate_phdr(find_in_object, &s);
		h = s.found;
	}
	if (h && dladdr(dlsym(h, "PMPI_Init"), &di))
		cmx_abi.lib = di.dli_fname;
	return h;
}

void *cmx_mpi_sym(const char *name) { return mpi_lib ? dlsym(mpi_lib, name) : NULL; }

/* ---- decoding predefined handles ---- */

#define CMX_HSLOTS 256
typedef struct {
	cmx_h h;
	uint8_t used, kind, size;
} hent;
static hent dt_hash[CMX_HSLOTS], op_hash[CMX_HSLOTS];

static unsigned hslot(cmx_h h) { return (unsigned)((h * 0x9E3779B97F4A7C15ull) >> 56); }

static void hput(hent *t, cmx_h h, uint8_t kind, uint8_t size)
{
	unsigned i = hslot(h);
	while (t[i].used && t[i].h != h)
		i = (i + 1) % CMX_HSLOTS;
	t[i] = (hent){h, 1, kind, size};
}

static const hent *hget(const hent *t, cmx_h h)
{
	for (unsigned i = hslot(h);; i = (i + 1) % CMX_HSLOTS) {
		if (!t[i].used)
			return NULL;
		if (t[i].h == h)
			return &t[i];
	}
}

int cmx_dtype_info(cmx_h dtype, int *kind, int *size)
{
	const hent *e = hget(dt_hash, cmx_norm(dtype));
	if (!e)
		return 0;
	*kind = e->kind;
	*size = e->size;
	return 1;
}

int cmx_op_info(cmx_h op)
{
	const hent *e = hget(op_hash, cmx_norm(op));
	return e ? e->kind : CMX_OP_USER;
}

/* Address of an Open MPI predefined object. A program linked against libmpi
 * may hold it through a copy relocation (the object then lives in the
 * executable, and that copy is the handle everyone passes), so global scope
 * is asked first and the library itself only when it was loaded locally. */
static cmx_h ompi_object(const char *name)
{
	void *p = dlsym(RTLD_DEFAULT, name);
	return (cmx_h)(p ? p : dlsym(mpi_lib, name));
}

/* handle of a predefined object in the ABI in force; 0 when it has none */
static cmx_h predef_handle(const cmx_predef *p)
{
	switch (cmx_abi.abi) {
	case CMX_ABI_STANDARD:
		return p->std;
	case CMX_ABI_OPENMPI:
		return p->ompi && p->ompi[0] ? ompi_object(p->ompi) : 0;
	default:
		return p->mpich;
	}
}

static cmx_h predef_by_name(const cmx_predef *tab, const char *name)
{
	for (; tab->name; tab++)
		if (strcmp(tab->name, name) == 0)
			return predef_handle(tab);
	return 0;
}

static void detect_abi(void)
{
	int major = -1, minor = -1;
	int (*abi_version)(int *, int *) = (int (*)(int *, int *))dlsym(mpi_lib, "MPI_Abi_get_version");
	const cmx_abi_consts *k;
	/* The standard ABI is checked first: Open MPI's libmpi_abi also carries
	 * ompi_* symbols underneath. */
	if (abi_version && abi_version(&major, &minor) == 0 && major > 0) {
		cmx_abi.abi = CMX_ABI_STANDARD;
		k = &cmx_consts_mpi_abi;
	} else if (dlsym(mpi_lib, "ompi_mpi_comm_self")) {
		cmx_abi.abi = CMX_ABI_OPENMPI;
		k = &cmx_consts_openmpi;
	} else {
		cmx_abi.abi = CMX_ABI_MPICH;
		cmx_abi.int_handles = 1;
		k = &cmx_consts_mpich;
	}
	cmx_abi.in_place = (const void *)(intptr_t)k->in_place;
	cmx_abi.root = k->root;
	cmx_abi.proc_null = k->proc_null;
	cmx_abi.err_other = k->err_other;
	cmx_abi.err_in_status = k->err_in_status, cmx_abi.status_error = k->status_error;
	cmx_abi.status_ignore = (const void *)(intptr_t)k->status_ignore;
	cmx_abi.status_size = k->status_size;
	cmx_abi.cart = k->cart, cmx_abi.graph = k->graph, cmx_abi.dist_graph = k->dist_graph;
	cmx_abi.thread_multiple = k->thread_multiple;
	if (cmx_abi.abi == CMX_ABI_OPENMPI) {
		cmx_abi.comm_world = ompi_object("ompi_mpi_comm_world");
		cmx_abi.comm_self = ompi_object("ompi_mpi_comm_self");
		cmx_abi.comm_null = ompi_object("ompi_mpi_comm_null");
		cmx_abi.dtype_null = ompi_object("ompi_mpi_datatype_null");
		cmx_abi.op_null = ompi_object("ompi_mpi_op_null");
		cmx_abi.info_null = ompi_object("ompi_mpi_info_null");
		cmx_abi.request_null = ompi_object("ompi_request_null");
	} else {
		cmx_abi.comm_world = k->comm_world;
		cmx_abi.comm_self = k->comm_self;
		cmx_abi.comm_null = k->comm_null;
		cmx_abi.dtype_null = k->dtype_null;
		cmx_abi.op_null = k->op_null;
		cmx_abi.info_null = k->info_null;
		cmx_abi.request_null = k->request_null;
	}
	for (const cmx_predef *p = cmx_predef_dtypes; p->name; p++) {
		cmx_h h = predef_handle(p);
		if (h)
			hput(dt_hash, h, p->kind, p->size);
	}
	for (const cmx_predef *p = cmx_predef_ops; p->name; p++) {
		cmx_h h = predef_handle(p);
		if (h)
			hput(op_hash, h, p->kind, 0);
	}
	cmx_abi.uint64 = predef_by_name(cmx_predef_dtypes, "MPI_UINT64_T");
	cmx_abi.byte = predef_by_name(cmx_predef_dtypes, "MPI_BYTE");
	cmx_abi.int_ = predef_by_name(cmx_predef_dtypes, "MPI_INT");
	cmx_abi.float_ = predef_by_name(cmx_predef_dtypes, "MPI_FLOAT");
	cmx_abi.double_ = predef_by_name(cmx_predef_dtypes, "MPI_DOUBLE");
	cmx_abi.two_int = predef_by_name(cmx_predef_dtypes, "MPI_2INT");
	cmx_abi.op_sum = predef_by_name(cmx_predef_ops, "MPI_SUM");
	cmx_abi.op_min = predef_by_name(cmx_predef_ops, "MPI_MIN");
	cmx_abi.op_max = predef_by_name(cmx_predef_ops, "MPI_MAX");
}

/* ---- character types the MPI reduces ---- */

/* The standard lets no reduction take MPI_CHAR or MPI_WCHAR (characters,
 * not numbers), but an MPI may: Open MPI 4.1 and MPICH 4.0 sum, multiply
 * and compare MPI_CHAR as C's char. Programs rely on it (OSU's
 * micro-benchmarks reduce MPI_CHAR by default), and the device paths
 * would stage such calls through the host. So each character type is
 * offered once to an MPI_Reduce on a duplicate of MPI_COMM_SELF with an
 * error handler that returns: one the MPI reduces with sum, prod, min and
 * max (every op a device path runs) is decoded from then on as the
 * integer of its size, signed as the platform's char or wchar_t is (the
 * MPI, built for the same platform, computes with those). Every rank asks
 * the same MPI and so decodes alike, as routing needs. One the MPI
 * refuses stays a character: its reductions still reach the MPI, which
 * reports them. The program's handlers are left alone: MPI_Reduce_local,
 * which would combine two values, raises its errors on MPI_COMM_WORLD or
 * MPI_COMM_SELF, and setting a handler there and back is not the same as
 * leaving it (MPICH sends the errors of a communicator never given one to
 * MPI_COMM_WORLD's). A call the handler saw is refused whatever it
 * returns: MPICH 5.0.2 (libmpich and libmpi_abi) returns MPI_SUCCESS from
 * an MPI_Reduce of MPI_WCHAR once a user handler has been called for it,
 * which alone would have passed MPI_WCHAR for an integer there. */
static int probe_refused; /* set by errh_return; the probe runs once, under cmx_mpi_setup's lock */
static void errh_return(cmx_h *comm, int *code, ...) { (void)comm, (void)code, probe_refused = 1; }

/* the integer kind a character type of size bytes reduces as on the
 * communicator comm (of this rank alone); -1 for none */
static int reduce_kind(cmx_h comm, cmx_h type, int size)
{
	const char *ops[] = {"MPI_SUM", "MPI_PROD", "MPI_MIN", "MPI_MAX"};
	const int sign = size == 1 ? (char)-1 < 0 : (wchar_t)-1 < 0;
	uint64_t in = 1, out = 0;
	if (size != 1 && size != (int)sizeof(wchar_t)) /* a character type of another size: its sign is unknown */
		return -1;
	for (int i = 0; i < 4; i++) {
		cmx_h op = predef_by_name(cmx_predef_ops, ops[i]);
		probe_refused = 0;
		if (!op || cmx_px.Reduce(&in, &out, 1, type, op, 0, comm) != 0 || probe_refused)
			return -1;
	}
	return CMX_KIND_INT8 + 2 * (size == 1 ? 0 : 2) + !sign; /* kinds: int8, uint8, int16, uint16, int32, ... */
}

void cmx_mpi_probe(void)
{
	cmx_h self = 0, mine = 0;
	if (!cmx_px.Comm_dup || cmx_px.Comm_dup(cmx_abi.comm_self, &self) != 0)
		return;
	self = cmx_norm(self);
	if (cmx_px.Comm_create_errhandler(errh_return, &mine) == 0 && cmx_px.Comm_set_errhandler(self, cmx_norm(mine)) == 0)
		for (const cmx_predef *p = cmx_predef_dtypes; p->name; p++) {
			cmx_h h = p->kind == CMX_KIND_CHAR ? predef_handle(p) : 0;
			int kind = h ? reduce_kind(self, h, p->size) : -1;
			if (kind >= 0) {
				hput(dt_hash, h, (uint8_t)kind, p->size);
				cmx_log(CMX_LOG_DEBUG, "the MPI reduces %s: it is taken as a %d-bit %s integer", p->name, 8 * p->size,
					kind % 2 ? "signed" : "unsigned");
			}
		}
	if (mine)
		cmx_px.Errhandler_free(&mine);
	cmx_px.Comm_free(&self);
}

#define RESOLVE(field) (*(void **)&cmx_px.field = dlsym(mpi_lib, "PMPI_" #field))

static void resolve_pmpi(void)
{
	char name[64];
	for (int i = 0; i < CMX_NFN; i++) {
		snprintf(name, sizeof name, "P%s", cmx_fn_names[i]);
		cmx_pmpi[i] = dlsym(mpi_lib, name);
	}
	RESOLVE(Init);
	RESOLVE(Init_thread);
	RESOLVE(Query_thread);
	RESOLVE(Initialized);
	RESOLVE(Finalized);
	RESOLVE(Comm_size);
	RESOLVE(Comm_rank);
	RESOLVE(Comm_test_inter);
	RESOLVE(Comm_remote_size);
	RESOLVE(Comm_create_keyval);
	RESOLVE(Comm_set_attr);
	RESOLVE(Comm_get_attr);
	RESOLVE(Type_size);
	RESOLVE(Reduce);
	RESOLVE(Abort);
	RESOLVE(Comm_call_errhandler);
	RESOLVE(Win_call_errhandler);
	RESOLVE(File_call_errhandler);
	RESOLVE(Session_call_errhandler);
	RESOLVE(Bcast);
	RESOLVE(Allreduce);
	RESOLVE(Allgather);
	RESOLVE(Gather);
	RESOLVE(Type_get_extent);
	RESOLVE(Type_get_true_extent);
	RESOLVE(Type_get_envelope);
	RESOLVE(Type_get_contents);
	RESOLVE(Type_free);
	RESOLVE(Pack);
	RESOLVE(Unpack);
	RESOLVE(Send_init);
	RESOLVE(Barrier_init);
	RESOLVE(Start);
	RESOLVE(Startall);
	RESOLVE(Wait);
	RESOLVE(Test);
	RESOLVE(Waitall);
	RESOLVE(Testall);
	RESOLVE(Waitany);
	RESOLVE(Testany);
	RESOLVE(Waitsome);
	RESOLVE(Testsome);
	RESOLVE(Request_get_status);
	RESOLVE(Request_free);
	RESOLVE(Cancel);
	RESOLVE(Grequest_start);
	RESOLVE(Grequest_complete);
	RESOLVE(Status_set_elements);
	RESOLVE(Status_set_cancelled);
	RESOLVE(Test_cancelled);
	RESOLVE(Get_count);
	RESOLVE(Get_elements_x);
	RESOLVE(Topo_test);
	RESOLVE(Cartdim_get);
	RESOLVE(Graph_neighbors_count);
	RESOLVE(Dist_graph_neighbors_count);
	RESOLVE(Cart_shift);
	RESOLVE(Graph_neighbors);
	RESOLVE(Dist_graph_neighbors);
	RESOLVE(Comm_f2c);
	/* libmpi_abi (the MPI-5 standard ABI) has no Fortran conversions; its
	 * integer handles come from MPI_Comm_toint (collmux.h's fused
	 * operations take one) */
	if (!cmx_px.Comm_f2c && cmx_abi.abi == CMX_ABI_STANDARD)
		*(void **)&cmx_px.Comm_f2c = dlsym(mpi_lib, "PMPI_Comm_fromint");
	RESOLVE(Type_f2c);
	RESOLVE(Op_f2c);
	RESOLVE(Status_c2f);
	RESOLVE(Request_c2f);
	RESOLVE(Request_f2c);
	RESOLVE(Info_f2c);
	RESOLVE(Comm_set_info);
	RESOLVE(Comm_dup_with_info);
	RESOLVE(Info_get);
	RESOLVE(Info_get_string);
	RESOLVE(Comm_dup);
	RESOLVE(Comm_free);
	RESOLVE(Comm_create_errhandler);
	RESOLVE(Comm_set_errhandler);
	RESOLVE(Errhandler_free);
	/* the base (int-count) functions exist in every MPI collmux supports,
	 * except the MPI-4 persistent collectives, which collmux provides */
	for (int i = 0; i < CMX_NFN; i += 2)
		if (!cmx_pmpi[i] && cmx_fn_nb[i] < 0)
			cmx_fatal("the MPI library %s lacks P%s", cmx_abi.lib ? cmx_abi.lib : "?", cmx_fn_names[i]);
	cmx_unserved_resolve();
}

void cmx_node_name(int rank, int size, char *buf, int len)
{
	const int nodes = cmx_cfg.topo_nodes;
	memset(buf, 0, (size_t)len);
	gethostname(buf, (size_t)len - 8);
	if (nodes > 1)
		snprintf(buf + strlen(buf), 8, "#%d", rank * nodes / size);
}

int cmx_place_here(int rank, int size, cmx_place *at, int *arch)
{
	cmx_node_name(rank, size, at->host, sizeof at->host);
	at->mps = cmx_cuda_mps();
	return cmx_cuda_device(arch, at->bus, sizeof at->bus);
}

int cmx_error(cmx_h comm, int code)
{
	/* a call without a communicator (MPI_Reduce_local) raises its error
	 * on MPI_COMM_SELF, as MPI-4 has it */
	cmx_px.Comm_call_errhandler(comm ? comm : cmx_abi.comm_self, code);
	return code;
}

void cmx_mpi_load(void)
{
	mpi_lib = find_mpi_library();
	if (!mpi_lib)
		cmx_fatal("no MPI library is loaded in this process (no PMPI_Init found); "
			  "collmux must be preloaded into an MPI program");
	detect_abi();
	resolve_pmpi();
}
