//go:build collmux_lib

/*
 * init.c: the one-time set-up of collmux inside an MPI process: the real
 * MPI's functions (mpi/pmpi.c) before PMPI_Init; after it, the
 * configuration (Go, whose runtime starts then: internal/cmx/gostart.c)
 * and the CUDA driver; then, as MPI_Init returns, the router's set-up
 * (dispatch/setup.c) and the check that every rank routes alike.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cmx.h"

/* A boolean variable read before Go is entered, in the grammar Go's
 * configuration reader uses for every COLLMUX_* boolean (dispatch.boolVar):
 * 1/0, true/false, yes/no, on/off in any case; unset or empty is false. */
static int env_bool(const char *name)
{
	static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no", "off"};
	const char *v = getenv(name);
	if (!v || !v[0])
		return 0;
	for (int i = 0; i < 4; i++) {
		if (strcasecmp(v, yes[i]) == 0)
			return 1;
		if (strcasecmp(v, no[i]) == 0)
			return 0;
	}
	cmx_config_error("%s=%s: want a boolean (1/0, true/false, yes/no, on/off)", name, v);
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static pthread_once_t mpi_once = PTHREAD_ONCE_INIT;
static void *mpi_load_thread(void *unused)
{
	(void)unused;
	pthread_once(&mpi_once, cmx_mpi_load);
	return NULL;
}

/* The real MPI's functions, found before PMPI_Init is called, off the main
 * thread's malloc arena (aside.c says why: the lookups try names that may
 * be absent) and without starting the Go runtime (internal/cmx/gostart.c says why): on
 * a thread of its own, or here if none can be made. */
void cmx_mpi_early(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, mpi_load_thread, NULL) == 0) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 120;
		if (pthread_timedjoin_np(t, NULL, &until) == ETIMEDOUT) {
			/* its lookups wait for the dynamic loader's lock */
			cmx_log(0, "still waiting after 120 s to find the MPI's functions (MPI_Init called from a library constructor "
				   "waits forever)");
			pthread_join(t, NULL);
		}
	}
	pthread_once(&mpi_once, cmx_mpi_load);
}

/* Made aside (aside.c), off the main thread's malloc arena: finding the
 * CUDA driver's functions tries names that may be absent. */
static void load(void *unused)
{
	(void)unused;
	pthread_once(&mpi_once, cmx_mpi_load);
	cmx_go_init(&cmx_cfg, cmx_abi.abi, (cmx_routes *)cmx_route_table);
	cmx_cuda_load();
	cmx_nvtx_load();
}

static void init_once_fn(void)
{
	/* COLLMUX_DISABLE is read here, not in Go, so that a disabled library
	 * never starts the Go runtime. */
	if (env_bool("COLLMUX_DISABLE")) {
		cmx_cfg.disable = 1;
		pthread_once(&mpi_once, cmx_mpi_load);
	} else {
		cmx_aside(load, NULL);
	}
	cmx_set_fast_paths();
	__atomic_store_n(&cmx_state.ready, 1, __ATOMIC_RELEASE);
}

/* Per-call work that is collective or counted (statistics, timelines, the agreement
 * check, per-communicator shapes) needs every call on every rank to reach
 * the dispatcher: a rank that has not initialised CUDA must not forward a
 * host call that another rank dispatches. Without such work and without a
 * CUDA driver no call can leave MPI; with a driver, host calls still
 * forward at once until CUDA is up. */
void cmx_set_fast_paths(void)
{
	int per_call = cmx_cfg.stats || cmx_cfg.trace || cmx_cfg.check || cmx_cfg.shape_rules;
	cmx_state.forward_only = cmx_cfg.disable || (!per_call && !cmx_cuda_present);
	cmx_state.host_fast = !cmx_cfg.disable && !per_call;
	cmx_state.fortran_direct = cmx_abi.abi == CMX_ABI_OPENMPI && !cmx_state.forward_only && cmx_px.Comm_f2c && cmx_px.Type_f2c &&
				   cmx_px.Op_f2c && cmx_px.Status_c2f && cmx_px.Request_c2f && cmx_px.Request_f2c && cmx_px.Info_f2c;
}

void cmx_init(void) { pthread_once(&init_once, init_once_fn); }

/* Every rank must route alike, or a collective would hang with one rank in
 * NCCL and another in MPI: the rule sets (defaults, tuning table,
 * COLLMUX_RULES) are compared over MPI_COMM_WORLD once, at MPI_Init, the
 * one point every rank is known to reach. */
int cmx_rules_agree(int ok, uint32_t hash)
{
	int h = (int)(hash & 0x7fffffff), mine[3] = {ok, h, ~h}, min[3];
	if (cmx_px.Allreduce(mine, min, 3, cmx_abi.int_, cmx_abi.op_min, cmx_abi.comm_world) != 0)
		return 0;
	return min[0] && min[1] == ~min[2]; /* min(h) == max(h): one hash everywhere */
}

static void check_same_rules(void)
{
	int rank = 0;
	cmx_px.Comm_rank(cmx_abi.comm_world, &rank);
	/* COLLMUX_OVERLAP picks the route planes too */
	if (!cmx_rules_agree(1, cmx_cfg.rules_hash ^ (cmx_cfg.overlap ? 0x2c6f7665u : 0)))
		cmx_config_error("rank %d: the ranks were started with different routing rules (COLLMUX_RULES, COLLMUX_OVERLAP, "
			  "COLLMUX_TUNING or tuning tables differ); they must be the same everywhere", rank);
}

/* MPI_Init and MPI_Init_thread are intercepted to set collmux up on every
 * rank at the same point, so that the finalize hook (which gathers
 * statistics over MPI_COMM_WORLD) is in place everywhere; and, with
 * COLLMUX_LOG=info, for rank 0 to say once what collmux found. */
/* A program that ends without MPI_Finalize loses collmux's report (and
 * leaves the MPI in an undefined state): say so, where anyone listens. */
static void at_exit(void)
{
	if (!cmx_state.mpi_set || cmx_state.finalized || !(cmx_cfg.stats || cmx_cfg.trace || cmx_cfg.log >= CMX_LOG_INFO))
		return;
	if (cmx_mpi_usable())
		cmx_log(0, "the program ended without MPI_Finalize: %s",
			cmx_cfg.stats || cmx_cfg.trace ? "no statistics or trace were written" : "collmux did not shut down");
}

static void register_at_exit(void) { atexit(at_exit); }

/* The rank first, so that the set-up's own lines (a misspelt variable's
 * warning, a configuration error) name it, as every line after MPI_Init
 * does. */
void cmx_set_up(int rc)
{
	if (rc == 0)
		cmx_learn_rank();
	cmx_init();
}

int cmx_after_init(int rc)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	if (rc == 0)
		pthread_once(&once, register_at_exit);
	if (rc != 0 || cmx_cfg.disable)
		return rc;
	cmx_learn_rank();
	if (!cmx_state.forward_only && cmx_mpi_setup()) {
		check_same_rules();
		if (cmx_cfg.trace)
			cmx_trace_start();
	}
	int size = 0;
	if (cmx_cfg.log >= CMX_LOG_INFO && cmx_log_rank() == 0 && cmx_px.Comm_size(cmx_abi.comm_world, &size) == 0)
		cmx_go_started(size);
	return rc;
}

/* The MPI initialises before collmux's set-up, which starts the Go
 * runtime (internal/cmx/gostart.c): the MPI's first allocations and
 * mappings are made as they are without collmux. */
CMX_EXPORT int MPI_Init(int *argc, char ***argv)
{
	cmx_mpi_early();
	int rc = cmx_px.Init(argc, argv);
	cmx_set_up(rc);
	return cmx_after_init(rc);
}

CMX_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	cmx_mpi_early();
	int rc = cmx_px.Init_thread(argc, argv, required, provided);
	cmx_set_up(rc);
	return cmx_after_init(rc);
}
