//go:build collmux_lib

/*
 * trace.c: COLLMUX_TRACE, a timeline of the calls that reach the router.
 * Each call takes one slot of a buffer allocated once at MPI_Init (an
 * atomic index, so threads under MPI_THREAD_MULTIPLE never share a slot);
 * when it is full, later calls are only counted. The finalize hook hands
 * the buffer to Go, which writes <COLLMUX_TRACE>.<rank>.json.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cmx.h"

static cmx_trace_ev *events;
static uint64_t next_ev;  /* slots claimed, atomically; past CMX_TRACE_MAX: dropped calls */
static uint64_t epoch;    /* CLOCK_MONOTONIC at the instant every rank calls 0 */
static int64_t epoch_real; /* CLOCK_REALTIME then */
static int rank = -1, ranks;
static char host[CMX_HOSTLEN];
static __thread int32_t my_tid;

/* The shared instant: a collective over MPI_COMM_WORLD, then rank 0's
 * monotonic time for every rank on its node (CLOCK_MONOTONIC is one clock
 * per node, so those ranks align exactly); a rank on another node takes
 * its own clock as it leaves the broadcast, off by the skew with which
 * ranks leave it (microseconds). Every rank must call this, since all
 * ranks read COLLMUX_TRACE alike (as they must COLLMUX_STATS). */
void cmx_trace_start(void)
{
	enum { HW = CMX_HOSTLEN / 8 };
	uint64_t msg[1 + HW];
	struct timespec rt;
	if (rank >= 0)
		return;
	events = calloc(CMX_TRACE_MAX, sizeof *events); /* pages are touched only as calls fill them */
	if (!events)
		cmx_log(0, "COLLMUX_TRACE: no memory for %u events: no trace", CMX_TRACE_MAX);
	cmx_px.Comm_rank(cmx_abi.comm_world, &rank);
	cmx_px.Comm_size(cmx_abi.comm_world, &ranks);
	cmx_node_name(0, 1, host, sizeof host);
	memset(msg, 0, sizeof msg);
	memcpy(&msg[1], host, sizeof host);
	int dummy = 0, out = 0;
	cmx_px.Allreduce(&dummy, &out, 1, cmx_abi.int_, cmx_abi.op_max, cmx_abi.comm_world);
	msg[0] = cmx_now_ns();
	cmx_px.Bcast(msg, 1 + HW, cmx_abi.uint64, 0, cmx_abi.comm_world);
	uint64_t now = cmx_now_ns();
	clock_gettime(CLOCK_REALTIME, &rt);
	int64_t real = (int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec;
	if (memcmp(&msg[1], host, sizeof host) == 0)
		epoch = msg[0], epoch_real = real - (int64_t)(now - msg[0]);
	else
		epoch = now, epoch_real = real;
}

void cmx_trace_add(const cmx_args *a, int backend, int64_t bytes, uint64_t t0, uint64_t t1, int rc)
{
	if (CMX_UNLIKELY(!events))
		return;
	uint64_t i = __atomic_fetch_add(&next_ev, 1, __ATOMIC_RELAXED);
	if (i >= CMX_TRACE_MAX)
		return;
	if (CMX_UNLIKELY(!my_tid))
		my_tid = (int32_t)syscall(SYS_gettid);
	cmx_trace_ev *e = &events[i];
	e->t0 = t0, e->dur = t1 - t0, e->bytes = bytes < 0 ? 0 : (uint64_t)bytes;
	e->tid = my_tid, e->rc = rc;
	e->fn = (int16_t)a->fn, e->coll = (uint8_t)a->coll, e->backend = (uint8_t)backend;
	e->mem = (uint8_t)a->mem, e->form = (uint8_t)a->form;
}

/* In MPI_Finalize, when no other thread may be calling MPI. */
void cmx_trace_write(void)
{
	if (!events || rank < 0)
		return;
	uint64_t n = __atomic_load_n(&next_ev, __ATOMIC_ACQUIRE);
	uint64_t kept = n < CMX_TRACE_MAX ? n : CMX_TRACE_MAX;
	cmx_go_trace(events, kept, n - kept, rank, ranks, host, epoch_real, epoch);
	free(events);
	events = NULL;
}
