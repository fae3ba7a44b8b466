//go:build collmux_lib

/*
 * request.c: the requests collmux owns, and the MPI completion calls that
 * must know them.
 *
 * Every request a program gets from collmux is a real MPI request, so it
 * can sit in any array the program hands to MPI beside the MPI's own:
 * - inner: the MPI's own request of a call collmux rewrote (a staged call
 *   on host copies of device buffers); when it completes, collmux copies
 *   the received data back to the device and frees the copies;
 * - device: a generalized request (MPI_Grequest_start) standing for work
 *   queued on a GPU stream (NCCL); collmux completes it once the stream's
 *   event has passed;
 * - persistent: an anchor, a persistent request of the MPI's own that the
 *   MPI never sees started, the handle the program keeps; each MPI_Start
 *   starts the call as a nonblocking one and, until it completes,
 *   completion calls see that call's request in its place.
 * Entries are found by handle value, several may share one (see h), and a
 * completion call claims the ones it works on.
 * The completion calls (MPI_Wait ... MPI_Testsome, MPI_Request_get_status,
 * MPI_Request_free, MPI_Cancel, MPI_Start, MPI_Startall) go straight to
 * MPI while collmux owns no request: one load and a branch.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmx.h"

enum { REQ_INNER, REQ_DEVICE, REQ_PERSIST };

struct cmx_req {
	cmx_h h; /* the handle the program holds; not unique: Open MPI hands out
		  * one shared handle (ompi_request_empty) for operations that
		  * completed at once, so several entries may bear it */
	int kind, fn;
	cmx_h comm;  /* the call's: its error handler is the one a failure raises */
	int claimed; /* a completion call is working on it */
	int finished;  /* its results are in place, or failed to be: rc says */
	int rc;        /* 0, or the error code its completion gives */
	int completed; /* REQ_DEVICE: the generalized request was completed */
	int cancel;    /* the program asked to cancel it */
	/* finishing copies len bytes from `from` to the device at dev (only
	 * the bytes that arrived, by the status, when trim is set) */
	char *dev;
	const char *from;
	size_t len;
	int trim;
	cmx_run *runs; /* with runs, nruns blocks alone (a datatype with gaps) */
	int nruns;
	/* REQ_DEVICE: done when poll(arg, v) says so (1 done, 0 not yet, -1
	 * failed); drop(arg) once it is */
	int (*poll)(void *, uint64_t);
	void *arg;
	uint64_t v;
	void (*drop)(void *);
	int failed;
	int (*then)(void *, int); /* cmx_req_then's: after finishing, or when discarded unfinished */
	void *then_arg;
	void *keep[12]; /* memory the call uses until it completes (narrowed arrays; a persistent call's copies, until it is freed), freed */
	void *pinned;  /* its pinned host copies (cmx_pinned_get), returned to the pool */
	size_t pinned_len;
	/* REQ_PERSIST */
	cmx_args args;                  /* the nonblocking call each start makes */
	int (*start)(cmx_args *);       /* how (the router's) */
	cmx_prepared prep;              /* what the router and backend keep between starts */
	cmx_h inner;   /* the running start's request; request_null when inactive */
	cmx_req *next;
};

#define NBUCKET 1024
static cmx_req *bucket[NBUCKET];
static cmx_req *orphans; /* freed by the program while active: finished by collmux */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
int cmx_req_live; /* entries in the table or orphaned; 0 keeps completion calls on MPI */

/* An MPI_Request collmux holds itself, wide enough for either ABI's
 * (read and written with cmx_req_get/cmx_req_put). */
typedef union {
	cmx_h h;
	int i;
} req_slot;

static int is_null(cmx_h h) { return cmx_norm(h) == cmx_norm(cmx_abi.request_null); }

static unsigned slot(cmx_h h) { return (unsigned)((cmx_norm(h) * 0x9E3779B97F4A7C15ull) >> 54); }

/* the first entry bearing h that no completion call has claimed */
static cmx_req *find_locked(cmx_h h)
{
	h = cmx_norm(h);
	for (cmx_req *e = bucket[slot(h)]; e; e = e->next)
		if (e->h == h && !e->claimed)
			return e;
	return NULL;
}

static void unlink_locked(cmx_req *e)
{
	if (!e)
		return;
	for (cmx_req **p = &bucket[slot(e->h)]; *p; p = &(*p)->next)
		if (*p == e) {
			*p = e->next;
			e->next = NULL;
			return;
		}
}

static void progress_orphans(int wait);

/* A program may free a communicator while requests on it are pending;
 * its handle is then no longer valid, and a failure of such a request
 * must not reach an error handler through it. Every communicator collmux
 * holds requests of carries an attribute whose delete callback, run as
 * the communicator is freed, says so to those requests (e->comm 0): their
 * failures then return the error without calling a handler. */
static pthread_mutex_t watch_mu = PTHREAD_MUTEX_INITIALIZER; /* two threads setting it: the second set would "delete" the first */
static unsigned comm_frees; /* communicators freed (changed under mu), for completion calls running meanwhile (raise_failures) */

static void watch_comm(cmx_h comm)
{
	void *v;
	int flag = 1;
	if (!comm || comm == cmx_abi.comm_null || !cmx_state.mpi_set || !cmx_state.req_keyval_ok)
		return;
	pthread_mutex_lock(&watch_mu);
	if (cmx_px.Comm_get_attr(comm, cmx_state.req_keyval, &v, &flag) == 0 && !flag)
		cmx_px.Comm_set_attr(comm, cmx_state.req_keyval, NULL);
	pthread_mutex_unlock(&watch_mu);
}

int cmx_req_comm_freed(cmx_h comm, int keyval, void *val, void *extra)
{
	(void)keyval, (void)val, (void)extra;
	comm = cmx_norm(comm);
	pthread_mutex_lock(&mu);
	__atomic_fetch_add(&comm_frees, 1, __ATOMIC_RELAXED);
	for (int b = 0; b < NBUCKET; b++)
		for (cmx_req *e = bucket[b]; e; e = e->next)
			if (e->comm == comm)
				e->comm = 0;
	for (cmx_req *e = orphans; e; e = e->next)
		if (e->comm == comm)
			e->comm = 0;
	pthread_mutex_unlock(&mu);
	return 0;
}

/* A new entry. Requests the program freed while active are finished here
 * too, not only in completion calls: a program may free every request it
 * starts (sends it knows complete from a reply) and never make one, and
 * each would keep its staging memory. */
cmx_req *cmx_req_new(const cmx_args *a)
{
	progress_orphans(0);
	cmx_req *e = calloc(1, sizeof *e);
	if (e) {
		e->fn = a->fn, e->comm = cmx_norm(a->comm);
		e->inner = cmx_abi.request_null;
		watch_comm(e->comm);
	}
	return e;
}

void cmx_req_keep(cmx_req *e, void *p)
{
	if (!p)
		return;
	for (int i = 0; i < (int)(sizeof e->keep / sizeof e->keep[0]); i++)
		if (!e->keep[i]) {
			e->keep[i] = p;
			return;
		}
	cmx_fatal("internal: a request keeps more than %d allocations", (int)(sizeof e->keep / sizeof e->keep[0]));
}

void cmx_req_pinned(cmx_req *e, void *p, size_t n) { e->pinned = p, e->pinned_len = n; }

/* frees what an entry holds, and the entry */
static void discard(cmx_req *e)
{
	if (e->then)
		e->then(e->then_arg, 0);
	for (int i = 0; i < (int)(sizeof e->keep / sizeof e->keep[0]); i++)
		free(e->keep[i]);
	cmx_pinned_put(e->pinned, e->pinned_len);
	if (e->drop)
		e->drop(e->arg);
	free(e);
}

static void release(cmx_req *e)
{
	if (!e)
		return;
	discard(e);
	__atomic_fetch_sub(&cmx_req_live, 1, __ATOMIC_RELAXED);
}

/* add files e under the MPI request h. */
static void add(cmx_req *e, cmx_h h)
{
	e->h = cmx_norm(h);
	pthread_mutex_lock(&mu);
	unsigned s = slot(e->h);
	e->next = bucket[s];
	bucket[s] = e;
	pthread_mutex_unlock(&mu);
	__atomic_fetch_add(&cmx_req_live, 1, __ATOMIC_RELAXED);
}

void cmx_req_file(cmx_req *e, const void *req)
{
	e->kind = REQ_INNER;
	add(e, cmx_req_get(req));
}

void cmx_req_drop(cmx_req *e)
{
	if (e)
		discard(e);
}

void cmx_req_copy_back(cmx_req *e, void *dev, const void *from, size_t len, int trim, cmx_run *runs, int n)
{
	e->dev = dev, e->from = from, e->len = len, e->trim = trim, e->runs = runs, e->nruns = n;
	cmx_req_keep(e, runs);
}

int cmx_req_then(const void *req, int (*fn)(void *, int), void *arg)
{
	pthread_mutex_lock(&mu);
	cmx_req *e = find_locked(cmx_req_get(req)); /* the newest: the call just filed it */
	int ok = e && !e->then;
	if (ok)
		e->then = fn, e->then_arg = arg;
	pthread_mutex_unlock(&mu);
	return ok ? 0 : -1;
}

/* ---- generalized requests for device work ---- */

static int greq_query(void *extra, void *status)
{
	(void)extra;
	cmx_px.Status_set_elements(status, cmx_abi.byte, 0);
	cmx_px.Status_set_cancelled(status, 0);
	return 0;
}
static int greq_free(void *extra) { return (void)extra, 0; }
static int greq_cancel(void *extra, int complete) { return (void)extra, (void)complete, 0; }

int cmx_req_device(const cmx_args *a, int (*poll)(void *, uint64_t), void *arg, uint64_t v, void (*drop)(void *))
{
	cmx_req *e = cmx_req_new(a);
	if (!e)
		return cmx_abi.err_other;
	int rc = cmx_px.Grequest_start((void *)greq_query, (void *)greq_free, (void *)greq_cancel, NULL, a->req);
	if (rc != 0) {
		free(e);
		return rc;
	}
	e->kind = REQ_DEVICE;
	e->poll = poll, e->arg = arg, e->v = v, e->drop = drop;
	add(e, cmx_req_get(a->req));
	return 0;
}

/* A device request whose event has passed is completed for MPI. */
static void poll_device(cmx_req *e)
{
	if (!e || e->kind != REQ_DEVICE || e->completed)
		return;
	int d = e->poll(e->arg, e->v);
	if (d < 0) {
		e->failed = 1;
		fprintf(stderr, "collmux: %s: the device work of this nonblocking call failed (CUDA error %d, or a peer never joined "
				"within COLLMUX_TIMEOUT); its request completes with an error\n",
			cmx_fn_names[e->fn], cmx_cuda_last_error());
	}
	if (d != 0) {
		e->completed = 1;
		cmx_px.Grequest_complete(e->h);
	}
}

/* ---- finishing ---- */

/* Copies what a finished request received back to the device. */
static int copy_back(cmx_req *e, const void *status)
{
	if (e->failed)
		return cmx_abi.err_other;
	size_t n = e->len;
	int cancelled = 0;
	if (!e->dev || !n)
		return 0;
	if (status && status != cmx_abi.status_ignore) {
		if (e->cancel)
			cmx_px.Test_cancelled(status, &cancelled);
		if (e->trim)
			n = cmx_received(status, n);
	}
	if (cancelled || !n)
		return 0;
	if (cmx_cuda_ctx_for(e->dev) && cmx_cuda_copy_runs(e->dev, e->from, n, e->runs, e->nruns))
		return 0;
	cmx_log(0, "%s: copying the received data back to the device failed (CUDA error %d)", cmx_fn_names[e->fn], cmx_cuda_last_error());
	return cmx_abi.err_other;
}

static int finish(cmx_req *e, const void *status)
{
	if (!e || e->finished)
		return e ? e->rc : 0;
	e->finished = 1;
	int rc = copy_back(e, status);
	if (e->then) {
		int (*then)(void *, int) = e->then;
		e->then = NULL;
		int r = then(e->then_arg, rc == 0 && !e->failed);
		rc = rc ? rc : r;
	}
	return e->rc = rc;
}

/* Orphans, freed by the program while active, are finished here. */
static void progress_orphans(int wait)
{
	if (!__atomic_load_n(&orphans, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&mu);
	cmx_req *list = orphans;
	orphans = NULL;
	pthread_mutex_unlock(&mu);
	char st[64];
	while (list) {
		cmx_req *keep = NULL, *next;
		for (cmx_req *e = list; e; e = next) {
			next = e->next;
			poll_device(e);
			cmx_h h = e->h;
			int flag = 0;
			req_slot r;
			cmx_req_put(&r, h);
			if (cmx_px.Test(&r, &flag, st) != 0 || flag) {
				finish(e, st);
				release(e);
			} else {
				e->next = keep;
				keep = e;
			}
		}
		list = keep;
		if (!wait)
			break;
		cmx_cpu_relax();
	}
	if (list) {
		pthread_mutex_lock(&mu);
		cmx_req *tail = list;
		while (tail->next)
			tail = tail->next;
		tail->next = orphans;
		orphans = list;
		pthread_mutex_unlock(&mu);
	}
}

void cmx_req_finalize(void) { progress_orphans(1); }

/* ---- the completion calls ---- */


typedef struct {
	int n;
	void *reqs;     /* the program's array */
	int *flag, *idx, *outcount, *indices;
	void *statuses; /* the program's, or MPI_STATUS(ES)_IGNORE */
} call;

static int pmpi(int op, const call *c, void *sub, void *st)
{
	switch (op) {
	case CMX_REQ_WAIT:
		return cmx_px.Wait(sub, st);
	case CMX_REQ_TEST:
		return cmx_px.Test(sub, c->flag, st);
	case CMX_REQ_WAITALL:
		return cmx_px.Waitall(c->n, sub, st);
	case CMX_REQ_TESTALL:
		return cmx_px.Testall(c->n, sub, c->flag, st);
	case CMX_REQ_WAITANY:
		return cmx_px.Waitany(c->n, sub, c->idx, st);
	case CMX_REQ_TESTANY:
		return cmx_px.Testany(c->n, sub, c->idx, c->flag, st);
	case CMX_REQ_WAITSOME:
		return cmx_px.Waitsome(c->n, sub, c->outcount, c->indices, st);
	case CMX_REQ_TESTSOME:
		return cmx_px.Testsome(c->n, sub, c->outcount, c->indices, st);
	default:
		return cmx_px.Request_get_status(cmx_req_get(sub), c->flag, st);
	}
}

/* the polling twin of a blocking call, and whether it is done */
static int test_twin(int op) { return op == CMX_REQ_WAIT ? CMX_REQ_TEST : op == CMX_REQ_WAITALL ? CMX_REQ_TESTALL : op == CMX_REQ_WAITANY ? CMX_REQ_TESTANY : op == CMX_REQ_WAITSOME ? CMX_REQ_TESTSOME : op; }
static int twin_done(int op, const call *c)
{
	if (op == CMX_REQ_TESTSOME)
		return *c->outcount != 0;
	return *c->flag;
}

/* The status MPI wrote for request i of the call (NULL if none). */
static char *status_of(int op, const call *c, char *st, int i)
{
	if (!st || st == cmx_abi.status_ignore)
		return NULL;
	switch (op) {
	case CMX_REQ_WAITALL:
	case CMX_REQ_TESTALL:
		return st + (size_t)i * cmx_abi.status_size;
	case CMX_REQ_WAITSOME:
	case CMX_REQ_TESTSOME:
		for (int k = 0; k < *c->outcount; k++)
			if (c->indices[k] == i)
				return st + (size_t)k * cmx_abi.status_size;
		return NULL;
	default:
		return st;
	}
}

/* A completion call's requests that collmux finished with an error, told
 * as MPI tells them: the call returns the error or, where it completes
 * many requests, MPI_ERR_IN_STATUS, with the error in the failed
 * request's status's MPI_ERROR and MPI_SUCCESS in every other completed
 * one's; and the error handler of the first failed request's
 * communicator is called once. Where the MPI itself returned an error,
 * it has done all that for its own requests and called a handler. */
typedef struct {
	int n, code;
	cmx_h comm;      /* the first failed request's with a communicator not freed */
	unsigned frees;  /* comm_frees as the call claimed its requests */
} failures;

static int many(int op) { return op == CMX_REQ_WAITALL || op == CMX_REQ_TESTALL || op == CMX_REQ_WAITSOME || op == CMX_REQ_TESTSOME; }

static void set_error(char *status, int code) { memcpy(status + cmx_abi.status_error, &code, sizeof code); }

/* request i of the call, finished with error code r */
static void failed(failures *f, int op, const call *c, char *st, int mpi_rc, int i, const cmx_req *e, int r)
{
	if (!f->comm)
		f->comm = e->comm;
	if (!f->n++) {
		f->code = r;
		if (many(op) && mpi_rc == 0 && st && st != cmx_abi.status_ignore) {
			const int k = op == CMX_REQ_WAITALL || op == CMX_REQ_TESTALL ? c->n : *c->outcount;
			for (int j = 0; j < k; j++)
				set_error(st + (size_t)j * cmx_abi.status_size, 0);
		}
	}
	char *s = many(op) ? status_of(op, c, st, i) : NULL;
	if (s)
		set_error(s, r);
}

static int raise_failures(const failures *f, int op, int mpi_rc)
{
	if (!f->n || mpi_rc)
		return mpi_rc;
	const int code = many(op) ? cmx_abi.err_in_status : f->code;
	/* none where the communicator was freed (watch_comm), or may have
	 * been: one freed during this call went unseen by the requests it had
	 * taken out of the table */
	const int freed = !f->comm || __atomic_load_n(&comm_frees, __ATOMIC_RELAXED) != f->frees;
	return freed ? code : cmx_error(f->comm, code);
}

#define DEVICE_SPINS 64 /* device polls between two MPI tests while a completion call waits */

/* complete runs one completion call over requests some of which collmux
 * owns: persistent ones stand in for their running start, device work is
 * polled while a blocking call waits (the call then loops on its test
 * twin, so that MPI keeps progressing the other requests), and each
 * request that completed is finished (its data copied back) before the
 * call returns. */
static int complete(int op, call *c)
{
	progress_orphans(0);
	const int n = c->n, w = cmx_abi.int_handles ? (int)sizeof(int) : (int)sizeof(cmx_h);
	cmx_req *small_e[8], *small_i[8];
	char small_sub[8 * sizeof(cmx_h)];
	cmx_req **ent = n <= 8 ? small_e : calloc((size_t)n, sizeof *ent);
	cmx_req **work = n <= 8 ? small_i : calloc((size_t)n, sizeof *work); /* the entry doing slot i's work */
	char *sub = n <= 8 ? small_sub : malloc((size_t)n * (size_t)w);
	char *was_active = calloc((size_t)(n > 0 ? n : 1), 1);
	int rc = cmx_abi.err_other, need_status = 0, device = 0, other = 0;
	void *own_st = NULL;
	failures f = {0};
	if (!ent || !work || !sub || !was_active)
		goto out;
	pthread_mutex_lock(&mu);
	f.frees = __atomic_load_n(&comm_frees, __ATOMIC_RELAXED);
	for (int i = 0; i < n; i++) {
		cmx_h h = cmx_req_get(cmx_req_at(c->reqs, i));
		cmx_req *e = is_null(h) ? NULL : find_locked(h);
		if (e)
			e->claimed = 1;
		ent[i] = e;
		work[i] = e;
		if (e && e->kind == REQ_PERSIST) {
			h = e->inner;
			if ((work[i] = find_locked(h)))
				work[i]->claimed = 1;
		}
		cmx_req_put(sub + (size_t)i * w, h);
		was_active[i] = !is_null(h);
		/* an active request of the MPI's own (or staged) in the array */
		other |= !is_null(h) && !(work[i] && work[i]->kind == REQ_DEVICE);
		if (work[i]) {
			need_status |= work[i]->trim || work[i]->cancel;
			device |= work[i]->kind == REQ_DEVICE && !work[i]->completed;
		}
	}
	pthread_mutex_unlock(&mu);
	void *st = c->statuses;
	if (need_status && st == cmx_abi.status_ignore) {
		int k = many(op) ? n : 1;
		if (!(st = own_st = calloc((size_t)(k > 0 ? k : 1), (size_t)cmx_abi.status_size)))
			goto out;
	}
	int twin = device ? test_twin(op) : op, zero = 0;
	if (twin != op && !c->flag)
		c->flag = &zero; /* Wait*, Waitsome have no flag; the twin needs one */
	for (;;) {
		/* a call that blocks on device work alone polls it until some
		 * completes, a while at a time: each MPI test progresses the MPI,
		 * which costs as much as a short job takes (with requests of the
		 * MPI's own in the array, the MPI is tested at each poll) */
		for (int spin = 0; device && spin < (twin != op && !other ? DEVICE_SPINS : 1); spin++) {
			int fresh = 0, pending = 0;
			for (int i = 0; i < n; i++)
				if (work[i] && work[i]->kind == REQ_DEVICE && !work[i]->completed) {
					poll_device(work[i]);
					fresh |= work[i]->completed, pending |= !work[i]->completed;
				}
			if (fresh || !pending)
				break;
			cmx_cpu_relax();
		}
		rc = pmpi(twin, c, sub, st);
		if (rc != 0 || twin == op || twin_done(twin, c))
			break;
		progress_orphans(0);
		cmx_cpu_relax();
	}
	if (c->flag == &zero)
		c->flag = NULL;
	for (int i = 0; i < n; i++) {
		cmx_h now = cmx_req_get(sub + (size_t)i * w);
		int done = op == CMX_REQ_GETSTATUS ? *c->flag : was_active[i] && is_null(now);
		if (ent[i] && ent[i]->kind == REQ_PERSIST) {
			if (done && op != CMX_REQ_GETSTATUS && was_active[i]) {
				pthread_mutex_lock(&mu);
				unlink_locked(work[i]);
				pthread_mutex_unlock(&mu);
				int r = finish(work[i], status_of(op, c, st, i));
				if (r)
					failed(&f, op, c, st, rc, i, work[i], r);
				release(work[i]);
				work[i] = NULL;
				ent[i]->inner = cmx_abi.request_null;
			} else if (done && op == CMX_REQ_GETSTATUS) {
				int r = finish(work[i], status_of(op, c, st, i));
				if (r)
					failed(&f, op, c, st, rc, i, work[i], r);
			}
			continue; /* the program keeps the anchor */
		}
		if (work[i] && done) {
			int r = finish(work[i], status_of(op, c, st, i));
			if (r)
				failed(&f, op, c, st, rc, i, work[i], r);
			if (op != CMX_REQ_GETSTATUS) {
				pthread_mutex_lock(&mu);
				unlink_locked(work[i]);
				pthread_mutex_unlock(&mu);
				release(work[i]);
				work[i] = ent[i] = NULL;
			}
		}
		if (op != CMX_REQ_GETSTATUS)
			cmx_req_put(cmx_req_at(c->reqs, i), now);
	}
	/* what did not complete is free for the next completion call */
	pthread_mutex_lock(&mu);
	for (int i = 0; i < n; i++) {
		if (ent[i])
			ent[i]->claimed = 0;
		if (work[i])
			work[i]->claimed = 0;
	}
	pthread_mutex_unlock(&mu);
out:
	free(own_st);
	free(was_active);
	if (ent != small_e)
		free(ent);
	if (work != small_i)
		free(work);
	if (sub != small_sub)
		free(sub);
	return raise_failures(&f, op, rc); /* after the clean-up: a handler may not return */
}

/* The rest of completion call op (capi/requests.c): the MPI's own where
 * collmux owns no request (or the array is empty), else collmux's
 * completion. */
int cmx_req_completion(int op, int n, void *reqs, int *flag, int *idx, int *outcount, int *indices, void *statuses)
{
	if (!__atomic_load_n(&cmx_req_live, __ATOMIC_RELAXED) || n <= 0)
		switch (op) {
		case CMX_REQ_WAIT: return cmx_px.Wait(reqs, statuses);
		case CMX_REQ_TEST: return cmx_px.Test(reqs, flag, statuses);
		case CMX_REQ_WAITALL: return cmx_px.Waitall(n, reqs, statuses);
		case CMX_REQ_TESTALL: return cmx_px.Testall(n, reqs, flag, statuses);
		case CMX_REQ_WAITANY: return cmx_px.Waitany(n, reqs, idx, statuses);
		case CMX_REQ_TESTANY: return cmx_px.Testany(n, reqs, idx, flag, statuses);
		case CMX_REQ_WAITSOME: return cmx_px.Waitsome(n, reqs, outcount, indices, statuses);
		case CMX_REQ_TESTSOME: return cmx_px.Testsome(n, reqs, outcount, indices, statuses);
		}
	call c = {.n = n, .reqs = reqs, .flag = flag, .idx = idx, .outcount = outcount, .indices = indices, .statuses = statuses};
	return complete(op, &c);
}

int cmx_req_get_status(cmx_h req, int *flag, void *status)
{
	req_slot r;
	cmx_req_put(&r, req);
	call c = {.n = 1, .reqs = &r, .flag = flag, .statuses = status};
	return complete(CMX_REQ_GETSTATUS, &c);
}

int cmx_req_cancel(void *req)
{
	pthread_mutex_lock(&mu);
	cmx_req *e = find_locked(cmx_req_get(req));
	cmx_h target = e && e->kind == REQ_PERSIST ? e->inner : cmx_req_get(req);
	cmx_req *w = e && e->kind == REQ_PERSIST ? find_locked(target) : e;
	if (w)
		w->cancel = 1;
	pthread_mutex_unlock(&mu);
	req_slot r;
	cmx_req_put(&r, target);
	return cmx_px.Cancel(e && e->kind == REQ_PERSIST ? (void *)&r : req);
}

/* A request the program frees while it is active is finished by collmux
 * later (its copies must still reach the device, or be freed). */
int cmx_req_free(void *req)
{
	pthread_mutex_lock(&mu);
	cmx_h h = cmx_req_get(req);
	cmx_req *e = is_null(h) ? NULL : find_locked(h);
	cmx_req *w = e && e->kind == REQ_PERSIST ? find_locked(e->inner) : e;
	unlink_locked(e);
	if (w != e)
		unlink_locked(w);
	/* a start still running may read the arrays a persistent call copied
	 * at its init: they go with the start's entry, or, where the MPI holds
	 * the start's request alone, are left allocated */
	for (int i = 0; e && e->kind == REQ_PERSIST && !is_null(e->inner) && i < (int)(sizeof e->keep / sizeof e->keep[0]); i++) {
		if (w && e->keep[i])
			cmx_req_keep(w, e->keep[i]);
		e->keep[i] = NULL;
	}
	if (w) {
		w->next = orphans;
		__atomic_store_n(&orphans, w, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&mu);
	if (!e)
		return cmx_px.Request_free(req);
	if (e->kind == REQ_PERSIST) {
		int rc = cmx_px.Request_free(req); /* the anchor */
		release(e);
		return rc;
	}
	cmx_req_put(req, cmx_abi.request_null); /* collmux completes the MPI's request itself */
	return 0;
}

/* ---- persistent requests ---- */

/* A copy of the n entries of size sz at arr, kept by e; arr itself when
 * there is none to copy or no memory (then the program's array is read). */
static const void *keep_copy(cmx_req *e, const void *arr, int n, size_t sz)
{
	void *c = arr && n > 0 ? malloc((size_t)n * sz) : NULL;
	if (!c)
		return arr;
	memcpy(c, arr, (size_t)n * sz);
	cmx_req_keep(e, c);
	return c;
}

/* Every start reads the call's count, displacement and datatype arrays,
 * but the program may free or change them once the init has returned
 * (mpi4py lets go of the message object that holds them after
 * MPI_X_init_c returns, as MPIs copy them): the request keeps its own
 * copies of those read on this rank (cmx_arrays_read). An erroneous call
 * (a neighborhood call without a topology) keeps the program's, for its
 * starts to fail on as MPI's would. */
static void keep_arrays(cmx_req *e, cmx_args *a)
{
	int nin = 0, nout = 0, me = 0, inter = 0;
	if ((!a->scounts && !a->rcounts && !a->stypes && !a->rtypes) || cmx_peers(a, &nin, &nout) != 0 ||
	    cmx_px.Comm_rank(a->comm, &me) != 0 || cmx_px.Comm_test_inter(a->comm, &inter) != 0)
		return;
	const int root = cmx_is_root(a, inter, me);
	const size_t cnt = a->large ? sizeof(cmx_count) : sizeof(int), h = cmx_abi.int_handles ? sizeof(int) : sizeof(cmx_h);
	const size_t disp = cmx_displs_aint(a) ? sizeof(cmx_aint) : sizeof(int);
	if (cmx_arrays_read(a, 0, root)) {
		a->scounts = keep_copy(e, a->scounts, nout, cnt);
		a->sdispls = keep_copy(e, a->sdispls, nout, disp);
		a->stypes = keep_copy(e, a->stypes, nout, h);
	}
	if (cmx_arrays_read(a, 1, root)) {
		a->rcounts = keep_copy(e, a->rcounts, nin, cnt);
		a->rdispls = keep_copy(e, a->rdispls, nin, disp);
		a->rtypes = keep_copy(e, a->rtypes, nin, h);
	}
}

/* A persistent call collmux runs itself: the program holds an anchor, a
 * persistent request of the MPI's own, which stays inactive (collmux's
 * completion calls put the running start's request in its place); each
 * start runs the call in its nonblocking form. The anchor is a barrier of
 * MPI_COMM_SELF where the MPI has MPI-4's MPI_Barrier_init, else a send to
 * MPI_PROC_NULL: MPICH 4.0 never starts a persistent request whose object
 * last held one to MPI_PROC_NULL (its start skips those by a field it
 * does not clear on reuse), so once an anchor to MPI_PROC_NULL was freed,
 * the program's next persistent collective of its own never completed. */
int cmx_req_persistent(const cmx_args *a, int (*start)(cmx_args *))
{
	cmx_req *e = cmx_req_new(a);
	if (!e)
		return cmx_error(a->comm, cmx_abi.err_other);
	int rc = cmx_px.Barrier_init ? cmx_px.Barrier_init(cmx_abi.comm_self, cmx_abi.info_null, a->req)
				     : cmx_px.Send_init(NULL, 0, cmx_abi.byte, cmx_abi.proc_null, 0, cmx_abi.comm_self, a->req);
	if (rc != 0) {
		free(e);
		return rc;
	}
	e->kind = REQ_PERSIST;
	e->args = *a;
	e->args.fn = cmx_fn_nb[a->fn];
	e->args.form = CMX_FORM_NONBLOCKING;
	e->args.req = NULL;
	keep_arrays(e, &e->args);
	e->start = start;
	add(e, cmx_req_get(a->req));
	return 0;
}

int cmx_req_start(void *req)
{
	pthread_mutex_lock(&mu);
	cmx_req *e = find_locked(cmx_req_get(req));
	pthread_mutex_unlock(&mu);
	if (!e || e->kind != REQ_PERSIST)
		return cmx_px.Start(req);
	if (!is_null(e->inner))
		return cmx_error(e->args.comm, cmx_abi.err_other); /* started while active: erroneous */
	req_slot r;
	cmx_args b = e->args;
	b.req = &r;
	b.prep = &e->prep;
	int rc = e->start(&b);
	if (rc != 0)
		return rc;
	e->inner = cmx_norm(cmx_req_get(&r));
	return 0; /* the anchor stays inactive: see cmx_req_persistent */
}
