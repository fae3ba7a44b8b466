//go:build collmux_lib

/*
 * setup.c: the router's set-up once MPI is initialised: the keyval that
 * carries collmux's state of each communicator (whose deletion releases
 * every backend's), and the finalize hook, which lets the backends go and
 * writes the statistics and the trace. Made by the first call that needs
 * it (MPI_Init's return, or a call routed before that).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cmx.h"

static int copy_nothing(cmx_h comm, int keyval, void *extra, void *in, void *out, int *flag)
{
	(void)comm, (void)keyval, (void)extra, (void)in, (void)out;
	*flag = 0; /* a duplicated communicator starts without collmux state */
	return 0;
}

static int comm_state_deleted(cmx_h comm, int keyval, void *val, void *extra)
{
	(void)comm, (void)keyval, (void)extra;
	cmx_backends_release(val);
	free(val);
	__atomic_fetch_sub(&cmx_live_comms, 1, __ATOMIC_RELAXED);
	return 0;
}

/* Statistics at finalize: the sums over MPI_COMM_WORLD reach every rank
 * (they name the cells any rank used), then one gather brings rank 0 each
 * rank's host name and its counters of those cells alone: rank 0 holds
 * ranks × (CMX_HOSTLEN + 24 × cells used) bytes, not the whole table per
 * rank. One snapshot feeds both, so the per-rank counters add up to the
 * sums. */
static void report_stats(void)
{
	enum { NCELL = CMX_NCOLL * CMX_NBACKEND * CMX_NBUCKET, HOSTW = CMX_HOSTLEN / 8 };
	static cmx_stat mine[NCELL], total[NCELL];
	static int32_t rules[NCELL];
	int rank = 0, size = 1;
	cmx_px.Comm_rank(cmx_abi.comm_world, &rank);
	cmx_px.Comm_size(cmx_abi.comm_world, &size);
	cmx_energy_flush();
	memcpy(mine, cmx_stats, sizeof mine);
	_Static_assert(sizeof(cmx_stat) == 4 * sizeof(uint64_t), "cmx_stat is four counters");
	if (cmx_px.Allreduce(mine, total, 4 * NCELL, cmx_abi.uint64, cmx_abi.op_sum, cmx_abi.comm_world) != 0 ||
	    cmx_px.Reduce(cmx_stat_rule, rules, NCELL, cmx_abi.int_, cmx_abi.op_max, 0, cmx_abi.comm_world) != 0)
		return;
	int used = 0;
	for (int i = 0; i < NCELL; i++)
		used += total[i].calls != 0;
	int words = HOSTW + 3 * used;
	uint64_t *row = calloc((size_t)words, sizeof *row), *all = rank == 0 ? malloc((size_t)size * words * sizeof *all) : NULL;
	if (!row || (rank == 0 && !all))
		cmx_fatal("no memory for the statistics of %d ranks", size); /* the gather needs every rank */
	cmx_node_name(rank, size, (char *)row, CMX_HOSTLEN);
	for (int i = 0, j = HOSTW; i < NCELL; i++)
		if (total[i].calls) {
			row[j++] = mine[i].calls;
			row[j++] = mine[i].bytes;
			row[j++] = mine[i].ns;
		}
	if (cmx_px.Gather(row, words, cmx_abi.uint64, all, words, cmx_abi.uint64, 0, cmx_abi.comm_world) == 0 && rank == 0)
		cmx_go_report(&total[0].calls, rules, size, all, used);
	free(row);
	free(all);
}

/* MPI deletes the attributes of MPI_COMM_SELF first thing in MPI_Finalize,
 * whichever binding called it, while MPI is still fully usable. */
static int finalize_hook(cmx_h comm, int keyval, void *val, void *extra)
{
	(void)comm, (void)keyval, (void)val, (void)extra;
	cmx_req_finalize();
	cmx_backends_finalize();
	if (cmx_cfg.stats)
		report_stats();
	if (cmx_cfg.trace)
		cmx_trace_write();
	__atomic_store_n(&cmx_state.finalized, 1, __ATOMIC_RELEASE);
	return 0;
}

/* Log lines name the rank in MPI_COMM_WORLD once MPI can tell it. */
void cmx_learn_rank(void)
{
	int rank = -1;
	if (!__atomic_load_n(&cmx_state.log_rank, __ATOMIC_RELAXED) && cmx_px.Comm_rank(cmx_abi.comm_world, &rank) == 0 && rank >= 0)
		__atomic_store_n(&cmx_state.log_rank, rank + 1, __ATOMIC_RELAXED);
}

static pthread_mutex_t setup_mu = PTHREAD_MUTEX_INITIALIZER;

int cmx_mpi_setup(void)
{
	if (CMX_LIKELY(__atomic_load_n(&cmx_state.mpi_set, __ATOMIC_ACQUIRE)))
		return !cmx_state.finalized;
	int ok = 0;
	pthread_mutex_lock(&setup_mu);
	if (cmx_state.mpi_set) {
		ok = !cmx_state.finalized;
	} else if (cmx_mpi_usable()) {
		cmx_px.Comm_create_keyval(copy_nothing, comm_state_deleted, &cmx_state.comm_keyval, NULL);
		cmx_px.Comm_create_keyval(copy_nothing, finalize_hook, &cmx_state.self_keyval, NULL);
		cmx_state.req_keyval_ok = cmx_px.Comm_create_keyval(copy_nothing, cmx_req_comm_freed, &cmx_state.req_keyval, NULL) == 0;
		cmx_px.Comm_set_attr(cmx_abi.comm_self, cmx_state.self_keyval, NULL);
		cmx_learn_rank();
		cmx_mpi_probe(); /* before any call is routed: it changes how datatypes decode */
		__atomic_store_n(&cmx_state.mpi_set, 1, __ATOMIC_RELEASE);
		ok = 1;
	}
	pthread_mutex_unlock(&setup_mu);
	return ok;
}
