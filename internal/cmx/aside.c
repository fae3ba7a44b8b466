//go:build collmux_lib

/*
 * aside.c: collmux's start-up and every call from its C into Go run on a
 * thread of the Go runtime, "aside", while the calling thread waits.
 *
 * Why: glibc's malloc gives the main thread the main arena, which the MPI
 * allocates from, per call on some paths (the schedules of Open MPI's and
 * MPICH's nonblocking collectives). collmux's start-up looks up symbols the
 * MPI may lack (a failing dlsym or dlopen allocates its message), and the
 * first call into Go on a thread the Go runtime did not start makes it ask
 * for that thread's stack bounds (pthread_getattr_np, which on the main
 * thread reads /proc/self/maps through stdio). Made on the main thread,
 * these allocations and frees leave chunks in the main arena among the
 * MPI's own and move where the MPI's later allocations fall: that alone
 * made an 8-byte Iallreduce + Wait several per cent slower or faster than
 * without collmux (docs/results/host-passthrough-2026-11-30-heap-layout.md).
 * A thread the Go runtime started draws from an arena of its own, and
 * calls into Go from it are plain callbacks; the main arena is left as a
 * bare Go library leaves it.
 *
 * Nothing run aside calls the MPI: MPI calls stay on the program's threads,
 * whatever thread level it asked for.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "cmx.h"

struct job {
	void (*fn)(void *);
	void *arg;
	int done;
	char *fatal; /* a configuration error Go met running it (cmx_go_fatal) */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t posted = PTHREAD_COND_INITIALIZER, finished = PTHREAD_COND_INITIALIZER;
static struct job *slot; /* the job posted or running; NULL when the server is free */
static int forked;       /* in a child of fork, which has no server */
static __thread int serving;

static void in_child(void)
{
	pthread_mutex_init(&mu, NULL);
	pthread_cond_init(&posted, NULL);
	pthread_cond_init(&finished, NULL);
	slot = NULL;
	forked = 1;
}

int cmx_forked(void) { return forked; }

/* At load, so that a child forked before the server started knows it has
 * none (glibc keeps the first handlers without allocating). */
__attribute__((constructor)) static void watch_fork(void) { pthread_atfork(NULL, NULL, in_child); }

/* The server: a goroutine started by package main's init calls this and
 * never returns (capi/main.go). */
void cmx_aside_serve(void)
{
	serving = 1;
	pthread_mutex_lock(&mu);
	for (;;) {
		while (!slot || slot->done)
			pthread_cond_wait(&posted, &mu);
		struct job *j = slot;
		pthread_mutex_unlock(&mu);
		j->fn(j->arg);
		pthread_mutex_lock(&mu);
		j->done = 1;
		slot = NULL;
		pthread_cond_broadcast(&finished);
	}
}

/* A thread waiting here cannot be cancelled (it would leave mu held and
 * its job on a dead stack). A wait that lasts two minutes says so once: a
 * first call from a library constructor, made under the dynamic loader's
 * lock, which the set-up's symbol lookups need too, waits forever. */
void cmx_aside(void (*fn)(void *), void *arg)
{
	struct job j = {fn, arg, 0, NULL};
	int cancel;
	if (serving) { /* a job's own call into Go */
		fn(arg);
		return;
	}
	cmx_go_start(); /* the server is a goroutine */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	pthread_mutex_lock(&mu);
	if (forked) {
		pthread_mutex_unlock(&mu);
		fn(arg);
	} else {
		while (slot)
			pthread_cond_wait(&finished, &mu);
		slot = &j;
		pthread_cond_signal(&posted);
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 120;
		while (!j.done)
			if (pthread_cond_timedwait(&finished, &mu, &until) == ETIMEDOUT) {
				cmx_log(0, "still waiting after 120 s for collmux's set-up thread (compiling kernels takes a while; "
					   "a first MPI call from a library constructor waits forever)");
				until.tv_sec += 1 << 30;
			}
		pthread_mutex_unlock(&mu);
	}
	pthread_setcancelstate(cancel, NULL);
	if (j.fatal)
		cmx_config_error("%s", j.fatal);
}

/* Go's configuration errors (capi/main.go's fatalf) stop the job from the
 * thread that waits for the job, which may call the MPI (MPI_Abort), as
 * this one may not; this thread stays here while the process ends. */
void cmx_go_fatal(char *msg)
{
	if (!serving)
		cmx_config_error("%s", msg);
	pthread_mutex_lock(&mu);
	slot->fatal = msg;
	slot->done = 1;
	slot = NULL;
	pthread_cond_broadcast(&finished);
	pthread_mutex_unlock(&mu);
	for (;;)
		pause();
}

/* ---- the calls into Go (goexports.h), each made aside ---- */

struct go_init {
	cmx_config *cfg;
	int abi;
	cmx_routes *table;
};
static void go_init(void *p)
{
	struct go_init *a = p;
	collmux_go_init(a->cfg, a->abi, a->table);
}
void cmx_go_init(cmx_config *cfg, int abi, cmx_routes *table) { cmx_aside(go_init, &(struct go_init){cfg, abi, table}); }

struct go_rules {
	char *s;
	uint32_t *hash;
	int commit, rc;
	cmx_config *cfg;
	cmx_routes *table;
};
static void go_stage_rules(void *p)
{
	struct go_rules *a = p;
	a->rc = collmux_go_stage_rules(a->s, a->hash);
}
int cmx_go_stage_rules(char *s, uint32_t *hash)
{
	struct go_rules a = {.s = s, .hash = hash};
	cmx_aside(go_stage_rules, &a);
	return a.rc;
}
static void go_commit_rules(void *p)
{
	struct go_rules *a = p;
	collmux_go_commit_rules(a->commit, a->cfg, a->table);
}
void cmx_go_commit_rules(int commit, cmx_config *cfg, cmx_routes *table)
{
	cmx_aside(go_commit_rules, &(struct go_rules){.commit = commit, .cfg = cfg, .table = table});
}

struct go_routes {
	int ranks, nodes, rpn, nvl;
	cmx_routes *table;
};
static void go_routes_for(void *p)
{
	struct go_routes *a = p;
	a->table = collmux_go_routes_for(a->ranks, a->nodes, a->rpn, a->nvl);
}
cmx_routes *cmx_go_routes_for(int ranks, int nodes, int rpn, int nvl)
{
	struct go_routes a = {ranks, nodes, rpn, nvl, NULL};
	cmx_aside(go_routes_for, &a);
	return a.table;
}

struct go_fused {
	int arch, driver, rc;
	char *lib, **image;
	size_t *size;
};
static void go_fused_module(void *p)
{
	struct go_fused *a = p;
	a->rc = collmux_go_fused_module(a->arch, a->driver, a->lib, a->image, a->size);
}
int cmx_go_fused_module(int arch, int driver, char *lib, char **image, size_t *size)
{
	struct go_fused a = {arch, driver, 0, lib, image, size};
	cmx_aside(go_fused_module, &a);
	return a.rc;
}
static void go_fused_rejected(void *p) { ((struct go_fused *)p)->rc = collmux_go_fused_rejected(); }
int cmx_go_fused_rejected(void)
{
	struct go_fused a = {0};
	cmx_aside(go_fused_rejected, &a);
	return a.rc;
}

struct go_explain {
	int coll, mem, used, rule, wanted;
	uint64_t bytes;
};
static void go_explain(void *p)
{
	struct go_explain *a = p;
	collmux_go_explain(a->coll, a->mem, a->bytes, a->used, a->rule, a->wanted);
}
void cmx_go_explain(int coll, int mem, uint64_t bytes, int used, int rule, int wanted)
{
	cmx_aside(go_explain, &(struct go_explain){coll, mem, used, rule, wanted, bytes});
}

struct go_report {
	uint64_t *counters, *per_rank;
	int32_t *rules;
	int ranks, cells;
};
static void go_report(void *p)
{
	struct go_report *a = p;
	collmux_go_report(a->counters, a->rules, a->ranks, a->per_rank, a->cells);
}
void cmx_go_report(uint64_t *counters, int32_t *rules, int ranks, uint64_t *per_rank, int cells)
{
	cmx_aside(go_report, &(struct go_report){counters, per_rank, rules, ranks, cells});
}

static void go_started(void *p) { collmux_go_started(*(int *)p); }
void cmx_go_started(int ranks) { cmx_aside(go_started, &ranks); }

struct go_trace {
	cmx_trace_ev *ev;
	uint64_t n, dropped, epoch;
	int rank, ranks;
	char *host;
	int64_t epoch_real;
};
static void go_trace(void *p)
{
	struct go_trace *a = p;
	collmux_go_trace(a->ev, a->n, a->dropped, a->rank, a->ranks, a->host, a->epoch_real, a->epoch);
}
void cmx_go_trace(cmx_trace_ev *ev, uint64_t n, uint64_t dropped, int rank, int ranks, char *host, int64_t epoch_real,
		  uint64_t epoch)
{
	cmx_aside(go_trace, &(struct go_trace){ev, n, dropped, epoch, rank, ranks, host, epoch_real});
}

static void go_node_nvlink(void *p) { *(int *)p = collmux_go_node_nvlink(); }
int cmx_go_node_nvlink(void)
{
	int nvl = 0;
	cmx_aside(go_node_nvlink, &nvl);
	return nvl;
}
