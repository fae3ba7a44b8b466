//go:build collmux_lib

/* api.c: the functions declared in include/collmux.h. */
#include <stdio.h>
#include <stdlib.h>

#include "_cgo_export.h" /* before cmx.h: goexports.h must agree with it */
#include "cmx.h"
#include "collmux.h" /* what this file implements */

/* COLLMUX_VERSION comes from the file VERSION through CMakeLists.txt, as a
 * bare token (0.1.0) that is stringified here; a plain `go build` has none. */
#ifndef COLLMUX_VERSION
#define COLLMUX_VERSION devel
#endif
#define CMX_STR_(x) #x
#define CMX_STR(x) CMX_STR_(x)

/* A what(1) ident: `collmux version` reads the library's version from the
 * file by this marker instead of loading it (a second Go runtime in the
 * tool's process would not work). The marker is cmd/collmux's libMarker. */
#define CMX_IDENT_MARKER "@(#)collmux "
static const char cmx_ident[] = CMX_IDENT_MARKER CMX_STR(COLLMUX_VERSION);

CMX_EXPORT const char *collmux_version(void) { return cmx_ident + sizeof CMX_IDENT_MARKER - 1; }

/* The digest of the C headers the library was built from
 * (scripts/build-lib.sh), which tests/build_test.go compares with the
 * headers in the tree: a stale build shows. */
#ifndef CMX_HEADERS
#define CMX_HEADERS none
#endif
__attribute__((used)) static const char cmx_headers_ident[] = "@(#)collmux-headers " CMX_STR(CMX_HEADERS);

CMX_EXPORT const char *collmux_mpi_abi(void)
{
	static const char *names[] = {"unknown", "mpi-abi", "openmpi", "mpich"};
	return __atomic_load_n(&cmx_state.ready, __ATOMIC_ACQUIRE) ? names[cmx_abi.abi] : names[0];
}

/* MPIX_Query_cuda_support, as CUDA-aware MPIs answer it (PyTorch and
 * others ask before they pass a device buffer): 1 while collmux carries
 * device buffers, which it does wherever the CUDA driver is present;
 * otherwise (COLLMUX_DISABLE, no driver) the MPI's own answer. */
CMX_EXPORT int MPIX_Query_cuda_support(void)
{
	cmx_init();
	if (!cmx_cfg.disable && cmx_cuda_present)
		return 1;
	int (*own)(void) = (int (*)(void))cmx_mpi_sym("MPIX_Query_cuda_support");
	return own ? own() : 0;
}

CMX_EXPORT int collmux_comm_states(void) { return __atomic_load_n(&cmx_live_comms, __ATOMIC_RELAXED); }

CMX_EXPORT int collmux_set_rules(const char *rules)
{
	cmx_init();
	if (cmx_cfg.disable || !cmx_mpi_setup())
		return -1;
	uint32_t hash = 0;
	/* the new rules get a table of their own, published whole once filled;
	 * the old one stays valid for calls still reading it */
	cmx_route_table_t *table = calloc(1, sizeof *table);
	int ok = cmx_go_stage_rules((char *)(rules ? rules : ""), &hash) == 0 && table;
	int agreed = cmx_rules_agree(ok, hash);
	cmx_go_commit_rules(agreed, &cmx_cfg, (cmx_routes *)table);
	if (agreed)
		__atomic_store_n(&cmx_route_table, table, __ATOMIC_RELEASE);
	else
		free(table);
	if (!agreed) {
		int rank = 0;
		cmx_px.Comm_rank(cmx_abi.comm_world, &rank);
		if (rank == 0)
			fprintf(stderr, "collmux: collmux_set_rules: %s; the rules in force are unchanged\n",
				ok ? "the ranks passed different rules" : "the rules do not parse on some rank");
		return -1;
	}
	cmx_set_fast_paths();
	__atomic_add_fetch(&cmx_routes_gen, 1, __ATOMIC_RELEASE);
	return 0;
}
