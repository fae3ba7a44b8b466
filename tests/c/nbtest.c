/*
 * nbtest: nonblocking and persistent collectives, and every completion
 * call, checked against references each rank computes on its own (inputs
 * are a known function of rank, index and case) and summarised as digest
 * lines that rank 0 prints in a fixed order, so that a run with collmux and
 * one without can be compared byte for byte.
 *
 *   nbtest            every nonblocking collective on int/float/double,
 *                     sum/max, counts 0/5/300, some in place, each completed
 *                     a different way (Wait, a Test loop, Request_get_status
 *                     then Wait, and each array call over the request
 *                     between two MPI_REQUEST_NULLs); batches of all of them
 *                     at once with Isend/Irecv and MPI_REQUEST_NULL entries,
 *                     completed by Waitall, Waitany, Waitsome, Testall,
 *                     Testany and Testsome loops (receive statuses checked,
 *                     all-null arrays give MPI_UNDEFINED); 300 outstanding
 *                     Iallreduce under one Waitall; persistent collectives
 *                     restarted 200 times (MPI_Start, MPI_Startall) and
 *                     freed; 20 Iallreduce, then a persistent one on a new
 *                     communicator, started by rank 0 before it receives
 *                     from a rank that sends synchronously before it
 *                     starts them; MPI_Iallreduce_c and MPI_Ibcast_c.
 *   nbtest threads    MPI_THREAD_MULTIPLE: two threads, each on its own
 *                     communicator, with Wait and Test loops.
 *
 * MPI-4 functions the header may lack (Open MPI 4.1 is MPI 3.1) are looked
 * up at run time; where the MPI has none (and collmux provides none) the
 * equivalent nonblocking call stands in, so stdout is the same either way;
 * which way was taken goes to stderr.
 *
 * -DCOLLTEST_CUDA: every collective buffer lives on the GPU (see
 * reqtest.h); the point-to-point messages mixed into the batches stay in
 * host memory.
 */
#define _GNU_SOURCE
#include <complex.h>

#include "reqtest.h"

/* ---- element kinds and ops ---- */
enum { TI, TF, TD, NKIND };
static const char *kname[NKIND] = {"int", "float", "double"};
static MPI_Datatype ktype(int k) { return k == TI ? MPI_INT : k == TF ? MPI_FLOAT : MPI_DOUBLE; }
static size_t ksize(int k) { return k == TD ? 8 : 4; }
static void set(int k, void *b, long i, long v)
{
	if (k == TI)
		((int *)b)[i] = (int)v;
	else if (k == TF)
		((float *)b)[i] = (float)v;
	else
		((double *)b)[i] = (double)v;
}
static long get(int k, const void *b, long i)
{
	if (k == TI)
		return ((const int *)b)[i];
	if (k == TF)
		return (long)((const float *)b)[i];
	return (long)((const double *)b)[i];
}
enum { SUM, MAX, NOP };
static const char *oname[NOP] = {"sum", "max"};
static MPI_Op otype(int o) { return o == SUM ? MPI_SUM : MPI_MAX; }

/* reduction input of rank r at index i; every value is exact in float */
static long red_in(int r, long i, int salt) { return (r * 7 + i * 3 + salt) % 13 - 6; }
static long red_ref(int o, int lo, int hi, long i, int salt)
{
	long acc = red_in(lo, i, salt);
	for (int r = lo + 1; r < hi; r++) {
		long v = red_in(r, i, salt);
		acc = o == SUM ? acc + v : (v > acc ? v : acc);
	}
	return acc;
}
/* data-movement payload of rank r at index x */
static long val(int r, long x, int salt) { return r * 100000L + x * 3 + salt; }

/* ---- completion ---- */
enum { W_WAIT, W_TEST, W_GETSTATUS, W_WAITALL, W_WAITANY, W_WAITSOME, W_TESTALL, W_TESTANY, W_TESTSOME, NWAY };
static const char *wayname[NWAY] = {"wait", "test", "get_status", "waitall", "waitany", "waitsome", "testall", "testany", "testsome"};

/* Completes one request the given way; the array calls see it between two
 * MPI_REQUEST_NULLs. The request must come back as MPI_REQUEST_NULL. */
static void complete1(MPI_Request *req, int way, const char *what)
{
	MPI_Request a[3] = {MPI_REQUEST_NULL, *req, MPI_REQUEST_NULL};
	MPI_Status st, sts[3];
	int flag = 0, idx = -1, outc = 0, ids[3] = {-1, -1, -1};
	switch (way) {
	case W_WAIT:
		MPI_Wait(req, MPI_STATUS_IGNORE);
		break;
	case W_TEST:
		while (!flag)
			MPI_Test(req, &flag, &st);
		break;
	case W_GETSTATUS:
		while (!flag)
			MPI_Request_get_status(*req, &flag, &st);
		CHECK(*req != MPI_REQUEST_NULL, "%s: MPI_Request_get_status freed the request", what);
		MPI_Wait(req, &st);
		break;
	case W_WAITALL:
		MPI_Waitall(3, a, sts);
		*req = a[1];
		break;
	case W_WAITANY:
		MPI_Waitany(3, a, &idx, &st);
		CHECK(idx == 1, "%s: waitany index %d, want 1", what, idx);
		*req = a[1];
		break;
	case W_WAITSOME:
		MPI_Waitsome(3, a, &outc, ids, sts);
		CHECK(outc == 1 && ids[0] == 1, "%s: waitsome outcount %d index %d, want 1 and 1", what, outc, ids[0]);
		*req = a[1];
		break;
	case W_TESTALL:
		while (!flag)
			MPI_Testall(3, a, &flag, STATUSES_IGNORE);
		*req = a[1];
		break;
	case W_TESTANY:
		while (!flag) {
			MPI_Testany(3, a, &idx, &flag, &st);
			CHECK(flag || idx == MPI_UNDEFINED, "%s: testany without completion gave index %d", what, idx);
		}
		CHECK(idx == 1, "%s: testany index %d, want 1", what, idx);
		*req = a[1];
		break;
	case W_TESTSOME:
		while (outc == 0)
			MPI_Testsome(3, a, &outc, ids, sts);
		CHECK(outc == 1 && ids[0] == 1, "%s: testsome outcount %d index %d, want 1 and 1", what, outc, ids[0]);
		*req = a[1];
		break;
	}
	CHECK(*req == MPI_REQUEST_NULL, "%s: %s left the request active", what, wayname[way]);
	CHECK(a[0] == MPI_REQUEST_NULL && a[2] == MPI_REQUEST_NULL, "%s: %s changed a null entry", what, wayname[way]);
}

/* ---- one nonblocking collective ---- */
enum { IALLREDUCE, IREDUCE, IBCAST, IALLGATHER, IALLGATHERV, IGATHER, IGATHERV, ISCATTER, ISCATTERV, IALLTOALL,
       IALLTOALLV, IALLTOALLW, IREDUCE_SCATTER, IREDUCE_SCATTER_BLOCK, ISCAN, IEXSCAN, IBARRIER, NCOLL };
static const char *cname[NCOLL] = {"iallreduce", "ireduce", "ibcast", "iallgather", "iallgatherv", "igather",
				   "igatherv", "iscatter", "iscatterv", "ialltoall", "ialltoallv", "ialltoallw",
				   "ireduce_scatter", "ireduce_scatter_block", "iscan", "iexscan", "ibarrier"};
static int reduction(int c)
{
	return c == IALLREDUCE || c == IREDUCE || c == IREDUCE_SCATTER || c == IREDUCE_SCATTER_BLOCK || c == ISCAN || c == IEXSCAN;
}
/* the collectives tried with MPI_IN_PLACE */
static int in_place_ok(int c)
{
	return c == IALLREDUCE || c == IREDUCE || c == IALLGATHER || c == IALLTOALL || c == IREDUCE_SCATTER_BLOCK || c == ISCAN;
}

struct nb {
	int c, k, o, n, ip, salt; /* collective, kind, op, count, in place, input variant */
	MPI_Comm comm;
	int r, s, root;
	long cap;	 /* elements in sb and rb */
	char *sb, *rb;	 /* tracked: device mirrors under COLLTEST_CUDA */
	int *sc, *sd, *rc, *rd, *sdb, *rdb; /* counts, displacements (elements, bytes) */
	MPI_Datatype *st, *rt;
	MPI_Request req;
};

/* Allocates and fills the buffers and copies them to the device. */
static void nb_prep(struct nb *x)
{
	MPI_Comm_rank(x->comm, &x->r);
	MPI_Comm_size(x->comm, &x->s);
	int r = x->r, s = x->s, n = x->n, k = x->k, salt = x->salt;
	size_t es = ksize(k);
	x->cap = (long)n * s + 1;
	x->sb = CALLOC((size_t)x->cap, es);
	x->rb = CALLOC((size_t)x->cap, es);
	x->sc = malloc(sizeof(int) * (size_t)s), x->sd = malloc(sizeof(int) * (size_t)s);
	x->rc = malloc(sizeof(int) * (size_t)s), x->rd = malloc(sizeof(int) * (size_t)s);
	x->sdb = malloc(sizeof(int) * (size_t)s), x->rdb = malloc(sizeof(int) * (size_t)s);
	x->st = malloc(sizeof(MPI_Datatype) * (size_t)s), x->rt = malloc(sizeof(MPI_Datatype) * (size_t)s);
	x->root = x->c == IREDUCE || x->c == IGATHERV || x->c == ISCATTER ? s - 1 : (s > 1 ? 1 : 0);
	x->req = MPI_REQUEST_NULL;
	for (long i = 0; i < x->cap; i++)
		set(k, x->sb, i, -2), set(k, x->rb, i, -1);
	char *in = x->ip ? x->rb : x->sb;
	int tot = 0, so = 0, ro = 0;
	switch (x->c) {
	case IALLREDUCE:
	case ISCAN:
	case IEXSCAN:
		for (long i = 0; i < n; i++)
			set(k, in, i, red_in(r, i, salt));
		break;
	case IREDUCE:
		for (long i = 0; i < n; i++)
			set(k, (x->ip && r == x->root) ? x->rb : x->sb, i, red_in(r, i, salt));
		break;
	case IREDUCE_SCATTER_BLOCK:
		for (long i = 0; i < (long)n * s; i++)
			set(k, in, i, red_in(r, i, salt));
		break;
	case IREDUCE_SCATTER: /* rank j gets (n + j) % (n + 1) elements */
		for (int j = 0; j < s; j++)
			x->rc[j] = (n + j) % (n + 1), tot += x->rc[j];
		for (long i = 0; i < tot; i++)
			set(k, x->sb, i, red_in(r, i, salt));
		break;
	case IBCAST:
		for (long i = 0; i < n; i++)
			set(k, x->rb, i, r == x->root ? val(r, i, salt) : -1);
		break;
	case IALLGATHER:
	case IGATHER:
		for (long i = 0; i < n; i++)
			set(k, x->ip ? x->rb + es * (size_t)(r * n) : x->sb, i, val(r, i, salt));
		break;
	case IALLGATHERV:
	case IGATHERV:
	case ISCATTERV: /* rank j's block holds (n + j) % (n + 1) elements, blocks in reverse rank order */
		for (int j = s - 1; j >= 0; j--)
			x->rc[j] = (n + j) % (n + 1), x->rd[j] = tot, tot += x->rc[j];
		if (x->c != ISCATTERV)
			for (long i = 0; i < x->rc[r]; i++)
				set(k, x->sb, i, val(r, i, salt));
		else if (r == x->root)
			for (int j = 0; j < s; j++)
				for (long i = 0; i < x->rc[j]; i++)
					set(k, x->sb, x->rd[j] + i, val(j, i, salt));
		break;
	case ISCATTER:
		if (r == x->root)
			for (int j = 0; j < s; j++)
				for (long i = 0; i < n; i++)
					set(k, x->sb, (long)j * n + i, val(j, i, salt));
		break;
	case IALLTOALL:
		for (int j = 0; j < s; j++)
			for (long i = 0; i < n; i++)
				set(k, in, (long)j * n + i, val(r, (long)j * n + i, salt));
		break;
	case IALLTOALLV:
	case IALLTOALLW: /* rank r sends (r + j) % (n + 1) elements to rank j */
		for (int j = 0; j < s; j++) {
			x->sc[j] = (r + j) % (n + 1), x->sd[j] = so, so += x->sc[j];
			x->rc[j] = (j + r) % (n + 1), x->rd[j] = ro, ro += x->rc[j];
			x->sdb[j] = x->sd[j] * (int)es, x->rdb[j] = x->rd[j] * (int)es;
			x->st[j] = x->rt[j] = ktype(k);
			for (long i = 0; i < x->sc[j]; i++)
				set(k, x->sb, x->sd[j] + i, val(r, j * 1000L + i, salt));
		}
		break;
	}
	TODEV(x->sb);
	TODEV(x->rb);
}

static void nb_start(struct nb *x)
{
	int r = x->r, n = x->n, root = x->root;
	void *sb = D(x->sb), *rb = D(x->rb);
	const void *in = x->ip ? MPI_IN_PLACE : sb;
	MPI_Datatype t = ktype(x->k);
	MPI_Op op = otype(x->o);
	MPI_Comm comm = x->comm;
	MPI_Request *q = &x->req;
	int rc = MPI_SUCCESS;
	switch (x->c) {
	case IALLREDUCE: rc = MPI_Iallreduce(in, rb, n, t, op, comm, q); break;
	case IREDUCE: rc = MPI_Ireduce((x->ip && r == root) ? MPI_IN_PLACE : sb, rb, n, t, op, root, comm, q); break;
	case IBCAST: rc = MPI_Ibcast(rb, n, t, root, comm, q); break;
	case IALLGATHER: rc = MPI_Iallgather(in, n, t, rb, n, t, comm, q); break;
	case IALLGATHERV: rc = MPI_Iallgatherv(sb, x->rc[r], t, rb, x->rc, x->rd, t, comm, q); break;
	case IGATHER: rc = MPI_Igather(sb, n, t, rb, n, t, root, comm, q); break;
	case IGATHERV: rc = MPI_Igatherv(sb, x->rc[r], t, rb, x->rc, x->rd, t, root, comm, q); break;
	case ISCATTER: rc = MPI_Iscatter(sb, n, t, rb, n, t, root, comm, q); break;
	case ISCATTERV: rc = MPI_Iscatterv(sb, x->rc, x->rd, t, rb, x->rc[r], t, root, comm, q); break;
	case IALLTOALL: rc = MPI_Ialltoall(in, n, t, rb, n, t, comm, q); break;
	case IALLTOALLV: rc = MPI_Ialltoallv(sb, x->sc, x->sd, t, rb, x->rc, x->rd, t, comm, q); break;
	case IALLTOALLW: rc = MPI_Ialltoallw(sb, x->sc, x->sdb, x->st, rb, x->rc, x->rdb, x->rt, comm, q); break;
	case IREDUCE_SCATTER: rc = MPI_Ireduce_scatter(sb, rb, x->rc, t, op, comm, q); break;
	case IREDUCE_SCATTER_BLOCK: rc = MPI_Ireduce_scatter_block(in, rb, n, t, op, comm, q); break;
	case ISCAN: rc = MPI_Iscan(in, rb, n, t, op, comm, q); break;
	case IEXSCAN: rc = MPI_Iexscan(in, rb, n, t, op, comm, q); break;
	case IBARRIER: rc = MPI_Ibarrier(comm, q); break;
	}
	CHECK(rc == MPI_SUCCESS && x->req != MPI_REQUEST_NULL, "%s: start rc %d", cname[x->c], rc);
}

/* After completion: copies the result back, checks it and that nothing
 * past it was written, reports its digest as `name`, frees everything. */
static void nb_finish(struct nb *x, const char *name)
{
	int r = x->r, s = x->s, n = x->n, k = x->k, o = x->o, salt = x->salt, root = x->root;
	long rep = 0, bad = 0, want = 0, got = 0, at = -1, off = 0;
	int checkrest = !x->ip;
	TOHOST(x->rb);
#define EXPECT(i, w)                                    \
	do {                                            \
		long i_ = (i), w_ = (w), g_ = get(k, x->rb, i_); \
		if (g_ != w_ && bad++ == 0)             \
			at = i_, want = w_, got = g_;   \
	} while (0)
	switch (x->c) {
	case IALLREDUCE:
		for (long i = 0; i < n; i++)
			EXPECT(i, red_ref(o, 0, s, i, salt));
		rep = n;
		break;
	case IREDUCE:
		if (r == root)
			for (long i = 0; i < n; i++)
				EXPECT(i, red_ref(o, 0, s, i, salt));
		rep = r == root ? n : 0;
		break;
	case ISCAN:
		for (long i = 0; i < n; i++)
			EXPECT(i, red_ref(o, 0, r + 1, i, salt));
		rep = n;
		break;
	case IEXSCAN: /* rank 0's result is undefined */
		if (r > 0)
			for (long i = 0; i < n; i++)
				EXPECT(i, red_ref(o, 0, r, i, salt));
		rep = r > 0 ? n : 0;
		checkrest = checkrest && r > 0;
		break;
	case IREDUCE_SCATTER_BLOCK:
		for (long i = 0; i < n; i++)
			EXPECT(i, red_ref(o, 0, s, (long)r * n + i, salt));
		rep = n;
		break;
	case IREDUCE_SCATTER:
		for (int j = 0; j < r; j++)
			off += x->rc[j];
		for (long i = 0; i < x->rc[r]; i++)
			EXPECT(i, red_ref(o, 0, s, off + i, salt));
		rep = x->rc[r];
		break;
	case IBCAST:
		for (long i = 0; i < n; i++)
			EXPECT(i, val(root, i, salt));
		rep = n;
		break;
	case IALLGATHER:
	case IGATHER:
		if (x->c == IALLGATHER || r == root)
			for (int j = 0; j < s; j++)
				for (long i = 0; i < n; i++)
					EXPECT((long)j * n + i, val(j, i, salt));
		rep = (x->c == IALLGATHER || r == root) ? (long)n * s : 0;
		break;
	case IALLGATHERV:
	case IGATHERV:
		if (x->c == IALLGATHERV || r == root)
			for (int j = 0; j < s; j++) {
				for (long i = 0; i < x->rc[j]; i++)
					EXPECT(x->rd[j] + i, val(j, i, salt));
				rep += x->rc[j];
			}
		break;
	case ISCATTER:
		for (long i = 0; i < n; i++)
			EXPECT(i, val(r, i, salt));
		rep = n;
		break;
	case ISCATTERV:
		for (long i = 0; i < x->rc[r]; i++)
			EXPECT(i, val(r, i, salt));
		rep = x->rc[r];
		break;
	case IALLTOALL:
		for (int j = 0; j < s; j++)
			for (long i = 0; i < n; i++)
				EXPECT((long)j * n + i, val(j, (long)r * n + i, salt));
		rep = (long)n * s;
		break;
	case IALLTOALLV:
	case IALLTOALLW:
		for (int j = 0; j < s; j++) {
			for (long i = 0; i < x->rc[j]; i++)
				EXPECT(x->rd[j] + i, val(j, r * 1000L + i, salt));
			rep += x->rc[j];
		}
		break;
	case IBARRIER:
		break;
	}
	if (checkrest) /* nothing written past the result */
		for (long i = rep; i < x->cap; i++)
			EXPECT(i, -1);
#undef EXPECT
	CHECK(bad == 0, "%s: %ld wrong elements, first at %ld: got %ld want %ld", name, bad, at, got, want);
	report(name, x->rb, ksize(k) * (size_t)rep);
	FREE(x->sb), FREE(x->rb);
	free(x->sc), free(x->sd), free(x->rc), free(x->rd), free(x->sdb), free(x->rdb), free(x->st), free(x->rt);
}

static int ncase; /* rotates the completion ways and the inputs */

/* Every nonblocking collective alone, completed a different way each time. */
static void test_each(MPI_Comm comm, const char *cn)
{
	const int counts[] = {0, 5, 300};
	char name[160];
	for (int c = 0; c < NCOLL; c++)
		for (int k = 0; k < NKIND; k++)
			for (int o = 0; o < (reduction(c) ? NOP : 1); o++)
				for (unsigned ci = 0; ci < sizeof counts / sizeof *counts; ci++)
					for (int ip = 0; ip < 2; ip++) {
						if (ip && !(in_place_ok(c) && counts[ci] == 5))
							continue;
						if (c == IBARRIER && (k > 0 || ci > 0))
							continue;
						struct nb x = {.c = c, .k = k, .o = o, .n = counts[ci], .ip = ip, .salt = ncase % 11, .comm = comm};
						int way = ncase++ % NWAY;
						if (c == IBARRIER)
							snprintf(name, sizeof name, "%s.%s.%s", cn, cname[c], wayname[way]);
						else
							snprintf(name, sizeof name, "%s.%s.%s%s%s.%d%s.%s", cn, cname[c], kname[k], reduction(c) ? "." : "",
								 reduction(c) ? oname[o] : "", counts[ci], ip ? ".ip" : "", wayname[way]);
						nb_prep(&x);
						nb_start(&x);
						complete1(&x.req, way, name);
						nb_finish(&x, name);
					}
}

/* ---- batches: all collectives at once, with point-to-point and nulls ---- */
enum { R_NULL = -1, R_RECV_LEFT = NCOLL, R_RECV_RIGHT, R_SEND_LEFT, R_SEND_RIGHT };

struct batch {
	int b, left, right, n;
	int role[NCOLL + 12];
	MPI_Request req[NCOLL + 12];
	int done[NCOLL + 12];
};

/* a completed receive's status: source, tag and count as sent */
static void check_status(struct batch *B, int i, const MPI_Status *st, const char *what)
{
	int role = B->role[i], cnt = -1;
	CHECK(!B->done[i], "%s: entry %d completed twice", what, i);
	CHECK(role != R_NULL, "%s: null entry %d reported complete", what, i);
	B->done[i] = 1;
	if (role != R_RECV_LEFT && role != R_RECV_RIGHT)
		return;
	int src = role == R_RECV_LEFT ? B->left : B->right, tag = (role == R_RECV_LEFT ? 50 : 60) + B->b;
	int want = B->b + (role == R_RECV_LEFT ? 3 : 4);
	MPI_Get_count(st, MPI_INT, &cnt);
	CHECK(st->MPI_SOURCE == src && st->MPI_TAG == tag && cnt == want, "%s: receive status source %d tag %d count %d, want %d %d %d",
	      what, st->MPI_SOURCE, st->MPI_TAG, cnt, src, tag, want);
}

static void complete_batch(struct batch *B, int way, const char *what)
{
	int n = B->n, active = 0, seen = 0, idx, flag, outc, ids[NCOLL + 12];
	MPI_Status st, sts[NCOLL + 12];
	for (int i = 0; i < n; i++)
		active += B->role[i] != R_NULL;
	switch (way) {
	case W_WAITALL:
		MPI_Waitall(n, B->req, sts);
		for (int i = 0; i < n; i++)
			if (B->role[i] != R_NULL)
				check_status(B, i, &sts[i], what), seen++;
		break;
	case W_TESTALL:
		for (flag = 0; !flag;)
			MPI_Testall(n, B->req, &flag, sts);
		for (int i = 0; i < n; i++)
			if (B->role[i] != R_NULL)
				check_status(B, i, &sts[i], what), seen++;
		MPI_Testall(n, B->req, &flag, sts);
		CHECK(flag, "%s: testall over null requests gave flag false", what);
		break;
	case W_WAITANY:
		for (;;) {
			MPI_Waitany(n, B->req, &idx, &st);
			if (idx == MPI_UNDEFINED)
				break;
			CHECK(idx >= 0 && idx < n && B->req[idx] == MPI_REQUEST_NULL, "%s: waitany index %d", what, idx);
			if (idx >= 0 && idx < n)
				check_status(B, idx, &st, what), seen++;
			if (seen > active)
				break;
		}
		CHECK(empty_status(&st), "%s: waitany over null requests: status not empty", what);
		break;
	case W_TESTANY:
		for (;;) {
			MPI_Testany(n, B->req, &idx, &flag, &st);
			if (flag && idx == MPI_UNDEFINED)
				break;
			if (!flag) {
				CHECK(idx == MPI_UNDEFINED, "%s: testany without completion gave index %d", what, idx);
				continue;
			}
			CHECK(idx >= 0 && idx < n, "%s: testany index %d", what, idx);
			if (idx >= 0 && idx < n)
				check_status(B, idx, &st, what), seen++;
			if (seen > active)
				break;
		}
		CHECK(empty_status(&st), "%s: testany over null requests: status not empty", what);
		break;
	case W_WAITSOME:
	case W_TESTSOME:
		for (;;) {
			if (way == W_WAITSOME)
				MPI_Waitsome(n, B->req, &outc, ids, sts);
			else
				MPI_Testsome(n, B->req, &outc, ids, sts);
			if (outc == MPI_UNDEFINED)
				break;
			CHECK(outc >= 0 && outc <= n && (way == W_TESTSOME || outc > 0), "%s: outcount %d", what, outc);
			for (int j = 0; j < outc && j < n; j++) {
				CHECK(ids[j] >= 0 && ids[j] < n, "%s: index %d", what, ids[j]);
				if (ids[j] >= 0 && ids[j] < n)
					check_status(B, ids[j], &sts[j], what), seen++;
			}
			if (seen > active)
				break;
		}
		break;
	}
	CHECK(seen == active, "%s: %d completions, want %d", what, seen, active);
	for (int i = 0; i < n; i++)
		CHECK(B->req[i] == MPI_REQUEST_NULL, "%s: entry %d still active", what, i);
}

static void test_batches(MPI_Comm comm, const char *cn)
{
	int r, s;
	MPI_Comm_rank(comm, &r);
	MPI_Comm_size(comm, &s);
	const int ways[] = {W_WAITALL, W_WAITANY, W_WAITSOME, W_TESTALL, W_TESTANY, W_TESTSOME};
	char name[160];
	for (int b = 0; b < 6; b++) {
		int way = ways[b];
		struct batch B = {.b = b, .left = (r - 1 + s) % s, .right = (r + 1) % s};
		struct nb x[NCOLL];
		int *rl = calloc(64, sizeof(int)), *rr = calloc(64, sizeof(int)), *sl = calloc(64, sizeof(int)), *sr = calloc(64, sizeof(int));
		for (int i = 0; i < 64; i++)
			rl[i] = rr[i] = -1, sr[i] = r * 100 + i + b, sl[i] = r * 100 + 50 + i + b;
#define ADD(role_) (B.role[B.n] = (role_), &B.req[B.n++])
		*ADD(R_NULL) = MPI_REQUEST_NULL;
		MPI_Irecv(rl, 64, MPI_INT, B.left, 50 + b, comm, ADD(R_RECV_LEFT));
		for (int c = 0; c < NCOLL; c++) {
			x[c] = (struct nb){.c = c, .k = (b + c) % NKIND, .o = (b + c) % NOP, .n = 3 + b, .salt = ncase++ % 11, .comm = comm};
			nb_prep(&x[c]);
			nb_start(&x[c]);
			*ADD(c) = x[c].req;
			if (c % 6 == 2)
				*ADD(R_NULL) = MPI_REQUEST_NULL;
		}
		MPI_Isend(sr, b + 3, MPI_INT, B.right, 50 + b, comm, ADD(R_SEND_RIGHT));
		MPI_Irecv(rr, 64, MPI_INT, B.right, 60 + b, comm, ADD(R_RECV_RIGHT));
		*ADD(R_NULL) = MPI_REQUEST_NULL;
		MPI_Isend(sl, b + 4, MPI_INT, B.left, 60 + b, comm, ADD(R_SEND_LEFT));
		*ADD(R_NULL) = MPI_REQUEST_NULL;
#undef ADD
		snprintf(name, sizeof name, "%s.batch.%s", cn, wayname[way]);
		complete_batch(&B, way, name);
		for (int c = 0; c < NCOLL; c++) {
			snprintf(name, sizeof name, "%s.batch.%s.%s.%s", cn, wayname[way], cname[c], kname[x[c].k]);
			nb_finish(&x[c], name);
		}
		int bad = 0;
		for (int i = 0; i < 64; i++) {
			bad += rl[i] != (i < b + 3 ? B.left * 100 + i + b : -1);
			bad += rr[i] != (i < b + 4 ? B.right * 100 + 50 + i + b : -1);
		}
		CHECK(bad == 0, "%s.batch.%s: %d wrong point-to-point elements", cn, wayname[way], bad);
		snprintf(name, sizeof name, "%s.batch.%s.p2p", cn, wayname[way]);
		int both[128];
		memcpy(both, rl, sizeof(int) * 64), memcpy(both + 64, rr, sizeof(int) * 64);
		report(name, both, sizeof both);
		free(rl), free(rr), free(sl), free(sr);
	}
}

/* Completion calls on null and empty arrays. */
static void test_null_requests(void)
{
	MPI_Request a[4] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
	MPI_Status st, sts[4];
	int flag = 0, idx = 0, outc = 0, ids[4];
	MPI_Wait(&a[0], &st);
	CHECK(empty_status(&st), "wait on MPI_REQUEST_NULL: status not empty");
	MPI_Test(&a[0], &flag, &st);
	CHECK(flag && empty_status(&st), "test on MPI_REQUEST_NULL: flag %d", flag);
	MPI_Request_get_status(MPI_REQUEST_NULL, &flag, &st);
	CHECK(flag && empty_status(&st), "request_get_status on MPI_REQUEST_NULL: flag %d", flag);
	MPI_Waitall(4, a, sts);
	MPI_Waitany(4, a, &idx, &st);
	CHECK(idx == MPI_UNDEFINED && empty_status(&st), "waitany over nulls: index %d", idx);
	MPI_Waitsome(4, a, &outc, ids, sts);
	CHECK(outc == MPI_UNDEFINED, "waitsome over nulls: outcount %d", outc);
	MPI_Testall(4, a, &flag, sts);
	CHECK(flag, "testall over nulls: flag %d", flag);
	flag = 0;
	MPI_Testany(4, a, &idx, &flag, &st);
	CHECK(flag && idx == MPI_UNDEFINED, "testany over nulls: flag %d index %d", flag, idx);
	MPI_Testsome(4, a, &outc, ids, sts);
	CHECK(outc == MPI_UNDEFINED, "testsome over nulls: outcount %d", outc);
	MPI_Waitall(0, NULL, STATUSES_IGNORE);
	MPI_Waitany(0, NULL, &idx, MPI_STATUS_IGNORE);
	CHECK(idx == MPI_UNDEFINED, "waitany over no requests: index %d", idx);
	MPI_Testall(0, NULL, &flag, STATUSES_IGNORE);
	CHECK(flag, "testall over no requests: flag %d", flag);
	say("null requests: wait/test/get_status empty, waitany/testany MPI_UNDEFINED, waitsome/testsome MPI_UNDEFINED");
}

/* Hundreds of requests outstanding at once, completed by one Waitall. */
static void test_many(void)
{
	enum { NMANY = 300, PER = 4 };
	int *in = CALLOC(NMANY * PER, sizeof(int)), *out = CALLOC(NMANY * PER, sizeof(int));
	MPI_Request *q = malloc(sizeof(MPI_Request) * NMANY);
	MPI_Status *sts = malloc(sizeof(MPI_Status) * NMANY);
	for (int j = 0; j < NMANY; j++)
		for (int i = 0; i < PER; i++)
			in[j * PER + i] = (rank + 1) * (j + 1) + i, out[j * PER + i] = -1;
	TODEV(in);
	TODEV(out);
	for (int j = 0; j < NMANY; j++)
		MPI_Iallreduce(D(in + j * PER), D(out + j * PER), PER, MPI_INT, j % 3 ? MPI_SUM : MPI_MAX, MPI_COMM_WORLD, &q[j]);
	MPI_Waitall(NMANY, q, sts);
	TOHOST(out);
	int bad = 0, nonnull = 0;
	for (int j = 0; j < NMANY; j++) {
		nonnull += q[j] != MPI_REQUEST_NULL;
		for (int i = 0; i < PER; i++) {
			int want = j % 3 ? (j + 1) * size * (size + 1) / 2 + size * i : size * (j + 1) + i;
			bad += out[j * PER + i] != want;
		}
	}
	CHECK(bad == 0 && nonnull == 0, "300 outstanding iallreduce: %d wrong, %d requests left", bad, nonnull);
	report("world.iallreduce.300_outstanding.waitall", out, sizeof(int) * NMANY * PER);
	FREE(in), FREE(out), free(q), free(sts);
}

/* ---- persistent collectives (MPI-4) ---- */
typedef int (*allreduce_init_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Info, MPI_Request *);
typedef int (*bcast_init_fn)(void *, int, MPI_Datatype, int, MPI_Comm, MPI_Info, MPI_Request *);
typedef int (*gather_init_fn)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm, MPI_Info, MPI_Request *);
typedef int (*reduce_init_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, int, MPI_Comm, MPI_Info, MPI_Request *);
typedef int (*barrier_init_fn)(MPI_Comm, MPI_Info, MPI_Request *);
typedef int (*allgatherv_init_fn)(const void *, int, MPI_Datatype, void *, const int *, const int *, MPI_Datatype, MPI_Comm, MPI_Info, MPI_Request *);
typedef int (*iallreduce_c_fn)(const void *, void *, MPI_Count, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request *);
typedef int (*ibcast_c_fn)(void *, MPI_Count, MPI_Datatype, int, MPI_Comm, MPI_Request *);
static allreduce_init_fn p_allreduce_init;
static bcast_init_fn p_bcast_init;
static gather_init_fn p_allgather_init, p_alltoall_init;
static reduce_init_fn p_reduce_init;
static barrier_init_fn p_barrier_init;
static allgatherv_init_fn p_allgatherv_init;
static iallreduce_c_fn p_iallreduce_c;
static ibcast_c_fn p_ibcast_c;

/* With an MPI-4 header the program links the functions as any MPI-4
 * program does; without one (Open MPI 4.1) it asks the dynamic linker,
 * which finds collmux's where collmux is preloaded and provides them. */
static void lookup_mpi4(void)
{
#if defined(MPI_VERSION) && MPI_VERSION >= 4
	p_allreduce_init = MPI_Allreduce_init;
	p_bcast_init = MPI_Bcast_init;
	p_allgather_init = MPI_Allgather_init;
	p_alltoall_init = MPI_Alltoall_init;
	p_reduce_init = MPI_Reduce_init;
	p_barrier_init = MPI_Barrier_init;
	p_allgatherv_init = MPI_Allgatherv_init;
	p_iallreduce_c = MPI_Iallreduce_c;
	p_ibcast_c = MPI_Ibcast_c;
#else
	*(void **)&p_allreduce_init = dlsym(RTLD_DEFAULT, "MPI_Allreduce_init");
	*(void **)&p_bcast_init = dlsym(RTLD_DEFAULT, "MPI_Bcast_init");
	*(void **)&p_allgather_init = dlsym(RTLD_DEFAULT, "MPI_Allgather_init");
	*(void **)&p_alltoall_init = dlsym(RTLD_DEFAULT, "MPI_Alltoall_init");
	*(void **)&p_reduce_init = dlsym(RTLD_DEFAULT, "MPI_Reduce_init");
	*(void **)&p_barrier_init = dlsym(RTLD_DEFAULT, "MPI_Barrier_init");
	*(void **)&p_allgatherv_init = dlsym(RTLD_DEFAULT, "MPI_Allgatherv_init");
	*(void **)&p_iallreduce_c = dlsym(RTLD_DEFAULT, "MPI_Iallreduce_c");
	*(void **)&p_ibcast_c = dlsym(RTLD_DEFAULT, "MPI_Ibcast_c");
#endif
}

enum { P_ALLREDUCE, P_BCAST, P_ALLGATHER, P_ALLTOALL, P_REDUCE, P_BARRIER, NPERS };
static const char *pname[NPERS] = {"allreduce", "bcast", "allgather", "alltoall", "reduce", "barrier"};
#define PERS_ITERS 200
#define PN 16 /* elements per rank */

struct pers {
	int persistent;	 /* a persistent request (else a nonblocking call per start) */
	double *sb, *rb; /* tracked */
	MPI_Request req;
	uint64_t h; /* digest over all restarts */
};

static int pers_root(int p) { return p == P_BCAST ? size - 1 : 0; }

static void pers_fill(struct pers *P, int p, int it)
{
	for (int i = 0; i < PN * size; i++)
		P->sb[i] = -2, P->rb[i] = -1;
	for (int i = 0; i < PN; i++)
		if (p == P_ALLREDUCE || p == P_REDUCE)
			P->sb[i] = (rank * 5 + i * 3 + it) % 17 - 8;
		else if (p == P_BCAST)
			P->rb[i] = rank == pers_root(p) ? it * 100 + i : -1;
		else if (p == P_ALLGATHER)
			P->sb[i] = rank * 1000 + it * 10 + i;
	if (p == P_ALLTOALL)
		for (int i = 0; i < PN * size; i++)
			P->sb[i] = rank * 100000 + it * 100 + i;
	TODEV(P->sb);
	TODEV(P->rb);
}

static void pers_check(struct pers *P, int p, int it)
{
	int bad = 0, rep = 0;
	TOHOST(P->rb);
	switch (p) {
	case P_ALLREDUCE:
	case P_REDUCE:
		if (p == P_ALLREDUCE || rank == 0) {
			for (int i = 0; i < PN; i++) {
				double w = p == P_ALLREDUCE ? 0 : -1e9;
				for (int r = 0; r < size; r++) {
					double v = (r * 5 + i * 3 + it) % 17 - 8;
					w = p == P_ALLREDUCE ? w + v : (v > w ? v : w);
				}
				bad += P->rb[i] != w;
			}
			rep = PN;
		}
		break;
	case P_BCAST:
		for (int i = 0; i < PN; i++)
			bad += P->rb[i] != it * 100 + i;
		rep = PN;
		break;
	case P_ALLGATHER:
		for (int r = 0; r < size; r++)
			for (int i = 0; i < PN; i++)
				bad += P->rb[r * PN + i] != r * 1000 + it * 10 + i;
		rep = PN * size;
		break;
	case P_ALLTOALL: /* block j of rank r: r*100000 + it*100 + j*PN + i */
		for (int r = 0; r < size; r++)
			for (int i = 0; i < PN / size; i++)
				bad += P->rb[r * (PN / size) + i] != r * 100000 + it * 100 + rank * (PN / size) + i;
		rep = (PN / size) * size;
		break;
	}
	CHECK(bad == 0, "persistent %s restart %d: %d wrong elements", pname[p], it, bad);
	P->h = digest_more(P->h, P->rb, sizeof(double) * (size_t)rep);
}

static void pers_init(struct pers *P, int p)
{
	void *sb = D(P->sb), *rb = D(P->rb);
	int a2a = PN / size; /* alltoall: PN/size elements to each rank */
	MPI_Comm w = MPI_COMM_WORLD;
	P->req = MPI_REQUEST_NULL;
	switch (p) {
	case P_ALLREDUCE:
		P->persistent = p_allreduce_init && !p_allreduce_init(sb, rb, PN, MPI_DOUBLE, MPI_SUM, w, MPI_INFO_NULL, &P->req);
		break;
	case P_BCAST:
		P->persistent = p_bcast_init && !p_bcast_init(rb, PN, MPI_DOUBLE, pers_root(p), w, MPI_INFO_NULL, &P->req);
		break;
	case P_ALLGATHER:
		P->persistent = p_allgather_init && !p_allgather_init(sb, PN, MPI_DOUBLE, rb, PN, MPI_DOUBLE, w, MPI_INFO_NULL, &P->req);
		break;
	case P_ALLTOALL:
		P->persistent = p_alltoall_init && !p_alltoall_init(sb, a2a, MPI_DOUBLE, rb, a2a, MPI_DOUBLE, w, MPI_INFO_NULL, &P->req);
		break;
	case P_REDUCE:
		P->persistent = p_reduce_init && !p_reduce_init(sb, rb, PN, MPI_DOUBLE, MPI_MAX, 0, w, MPI_INFO_NULL, &P->req);
		break;
	case P_BARRIER:
		P->persistent = p_barrier_init && !p_barrier_init(w, MPI_INFO_NULL, &P->req);
		break;
	}
	CHECK(!P->persistent || P->req != MPI_REQUEST_NULL, "persistent %s: no request", pname[p]);
}

/* Nonblocking and persistent calls do not wait for their peers. Rank 0
 * starts NWAIT all-reduces (on the fused path each job queued behind the
 * last; fewer than its doorbell holds) and only then receives from the
 * last rank, which sends synchronously before it starts the same calls:
 * a start that waited for the last rank's would never return. The
 * persistent call runs on a new communicator, whose device paths its
 * initialization (nonlocal) sets up, where the first start would wait
 * for every rank to set them up. */
static void test_no_wait(void)
{
	enum { NWAIT = 20, PER = 5 };
	const int last = size - 1, sum = size * (size + 1) / 2;
	int *in = CALLOC(NWAIT * PER, sizeof(int)), *out = CALLOC(NWAIT * PER, sizeof(int));
	MPI_Request q[NWAIT];
	int token = 0, bad = 0;
	for (int i = 0; i < NWAIT * PER; i++)
		in[i] = (rank + 1) * (i + 1), out[i] = -1;
	TODEV(in);
	TODEV(out);
	if (rank == last && last > 0)
		MPI_Ssend(&token, 1, MPI_INT, 0, 91, MPI_COMM_WORLD);
	for (int j = 0; j < NWAIT; j++)
		MPI_Iallreduce(D(in + j * PER), D(out + j * PER), PER, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[j]);
	if (rank == 0 && last > 0)
		MPI_Recv(&token, 1, MPI_INT, last, 91, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	MPI_Waitall(NWAIT, q, STATUSES_IGNORE);
	TOHOST(out);
	for (int i = 0; i < NWAIT * PER; i++)
		bad += out[i] != (i + 1) * sum;
	CHECK(bad == 0, "%d iallreduce started before a receive: %d elements wrong", NWAIT, bad);
	report("world.iallreduce.20_before_a_receive", out, sizeof(int) * NWAIT * PER);

	MPI_Comm dup;
	MPI_Request p;
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	for (int i = 0; i < PER; i++)
		out[i] = -1;
	TODEV(out);
	if (p_allreduce_init)
		p_allreduce_init(D(in), D(out), PER, MPI_INT, MPI_SUM, dup, MPI_INFO_NULL, &p);
	if (rank == last && last > 0)
		MPI_Ssend(&token, 1, MPI_INT, 0, 92, MPI_COMM_WORLD);
	if (p_allreduce_init)
		MPI_Start(&p);
	else
		MPI_Iallreduce(D(in), D(out), PER, MPI_INT, MPI_SUM, dup, &p);
	if (rank == 0 && last > 0)
		MPI_Recv(&token, 1, MPI_INT, last, 92, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	MPI_Wait(&p, MPI_STATUS_IGNORE);
	TOHOST(out);
	bad = 0;
	for (int i = 0; i < PER; i++)
		bad += out[i] != (i + 1) * sum;
	CHECK(bad == 0, "persistent allreduce started before a receive, on a new communicator: %d elements wrong", bad);
	report("dup.allreduce_init.start_before_a_receive", out, sizeof(int) * PER);
	if (p_allreduce_init)
		MPI_Request_free(&p);
	MPI_Comm_free(&dup);
	FREE(in), FREE(out);
}

/* A persistent call's count and displacement arrays, freed (after being
 * overwritten) once the init has returned, as mpi4py does with the arrays
 * it narrows MPI_Allgatherv_init_c's into: MPIs copy them at the init,
 * and every start must still use what the init was given. */
static void test_persistent_arrays(void)
{
	if (!p_allgatherv_init)
		return;
	int *cnt = malloc(sizeof(int) * (size_t)size), *dsp = malloc(sizeof(int) * (size_t)size);
	double *sb = CALLOC(3, sizeof(double)), *rb = CALLOC(3 * (size_t)size + 1, sizeof(double));
	for (int r = 0; r < size; r++)
		cnt[r] = 1 + r % 3, dsp[r] = 3 * r;
	MPI_Request req;
	CHECK(p_allgatherv_init(D(sb), 1 + rank % 3, MPI_DOUBLE, D(rb), cnt, dsp, MPI_DOUBLE, MPI_COMM_WORLD, MPI_INFO_NULL, &req) == MPI_SUCCESS,
	      "allgatherv_init");
	for (int r = 0; r < size; r++)
		cnt[r] = -1, dsp[r] = -1;
	free(cnt), free(dsp);
	for (int it = 0; it < 3; it++) {
		for (int i = 0; i < 3; i++)
			sb[i] = rank * 10 + it + i;
		for (int i = 0; i < 3 * size; i++)
			rb[i] = -1;
		TODEV(sb), TODEV(rb);
		MPI_Start(&req);
		MPI_Wait(&req, MPI_STATUS_IGNORE);
		TOHOST(rb);
		for (int r = 0; r < size; r++)
			for (int i = 0; i < 3; i++)
				CHECK(rb[3 * r + i] == (i < 1 + r % 3 ? r * 10 + it + i : -1), "allgatherv_init, arrays freed: start %d, rank %d's block, element %d: %g",
				      it, r, i, rb[3 * r + i]);
	}
	MPI_Request_free(&req);
	FREE(sb), FREE(rb);
}

/* Nonblocking calls the device paths rewrite or stage whole: a complex
 * sum (run as a sum of its parts) and an all-to-all-w of MPI_BOTTOM
 * buffers whose datatypes hold absolute addresses (mpi4py's *Bottom
 * tests; their persistent forms start these). */
static void test_rewritten(void)
{
	enum { N = 3 };
	double _Complex *in = CALLOC(N, sizeof(double _Complex)), *out = CALLOC(N, sizeof(double _Complex));
	for (int i = 0; i < N; i++)
		in[i] = (double)(rank + i) - (double)i * 1.0i, out[i] = 0;
	MPI_Request req;
	TODEV(in), TODEV(out);
	MPI_Iallreduce(D(in), D(out), N, MPI_C_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD, &req);
	MPI_Wait(&req, MPI_STATUS_IGNORE);
	TOHOST(out);
	for (int i = 0; i < N; i++)
		CHECK(out[i] == (double)(size * (size - 1) / 2 + size * i) - (double)(size * i) * 1.0i, "iallreduce double complex element %d", i);
	int *sb = CALLOC((size_t)size, sizeof(int)), *rb = CALLOC((size_t)size, sizeof(int));
	int *cnt = malloc(sizeof(int) * (size_t)size), *dsp = malloc(sizeof(int) * (size_t)size);
	MPI_Datatype *st = malloc(sizeof(MPI_Datatype) * (size_t)size), *rt = malloc(sizeof(MPI_Datatype) * (size_t)size);
	for (int j = 0; j < size; j++) {
		MPI_Aint a[2];
		int one = 1;
		MPI_Get_address(D(&sb[j]), &a[0]), MPI_Get_address(D(&rb[j]), &a[1]);
		MPI_Type_create_struct(1, &one, &a[0], (MPI_Datatype[]){MPI_INT}, &st[j]);
		MPI_Type_create_struct(1, &one, &a[1], (MPI_Datatype[]){MPI_INT}, &rt[j]);
		MPI_Type_commit(&st[j]), MPI_Type_commit(&rt[j]);
		cnt[j] = 1, dsp[j] = 0, sb[j] = (int)val(rank, j, 5), rb[j] = -1;
	}
	TODEV(sb), TODEV(rb);
	MPI_Ialltoallw(MPI_BOTTOM, cnt, dsp, st, MPI_BOTTOM, cnt, dsp, rt, MPI_COMM_WORLD, &req);
	MPI_Wait(&req, MPI_STATUS_IGNORE);
	TOHOST(rb);
	for (int j = 0; j < size; j++) {
		CHECK(rb[j] == (int)val(j, rank, 5), "ialltoallw MPI_BOTTOM: from rank %d: %d", j, rb[j]);
		MPI_Type_free(&st[j]), MPI_Type_free(&rt[j]);
	}
	free(cnt), free(dsp), free(st), free(rt);
	FREE(sb), FREE(rb), FREE(in), FREE(out);
}

/* A persistent all-reduce of no bytes where rank 0 passes NULL (an empty
 * tensor's pointer) and the others device buffers: every rank's request
 * is of one kind (the MPI's own where it has MPI_Allreduce_init), so that
 * their starts match, three times over. It runs after persistent calls
 * collmux ran itself on device buffers: MPICH 4.0's own persistent
 * collectives never completed once a persistent request to MPI_PROC_NULL
 * had been made, as collmux's anchors were. */
static void test_persistent_empty(void)
{
	if (!p_allreduce_init)
		return;
	double *b = CALLOC(2, sizeof(double));
	void *s = rank == 0 ? NULL : D(b), *r = rank == 0 ? NULL : D(b + 1);
	MPI_Request q;
	const int rc = p_allreduce_init(s, r, 0, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &q);
	CHECK(rc == MPI_SUCCESS, "allreduce_init of no bytes: error %d", rc);
	for (int i = 0; rc == MPI_SUCCESS && i < 3; i++) {
		MPI_Start(&q);
		MPI_Wait(&q, MPI_STATUS_IGNORE);
	}
	if (rc == MPI_SUCCESS)
		MPI_Request_free(&q);
	FREE(b);
}

#ifdef COLLTEST_CUDA
/* The program's own persistent send to MPI_PROC_NULL, freed; then a
 * persistent all-reduce on device buffers (collmux's own) started three
 * times, then started and freed while active. MPICH 4.0 never starts a
 * persistent request whose reused object last held one to MPI_PROC_NULL,
 * so collmux's anchor, which may reuse it, must never need starting. Not
 * in the host build: there MPICH's own persistent all-reduce reuses that
 * object and hangs, natively. No digest lines: the host run has none. */
static void test_after_proc_null(void)
{
	enum { PER = 5 };
	if (!p_allreduce_init)
		return;
	int *in = CALLOC(PER, sizeof(int)), *out = CALLOC(PER, sizeof(int)), x = 0, bad = 0;
	for (int i = 0; i < PER; i++)
		in[i] = (rank + 1) * (i + 1);
	TODEV(in);
	MPI_Request a, p;
	MPI_Send_init(&x, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &a);
	MPI_Request_free(&a);
	p_allreduce_init(D(in), D(out), PER, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &p);
	for (int it = 0; it < 3; it++) {
		MPI_Start(&p);
		MPI_Wait(&p, MPI_STATUS_IGNORE);
	}
	TOHOST(out);
	for (int i = 0; i < PER; i++)
		bad += out[i] != (i + 1) * size * (size + 1) / 2;
	CHECK(bad == 0, "persistent allreduce after a freed persistent send to MPI_PROC_NULL: %d elements wrong", bad);
	MPI_Start(&p);
	MPI_Request_free(&p); /* active: collmux finishes it */
	MPI_Barrier(MPI_COMM_WORLD);
	FREE(in), FREE(out);
}
#endif

/* Without MPI_*_init: the nonblocking call with the same arguments. */
static void pers_fallback(struct pers *P, int p)
{
	void *sb = D(P->sb), *rb = D(P->rb);
	int a2a = PN / size;
	MPI_Comm w = MPI_COMM_WORLD;
	switch (p) {
	case P_ALLREDUCE: MPI_Iallreduce(sb, rb, PN, MPI_DOUBLE, MPI_SUM, w, &P->req); break;
	case P_BCAST: MPI_Ibcast(rb, PN, MPI_DOUBLE, pers_root(p), w, &P->req); break;
	case P_ALLGATHER: MPI_Iallgather(sb, PN, MPI_DOUBLE, rb, PN, MPI_DOUBLE, w, &P->req); break;
	case P_ALLTOALL: MPI_Ialltoall(sb, a2a, MPI_DOUBLE, rb, a2a, MPI_DOUBLE, w, &P->req); break;
	case P_REDUCE: MPI_Ireduce(sb, rb, PN, MPI_DOUBLE, MPI_MAX, 0, w, &P->req); break;
	case P_BARRIER: MPI_Ibarrier(w, &P->req); break;
	}
}

static void test_persistent(void)
{
	struct pers P[NPERS];
	int npers = 0;
	for (int p = 0; p < NPERS; p++) {
		P[p].sb = CALLOC(PN * (size_t)size, sizeof(double));
		P[p].rb = CALLOC(PN * (size_t)size, sizeof(double));
		P[p].h = 1469598103934665603ull;
		pers_init(&P[p], p);
		npers += P[p].persistent;
	}
	if (rank == 0) {
		fprintf(stderr, "nbtest: persistent collectives:");
		for (int p = 0; p < NPERS; p++)
			fprintf(stderr, " %s=%s", pname[p], P[p].persistent ? "MPI_Start" : "nonblocking-fallback");
		fprintf(stderr, "\n");
	}
	/* (An inactive persistent request should complete at once under
	 * MPI_Test, but MPICH 4.0.2 gives flag 0 for a collective one never
	 * started; p2ptest checks this on persistent point-to-point.) */
	/* one at a time: MPI_Start, then MPI_Wait or a MPI_Test loop */
	for (int it = 0; it < PERS_ITERS / 2; it++)
		for (int p = 0; p < NPERS; p++) {
			pers_fill(&P[p], p, it);
			if (P[p].persistent)
				MPI_Start(&P[p].req);
			else
				pers_fallback(&P[p], p);
			if (it % 2 == 0)
				MPI_Wait(&P[p].req, MPI_STATUS_IGNORE);
			else
				for (int flag = 0; !flag;)
					MPI_Test(&P[p].req, &flag, MPI_STATUS_IGNORE);
			CHECK((P[p].req != MPI_REQUEST_NULL) == P[p].persistent, "persistent %s restart %d: request after completion", pname[p], it);
			pers_check(&P[p], p, it);
		}
	/* all at once: MPI_Startall, then MPI_Waitall */
	for (int it = PERS_ITERS / 2; it < PERS_ITERS; it++) {
		MPI_Request all[NPERS], started[NPERS];
		int ns = 0;
		for (int p = 0; p < NPERS; p++) {
			pers_fill(&P[p], p, it);
			if (P[p].persistent)
				started[ns++] = P[p].req;
			else
				pers_fallback(&P[p], p);
		}
		if (ns)
			MPI_Startall(ns, started);
		for (int p = 0, j = 0; p < NPERS; p++)
			all[p] = P[p].persistent ? started[j++] : P[p].req;
		MPI_Waitall(NPERS, all, STATUSES_IGNORE);
		for (int p = 0; p < NPERS; p++) {
			CHECK((all[p] != MPI_REQUEST_NULL) == P[p].persistent, "persistent %s restart %d: request after waitall", pname[p], it);
			P[p].req = all[p];
			pers_check(&P[p], p, it);
		}
	}
	for (int p = 0; p < NPERS; p++) {
		char name[64];
		if (P[p].persistent) {
			MPI_Request_free(&P[p].req);
			CHECK(P[p].req == MPI_REQUEST_NULL, "persistent %s: MPI_Request_free left the handle", pname[p]);
		}
		snprintf(name, sizeof name, "world.persistent.%s.%d_restarts", pname[p], PERS_ITERS);
		report_digest(name, P[p].h);
		FREE(P[p].sb), FREE(P[p].rb);
	}
	(void)npers;
}

/* ---- the large-count twins ---- */
static void test_large_count(void)
{
	double *in = CALLOC(7, sizeof(double)), *out = CALLOC(7, sizeof(double));
	int *bb = CALLOC(9, sizeof(int)), root = size - 1, bad = 0;
	MPI_Request q;
	for (int i = 0; i < 7; i++)
		in[i] = rank * 3 + i, out[i] = -1;
	TODEV(in);
	TODEV(out);
	if (p_iallreduce_c)
		p_iallreduce_c(D(in), D(out), (MPI_Count)7, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q);
	else
		MPI_Iallreduce(D(in), D(out), 7, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q);
	complete1(&q, W_WAIT, "iallreduce_c");
	TOHOST(out);
	for (int i = 0; i < 7; i++)
		bad += out[i] != 3.0 * size * (size - 1) / 2 + (double)i * size;
	CHECK(bad == 0, "iallreduce_c: %d wrong", bad);
	report("world.iallreduce_c.double.sum.7", out, sizeof(double) * 7);
	for (int i = 0; i < 9; i++)
		bb[i] = rank == root ? 40 + i : -1;
	TODEV(bb);
	if (p_ibcast_c)
		p_ibcast_c(D(bb), (MPI_Count)9, MPI_INT, root, MPI_COMM_WORLD, &q);
	else
		MPI_Ibcast(D(bb), 9, MPI_INT, root, MPI_COMM_WORLD, &q);
	complete1(&q, W_TESTSOME, "ibcast_c");
	TOHOST(bb);
	bad = 0;
	for (int i = 0; i < 9; i++)
		bad += bb[i] != 40 + i;
	CHECK(bad == 0, "ibcast_c: %d wrong", bad);
	report("world.ibcast_c.int.9", bb, sizeof(int) * 9);
	if (rank == 0)
		fprintf(stderr, "nbtest: MPI_Iallreduce_c %s, MPI_Ibcast_c %s\n", p_iallreduce_c ? "called" : "absent: MPI_Iallreduce instead",
			p_ibcast_c ? "called" : "absent: MPI_Ibcast instead");
	FREE(in), FREE(out), FREE(bb);
}

/* ---- MPI_THREAD_MULTIPLE ---- */
#define TITERS 60

static void *worker(void *arg)
{
	int t = (int)(long)arg, r, s;
	MPI_Comm c = tcomm[t];
	MPI_Comm_rank(c, &r);
	MPI_Comm_size(c, &s);
	long *ain = CALLOC(8, sizeof(long)), *aout = CALLOC(8, sizeof(long)), *bc = CALLOC(8, sizeof(long));
	int *gin = CALLOC(3, sizeof(int)), *gout = CALLOC(3 * (size_t)s, sizeof(int));
	uint64_t h = 1469598103934665603ull;
	for (int it = 0; it < TITERS; it++) {
		int root = it % s;
		for (int i = 0; i < 8; i++)
			ain[i] = r * 100 + t * 10 + i + it, aout[i] = -1, bc[i] = r == root ? it * 8 + i + t : -1;
		for (int i = 0; i < 3; i++)
			gin[i] = r * 10 + i + it + t;
		TODEV(ain), TODEV(aout), TODEV(bc), TODEV(gin), TODEV(gout);
		MPI_Request q[4];
		MPI_Iallreduce(D(ain), D(aout), 8, MPI_LONG, MPI_SUM, c, &q[0]);
		MPI_Ibcast(D(bc), 8, MPI_LONG, root, c, &q[1]);
		MPI_Iallgather(D(gin), 3, MPI_INT, D(gout), 3, MPI_INT, c, &q[2]);
		MPI_Ibarrier(c, &q[3]);
		switch ((it + t) % 3) {
		case 0:
			for (int j = 0; j < 4; j++)
				MPI_Wait(&q[j], MPI_STATUS_IGNORE);
			break;
		case 1:
			for (int j = 3; j >= 0; j--)
				for (int flag = 0; !flag;)
					MPI_Test(&q[j], &flag, MPI_STATUS_IGNORE);
			break;
		case 2:
			for (int flag = 0; !flag;)
				MPI_Testall(4, q, &flag, STATUSES_IGNORE);
			break;
		}
		TOHOST(aout), TOHOST(bc), TOHOST(gout);
		int bad = 0;
		for (int i = 0; i < 8; i++) {
			bad += aout[i] != 100L * s * (s - 1) / 2 + (long)s * (t * 10 + i + it);
			bad += bc[i] != it * 8 + i + t;
		}
		for (int j = 0; j < s; j++)
			for (int i = 0; i < 3; i++)
				bad += gout[j * 3 + i] != j * 10 + i + it + t;
		CHECK(bad == 0, "thread %d iteration %d: %d wrong", t, it, bad);
		h = digest_more(h, aout, sizeof(long) * 8);
		h = digest_more(h, bc, sizeof(long) * 8);
		h = digest_more(h, gout, sizeof(int) * 3 * (size_t)s);
	}
	thash[t] = h;
	FREE(ain), FREE(aout), FREE(bc), FREE(gin), FREE(gout);
	return NULL;
}

int main(int argc, char **argv)
{
#ifdef COLLTEST_CUDA
	gpu_select(); /* one GPU per rank of a node, before MPI starts */
#endif
	const int threads = argc > 1 && strcmp(argv[1], "threads") == 0;
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION < 40100000
	/* MPICH 4.0's persistent allgather by recursive doubling (its choice
	 * for small messages on 2^k ranks) loses blocks from the second start
	 * on, and can crash; its ring schedule is sound. */
	setenv("MPIR_CVAR_IALLGATHER_INTRA_ALGORITHM", "sched_ring", 0);
#endif
	const int provided = test_init(&argc, &argv, threads, 0);
	if (threads) {
		if (provided < MPI_THREAD_MULTIPLE) {
			say("nbtest: skipped: MPI_THREAD_MULTIPLE not provided");
			MPI_Finalize();
			return 0;
		}
		const int rc = run_threads(worker, TITERS, "iterations", "nbtest");
		MPI_Finalize();
		return rc;
	}
	lookup_mpi4();

	test_null_requests();
	test_each(MPI_COMM_WORLD, "world");

	/* a sub-communicator in reverse rank order */
	MPI_Comm rev;
	MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &rev);
	test_batches(rev, "rev");
	MPI_Comm_free(&rev);
	test_batches(MPI_COMM_WORLD, "world");

	test_many();
	test_persistent();
	test_no_wait();
	test_persistent_empty();
#ifdef COLLTEST_CUDA
	test_after_proc_null();
#endif
	test_persistent_arrays();
	test_rewritten();
	test_large_count();

	const int rc = finish("nbtest", "");
	MPI_Finalize();
	return rc;
}
