/*
 * gatetest: collmux's arrival gate (gate/gate.c, compiled into this
 * program) over real MPI, without a GPU. The few collmux internals the
 * gate uses are provided here, over MPI where they communicate. Run on 3
 * ranks with one mode:
 *   order    under MPI_THREAD_MULTIPLE, over 200 calls whose ranks arrive
 *            in a different order each time, no rank passes a call before
 *            every rank has entered it
 *   timeout  rank 1 skips call 2: ranks 0 and 2 fail it after
 *            COLLMUX_TIMEOUT (1 s here), naming rank 1; rank 1 reaching it
 *            later fails at once; call 3 then fails at once on every rank
 *   split    the ranks' deadlines differ: rank 0 enters call 2 first and
 *            gives up at its deadline; rank 1 arrives after that but
 *            before rank 2's deadline. Every rank must fail the call (one
 *            verdict for all): rank 2 going ahead would wait on the GPU
 *            for a rank 0 that is gone
 *   single   below MPI_THREAD_MULTIPLE there is no gate
 *   nodes    ranks on two nodes: no gate
 * Prints "gatetest MODE: N ranks, F failures".
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmx.h"

/* ---- what gate.c takes from the rest of collmux ---- */
cmx_pmpi_extra_t cmx_px;
cmx_abi_t cmx_abi;
cmx_config cmx_cfg;
const char *const cmx_fn_names[CMX_NFN] = {[CMX_FN_ALLREDUCE] = "MPI_Allreduce"};

void cmx_log(int level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "collmux[%d]: ", level);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* one node, or as many as GATETEST_NODES says (as the host-name
 * allgather of dispatch.c would find them) */
int cmx_comm_shape(cmx_comm *c)
{
	const char *n = getenv("GATETEST_NODES");
	c->nodes = n && atoi(n) > 1 ? atoi(n) : 1;
	return 1;
}

int cmx_comm_agree(const cmx_comm *c, int ok)
{
	MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, (MPI_Comm)c->handle);
	return ok;
}

/* ---- the test ---- */
static int rank, size, failures;

static void fail(const char *what)
{
	failures++;
	fprintf(stderr, "gatetest: rank %d: %s\n", rank, what);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t); /* one clock for every process of the node */
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "order";
	int provided;
	MPI_Init_thread(&argc, &argv, strcmp(mode, "single") == 0 ? MPI_THREAD_SINGLE : MPI_THREAD_MULTIPLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	*(void **)&cmx_px.Allgather = (void *)PMPI_Allgather;
	*(void **)&cmx_px.Bcast = (void *)PMPI_Bcast;
	*(void **)&cmx_px.Query_thread = (void *)PMPI_Query_thread;
	cmx_abi.byte = (cmx_h)MPI_BYTE;
	cmx_abi.thread_multiple = MPI_THREAD_MULTIPLE; /* as collmux's start-up sets it from the ABI */
	cmx_cfg.timeout = 1;
	cmx_comm c = {.handle = (cmx_h)MPI_COMM_WORLD, .size = size, .rank = rank};
	cmx_args a = {.fn = CMX_FN_ALLREDUCE};
	cmx_gate *g = cmx_comm_gate(&c);
	const int want_gate = (strcmp(mode, "order") == 0 || strcmp(mode, "timeout") == 0 || strcmp(mode, "split") == 0) &&
			      provided == MPI_THREAD_MULTIPLE;
	if ((g != NULL) != want_gate)
		fail(g ? "a gate where none belongs" : "no gate");
	if (strcmp(mode, "single") != 0 && provided != MPI_THREAD_MULTIPLE && rank == 0)
		printf("gatetest %s: skipped: MPI_THREAD_MULTIPLE not provided\n", mode);

	if (g && strcmp(mode, "order") == 0) {
		enum { CALLS = 200 };
		double arrived[CALLS], passed[CALLS];
		for (int k = 0; k < CALLS; k++) {
			usleep((useconds_t)((rank * 7 + k * 13) % 5) * 200); /* a different order each call */
			arrived[k] = now();
			cmx_gate_arrive(g);
			if (!cmx_gate_wait(g, &a, 1))
				fail("a call failed");
			passed[k] = now();
		}
		MPI_Allreduce(MPI_IN_PLACE, arrived, CALLS, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		MPI_Allreduce(MPI_IN_PLACE, passed, CALLS, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
		for (int k = 0; k < CALLS; k++)
			if (passed[k] < arrived[k]) {
				char m[96];
				snprintf(m, sizeof m, "call %d passed %.0f us before the last rank arrived", k, (arrived[k] - passed[k]) * 1e6);
				fail(m);
				break;
			}
	}

	if (g && strcmp(mode, "timeout") == 0) {
		cmx_gate_arrive(g);
		if (!cmx_gate_wait(g, &a, 1))
			fail("call 1 failed");
		if (rank == 1)
			sleep(2); /* skips call 2 while the others time out, then makes it */
		double t0 = now();
		cmx_gate_arrive(g);
		int ok = cmx_gate_wait(g, &a, 1);
		double waited = now() - t0;
		if (ok)
			fail("call 2 passed without rank 1");
		if (rank != 1 && (waited < 0.9 || waited > 5))
			fail("call 2 did not wait for COLLMUX_TIMEOUT");
		if (rank == 1 && waited > 0.5)
			fail("call 2 waited on the rank that arrived after the others gave up");
		MPI_Barrier(MPI_COMM_WORLD);
		t0 = now();
		cmx_gate_arrive(g);
		if (cmx_gate_wait(g, &a, 1) || now() - t0 > 0.5)
			fail("call 3 did not fail at once");
	}

	if (g && strcmp(mode, "split") == 0) {
		cmx_gate_arrive(g);
		if (!cmx_gate_wait(g, &a, 1))
			fail("call 1 failed");
		MPI_Barrier(MPI_COMM_WORLD);
		/* rank 0 at 0 s (deadline 1 s), rank 2 at 0.4 s (deadline 1.4 s), rank 1 at 1.2 s */
		usleep(rank == 0 ? 0 : rank == 2 ? 400000 : 1200000);
		cmx_gate_arrive(g);
		int ok = cmx_gate_wait(g, &a, 1), all[64] = {0};
		MPI_Allgather(&ok, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
		for (int p = 0; p < size && p < 64; p++)
			if (all[p] != all[0]) {
				fail("the ranks disagree on whether call 2 goes ahead");
				break;
			}
		if (ok)
			fail("call 2 went ahead although rank 0 had given up on it");
	}

	if (!g && !cmx_gate_wait(NULL, &a, 1))
		fail("without a gate, a ready rank did not pass");
	cmx_gate_close(&c);
	int total = 0;
	MPI_Reduce(&failures, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("gatetest %s: %d ranks, %d failures\n", mode, size, total);
	MPI_Finalize();
	return total != 0;
}
