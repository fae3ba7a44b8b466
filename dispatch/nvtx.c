//go:build collmux_lib

/*
 * nvtx.c: NVTX ranges around the routed calls, so that Nsight Systems
 * shows each call with its bytes and backend. No NVTX header or library is
 * needed: a tool that records NVTX names its injection library in
 * NVTX_INJECTION64_PATH, and an NVTX v3 client dlopens it and passes its
 * InitializeInjectionNvtx2 a function that hands out export tables. From
 * the callbacks table the tool asks, module by module, for the addresses
 * of the client's function slots and writes its own functions into them.
 * collmux calls two slots of the core module, RangePushA and RangePop;
 * without a tool that fills both, cmx_nvtx_on stays 0 and the router pays
 * one load per backend it tries.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "cmx.h"

typedef void (*nvtx_fn)(void);

/* The modules (NvtxCallbackModule, 1..6) and how many slots each has
 * (index 0 unused): core, CUDA driver, OpenCL, CUDA runtime, core2 (domains),
 * sync. A tool may ask for any of them, so each gets slots it may fill;
 * only the core's RangePushA and RangePop are ever called. */
enum { MOD_CORE = 1, NMOD = 7, MAXSLOTS = 16 };
static const unsigned mod_slots[NMOD] = {0, 16, 9, 15, 7, 16, 7};
enum { CORE_RANGE_PUSH_A = 9, CORE_RANGE_POP = 11 };  /* NvtxCallbackIdCore */
enum { ETID_CALLBACKS = 1, ETID_VERSIONINFO = 3 };     /* NvtxExportTableID */
enum { NVTX_API_VERSION = 3 };

static nvtx_fn slots[NMOD][MAXSLOTS];
/* each module's table: the address of each slot, NULL at 0 and after the
 * last, as the tool reads them */
static nvtx_fn *tables[NMOD][MAXSLOTS + 1];

static int get_module_table(int module, nvtx_fn ***table, unsigned *size)
{
	if (module < MOD_CORE || module >= NMOD)
		return 0;
	if (table)
		*table = tables[module];
	if (size)
		*size = mod_slots[module];
	return 1;
}

static void set_tool_version(uint32_t v) { (void)v; }

static const struct {
	size_t size;
	int (*get_module_table)(int, nvtx_fn ***, unsigned *);
} callbacks = {sizeof callbacks, get_module_table};

static const struct {
	size_t size;
	uint32_t version, reserved;
	void (*set_tool_version)(uint32_t);
} version_info = {sizeof version_info, NVTX_API_VERSION, 0, set_tool_version};

static const void *export_table(uint32_t id)
{
	switch (id) {
	case ETID_CALLBACKS:
		return &callbacks;
	case ETID_VERSIONINFO:
		return &version_info;
	}
	return NULL;
}

int cmx_nvtx_on;

void cmx_nvtx_load(void)
{
	const char *path = getenv("NVTX_INJECTION64_PATH");
	if (!path || !path[0])
		return;
	for (int m = MOD_CORE; m < NMOD; m++)
		for (unsigned i = 1; i < mod_slots[m]; i++)
			tables[m][i] = &slots[m][i];
	void *h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
	if (!h) {
		cmx_log(CMX_LOG_WARN, "NVTX_INJECTION64_PATH: %s: no NVTX ranges", dlerror());
		return;
	}
	int (*init)(const void *(*)(uint32_t));
	*(void **)&init = dlsym(h, "InitializeInjectionNvtx2");
	if (!init || !init(export_table)) {
		cmx_log(CMX_LOG_WARN, "NVTX_INJECTION64_PATH=%s: %s: no NVTX ranges", path,
			init ? "its InitializeInjectionNvtx2 failed" : "no InitializeInjectionNvtx2");
		dlclose(h);
		return;
	}
	cmx_nvtx_on = slots[MOD_CORE][CORE_RANGE_PUSH_A] && slots[MOD_CORE][CORE_RANGE_POP];
}

/* "MPI_Allreduce 16 MiB nccl": sizes that are whole KiB, MiB or GiB in
 * those units, others in bytes; none where the size is not known. */
void cmx_nvtx_push(const cmx_args *a, int backend, int64_t bytes)
{
	static const char *const backend_names[CMX_NBACKEND] = {
	    [CMX_BACKEND_MPI] = "mpi", [CMX_BACKEND_NCCL] = "nccl", [CMX_BACKEND_FUSED] = "fused", [CMX_BACKEND_STAGED] = "staged"};
	static const char *const units[] = {"B", "KiB", "MiB", "GiB"};
	char name[96];
	int u = 0;
	int64_t v = bytes;
	while (u < 3 && v >= 1024 && v % 1024 == 0)
		v /= 1024, u++;
	if (bytes < 0)
		snprintf(name, sizeof name, "%s %s", cmx_fn_names[a->fn], backend_names[backend]);
	else
		snprintf(name, sizeof name, "%s %lld %s %s", cmx_fn_names[a->fn], (long long)v, units[u], backend_names[backend]);
	((int (*)(const char *))slots[MOD_CORE][CORE_RANGE_PUSH_A])(name);
}

void cmx_nvtx_pop(void) { ((int (*)(void))slots[MOD_CORE][CORE_RANGE_POP])(); }
