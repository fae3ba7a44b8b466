//go:build collmux_lib

/*
 * unserved.c: the MPI functions with buffers that collmux does not serve
 * on device memory (capi/unserved.tab; their wrappers are capi/zunserved.c).
 * A device buffer, or a function the MPI lacks, fails the call here with
 * an error through the right error handler and a message naming the call,
 * instead of reaching an MPI that would fault on the pointer.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "cmx.h"

void *cmx_upmpi[CMX_NUFN];

void cmx_unserved_resolve(void)
{
	char name[64];
	for (int i = 0; i < CMX_NUFN; i++) {
		snprintf(name, sizeof name, "P%s", cmx_ufn[i].name);
		cmx_upmpi[i] = cmx_mpi_sym(name);
	}
}

int cmx_unserved_fail(int ufn, cmx_h obj, void *req, int code)
{
	if (req)
		cmx_req_put(req, cmx_abi.request_null);
	int (*call)(cmx_h, int) = NULL;
	switch (cmx_ufn[ufn].errh) {
	case CMX_ERRH_COMM:
		call = cmx_px.Comm_call_errhandler;
		break;
	case CMX_ERRH_WORLD:
		call = cmx_px.Comm_call_errhandler, obj = cmx_abi.comm_world;
		break;
	case CMX_ERRH_WIN:
		call = cmx_px.Win_call_errhandler;
		break;
	case CMX_ERRH_FILE:
		call = cmx_px.File_call_errhandler;
		break;
	case CMX_ERRH_SESSION:
		call = cmx_px.Session_call_errhandler;
		break;
	}
	if (call && cmx_mpi_usable()) /* an error handler can be called only between MPI_Init and MPI_Finalize */
		call(obj, code);
	return code;
}

static unsigned char reported[CMX_NUFN];

int cmx_unserved_refuse(int ufn, cmx_h obj, void *req, int why)
{
	const cmx_ufn_info *f = &cmx_ufn[ufn];
	if (!__atomic_exchange_n(&reported[ufn], 1, __ATOMIC_RELAXED)) {
		if (why == CMX_REFUSE_DEVICE)
			fprintf(stderr,
				"collmux: %s: device memory is not supported for %s (%s): the call fails with MPI_ERR_OTHER; "
				"give it host memory (reported once per function)\n",
				f->name, cmx_ucat_reasons[f->category], cmx_ucat_names[f->category]);
		else
			fprintf(stderr, "collmux: %s: the MPI library %s has no P%s%s%s: the call fails with MPI_ERR_OTHER (reported once per function)\n",
				f->name, cmx_abi.lib ? cmx_abi.lib : "?", f->name, f->base >= 0 ? " nor P" : "",
				f->base >= 0 ? cmx_ufn[f->base].name : "");
	}
	return cmx_unserved_fail(ufn, obj, req, cmx_abi.err_other);
}

/* ---- the exports of functions an MPI may lack ----
 *
 * A program may test for an MPI function at run time: a weak reference
 * (mpi4py's builds for several MPIs test every MPI-4 function so, and fall
 * back to their own code where the MPI has none) or dlsym. collmux exports
 * every function of the table, so such a test would find collmux's and
 * take a path that then fails (MPI_ERR_OTHER, "the MPI library has no
 * ..."): MPI_Isendrecv, MPI_Comm_attach_buffer on Open MPI 4.1, under
 * mpi4py 4. So each export is an indirect function (ifunc): the dynamic
 * linker asks its resolver for the address when it binds a reference, and
 * where the MPI lacks the function (and, for a _c one, its int-count twin
 * that collmux would narrow to), the answer is null, as without collmux.
 *
 * A resolver may run before collmux itself is relocated (an object
 * relocated earlier binding a reference at once): then it must not call
 * through collmux's unrelocated GOT, and answers collmux's wrapper, which
 * fails such a call with its error as before. */
static void *const self_ref = (void *)&self_ref;

static int relocated(void) { return *(void *const volatile *)&self_ref == (void *)&self_ref; }

/* an address from a dynamic entry: the loader made it absolute (glibc), or
 * it is still relative to the object's base */
static const void *dyn_ptr(const struct dl_phdr_info *o, ElfW(Addr) p) { return (const void *)(p < o->dlpi_addr ? o->dlpi_addr + p : p); }

/* Whether object o defines the symbol name (its dynamic symbol table,
 * through its GNU or SysV hash table). */
static int defines(const struct dl_phdr_info *o, const char *name)
{
	const ElfW(Dyn) *d = NULL;
	for (int i = 0; i < o->dlpi_phnum; i++)
		if (o->dlpi_phdr[i].p_type == PT_DYNAMIC)
			d = (const ElfW(Dyn) *)(o->dlpi_addr + o->dlpi_phdr[i].p_vaddr);
	const ElfW(Sym) *sym = NULL;
	const char *str = NULL;
	const uint32_t *gnu = NULL, *sysv = NULL;
	for (; d && d->d_tag != DT_NULL; d++)
		switch (d->d_tag) {
		case DT_SYMTAB: sym = dyn_ptr(o, d->d_un.d_ptr); break;
		case DT_STRTAB: str = dyn_ptr(o, d->d_un.d_ptr); break;
		case DT_GNU_HASH: gnu = dyn_ptr(o, d->d_un.d_ptr); break;
		case DT_HASH: sysv = dyn_ptr(o, d->d_un.d_ptr); break;
		}
	if (!sym || !str)
		return 0;
#define MATCH(i) (sym[i].st_shndx != SHN_UNDEF && sym[i].st_value != 0 && strcmp(str + sym[i].st_name, name) == 0)
	if (gnu) {
		uint32_t h = 5381;
		for (const unsigned char *c = (const unsigned char *)name; *c; c++)
			h = h * 33 + *c;
		const uint32_t nbucket = gnu[0], first = gnu[1], nbloom = gnu[2];
		const uint32_t *bucket = (const uint32_t *)((const ElfW(Addr) *)(gnu + 4) + nbloom), *chain = bucket + nbucket;
		for (uint32_t i = nbucket ? bucket[h % nbucket] : 0; i >= first && i; i++) {
			if (((chain[i - first] ^ h) >> 1) == 0 && MATCH(i))
				return 1;
			if (chain[i - first] & 1)
				break;
		}
		return 0;
	}
	if (sysv) {
		uint32_t h = 0;
		for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
			h = (h << 4) + *c;
			h ^= (h >> 24) & 0xf0, h &= 0x0fffffff;
		}
		const uint32_t nbucket = sysv[0], *bucket = sysv + 2, *chain = bucket + nbucket;
		for (uint32_t i = nbucket ? bucket[h % nbucket] : 0; i; i = chain[i])
			if (MATCH(i))
				return 1;
	}
	return 0;
#undef MATCH
}

struct absent_query {
	const char *names[2]; /* PMPI_ name of the function, and of its int-count twin (or NULL) */
	int mpi, has;         /* an MPI library is loaded; a loaded object defines one of names */
};

/* every loaded object: an MPI may define PMPI_X in a library of its own
 * (collmux defines no PMPI_ name) */
static int look(struct dl_phdr_info *o, size_t size, void *arg)
{
	(void)size;
	struct absent_query *q = arg;
	q->mpi |= defines(o, "PMPI_Init");
	for (int i = 0; i < 2; i++)
		q->has |= q->names[i] && defines(o, q->names[i]);
	return 0;
}

void *cmx_export_unless_absent(void *wrapper, const char *pname, const char *pbase)
{
	if (!relocated())
		return wrapper;
	struct absent_query q = {{pname, pbase}, 0, 0};
	dl_iterate_phdr(look, &q);
	/* no MPI loaded yet (it may come later, the program's own dlopen): the
	 * wrapper, which asks at the call */
	return !q.mpi || q.has ? wrapper : NULL;
}
