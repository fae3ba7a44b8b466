//go:build collmux_lib

/*
 * fortran.c: what the generated Fortran entry points (zfortran.c) share,
 * and MPI_INIT / MPI_INIT_THREAD for Fortran programs.
 *
 * Open MPI's Fortran binding (mpif.h and `use mpi`) calls PMPI_* directly,
 * so its collectives never reach collmux's MPI_* entry points. collmux
 * therefore exports the Fortran symbols too: under Open MPI they convert
 * the arguments as Open MPI's binding does (handles with *_f2c, the
 * MPI_IN_PLACE and MPI_BOTTOM sentinels, integers by reference) and call
 * collmux's C entry points; under any other MPI, whose Fortran binding
 * calls the C MPI_* functions, they forward to that binding. The `use
 * mpi_f08` binding (ompi_*_f symbols) is not intercepted: exporting ompi_*
 * symbols would make MPI probes take collmux for Open MPI.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include "cmx.h"

void *cmx_fortran_lookup(void **next, const char *sym)
{
	void *f = dlsym(RTLD_NEXT, sym);
	if (!f)
		cmx_fatal("%s: the MPI library's Fortran binding is not loaded", sym);
	__atomic_store_n(next, f, __ATOMIC_RELEASE);
	return f;
}

/* Open MPI's Fortran MPI_IN_PLACE and MPI_BOTTOM are common blocks; a
 * program compiled by any Fortran compiler names one of these. The
 * addresses are those every reference resolves to (global scope). */
static void *in_place[4], *bottom[4], *status_ignore[4], *statuses_ignore[4];
static pthread_once_t sentinels_once = PTHREAD_ONCE_INIT;

static void find_sentinels(void)
{
	static const char *ip[4] = {"mpi_fortran_in_place_", "mpi_fortran_in_place__", "mpi_fortran_in_place", "MPI_FORTRAN_IN_PLACE"};
	static const char *bt[4] = {"mpi_fortran_bottom_", "mpi_fortran_bottom__", "mpi_fortran_bottom", "MPI_FORTRAN_BOTTOM"};
	static const char *si[4] = {"mpi_fortran_status_ignore_", "mpi_fortran_status_ignore__", "mpi_fortran_status_ignore",
				    "MPI_FORTRAN_STATUS_IGNORE"};
	static const char *ssi[4] = {"mpi_fortran_statuses_ignore_", "mpi_fortran_statuses_ignore__", "mpi_fortran_statuses_ignore",
				     "MPI_FORTRAN_STATUSES_IGNORE"};
	for (int i = 0; i < 4; i++) {
		in_place[i] = dlsym(RTLD_DEFAULT, ip[i]);
		bottom[i] = dlsym(RTLD_DEFAULT, bt[i]);
		status_ignore[i] = dlsym(RTLD_DEFAULT, si[i]);
		statuses_ignore[i] = dlsym(RTLD_DEFAULT, ssi[i]);
	}
}

void *cmx_f_buf(void *p)
{
	pthread_once(&sentinels_once, find_sentinels);
	for (int i = 0; i < 4; i++) {
		if (p && p == in_place[i])
			return (void *)cmx_abi.in_place;
		if (p && p == bottom[i])
			return NULL; /* Open MPI's C MPI_BOTTOM */
	}
	return p;
}

/* MPI_INIT and MPI_INIT_THREAD: the MPI's own, then collmux's set-up, as
 * MPI_Init does for C programs (init.c; under MPICH the binding calls
 * MPI_Init, which collmux intercepts already). */
static void f_init(void **next, const char *sym, int *ierr)
{
	cmx_mpi_early();
	((void (*)(int *))cmx_fortran_next(next, sym))(ierr);
	cmx_set_up(*ierr);
	if (cmx_fortran_direct())
		cmx_after_init(*ierr);
}

static void f_init_thread(void **next, const char *sym, int *required, int *provided, int *ierr)
{
	cmx_mpi_early();
	((void (*)(int *, int *, int *))cmx_fortran_next(next, sym))(required, provided, ierr);
	cmx_set_up(*ierr);
	if (cmx_fortran_direct())
		cmx_after_init(*ierr);
}

#define F_INIT(sym)                              \
	CMX_EXPORT void sym(int *ierr)           \
	{                                        \
		static void *next;               \
		f_init(&next, #sym, ierr);       \
	}
#define F_INIT_THREAD(sym)                                                  \
	CMX_EXPORT void sym(int *required, int *provided, int *ierr)        \
	{                                                                   \
		static void *next;                                          \
		f_init_thread(&next, #sym, required, provided, ierr);       \
	}
F_INIT(mpi_init_)
F_INIT(mpi_init__)
F_INIT(mpi_init)
F_INIT(MPI_INIT)
F_INIT_THREAD(mpi_init_thread_)
F_INIT_THREAD(mpi_init_thread__)
F_INIT_THREAD(mpi_init_thread)
F_INIT_THREAD(MPI_INIT_THREAD)

/* A Fortran status (MPI_STATUS_SIZE integers, or Open MPI's
 * MPI_STATUS_IGNORE common block) for a C call: the C status it fills,
 * converted back with MPI_Status_c2f once the call returned. */
static int sentinel(const int *f, void *const *names)
{
	pthread_once(&sentinels_once, find_sentinels);
	for (int i = 0; i < 4; i++)
		if (f && (const void *)f == names[i])
			return 1;
	return 0;
}

static int ignored(const int *f) { return sentinel(f, status_ignore); }

void *cmx_f_status(int *f, cmx_f_status_t *c) { return ignored(f) ? (void *)cmx_abi.status_ignore : (void *)c; }

void cmx_f_status_back(int *f, cmx_f_status_t *c, int rc)
{
	(void)rc; /* MPI fills the status of a failed receive too (MPI_ERR_TRUNCATE: its count) */
	if (!ignored(f))
		cmx_px.Status_c2f(c, f);
}

/* ---- Fortran's start and completion calls (Open MPI) ----
 * Under Open MPI a Fortran program's MPI_WAIT & co. call PMPI_* directly,
 * past collmux's request table: a request collmux owns (a nonblocking call
 * on device memory) would complete without its data copied back. While
 * collmux owns no request they go straight to Open MPI's own; otherwise
 * the Fortran requests and statuses are converted and collmux's C
 * functions (mpi/request.c) complete them (MPI_REQUEST_GET_STATUS too,
 * which completes nothing but copies a finished receive back). Indices
 * become 1-based. */
int MPI_Wait(void *, void *);
int MPI_Test(void *, int *, void *);
int MPI_Waitall(int, void *, void *);
int MPI_Testall(int, void *, int *, void *);
int MPI_Waitany(int, void *, int *, void *);
int MPI_Testany(int, void *, int *, int *, void *);
int MPI_Waitsome(int, void *, int *, int *, void *);
int MPI_Testsome(int, void *, int *, int *, void *);
int MPI_Request_get_status(cmx_h, int *, void *);
int MPI_Cancel(void *);
int MPI_Request_free(void *);
int MPI_Start(void *);
int MPI_Startall(int, void *);

static int own(void) { return cmx_fortran_direct() && cmx_req_owns_any(); }

/* n Fortran requests and room for their statuses, as C arrays */
typedef struct {
	int n;
	cmx_h *reqs;
	char *st; /* NULL: MPI_STATUSES_IGNORE */
	cmx_h small[8];
	char small_st[8 * sizeof(cmx_f_status_t)];
} fset;

/* fst NULL: no statuses wanted */
static int fset_in(fset *s, int n, const int *freqs, const int *fst)
{
	s->n = n < 0 ? 0 : n;
	const int big = s->n > 8, none = !fst || sentinel(fst, statuses_ignore);
	s->reqs = big ? malloc(sizeof(cmx_h) * (size_t)s->n) : s->small;
	s->st = none ? NULL : big ? malloc((size_t)cmx_abi.status_size * (size_t)s->n) : s->small_st;
	if (!s->reqs || (!none && !s->st)) {
		if (big) {
			free(s->reqs);
			free(s->st);
		}
		return 0;
	}
	for (int i = 0; i < s->n; i++)
		s->reqs[i] = cmx_px.Request_f2c(freqs[i]);
	return 1;
}

/* requests back, and the first m statuses: all n of Waitall, or the
 * completed requests' of Waitsome, in the order of their indices */
static void fset_out(fset *s, int *freqs, int *fst, int m)
{
	const int fsize = cmx_abi.status_size / (int)sizeof(int); /* Open MPI's MPI_STATUS_SIZE */
	for (int i = 0; i < s->n; i++)
		freqs[i] = cmx_px.Request_c2f(s->reqs[i]);
	for (int k = 0; s->st && k < m; k++)
		cmx_px.Status_c2f(s->st + (size_t)k * (size_t)cmx_abi.status_size, fst + (size_t)k * (size_t)fsize);
	if (s->reqs != s->small)
		free(s->reqs);
	if (s->st && s->st != s->small_st)
		free(s->st);
}

static void *fset_st(fset *s) { return s->st ? s->st : (void *)cmx_abi.status_ignore; }

#define FNEXT(type, ...) ((type)cmx_fortran_next(next, sym))(__VA_ARGS__)
#define FDONE(rc)               \
	do {                    \
		if (ierr)       \
			*ierr = rc; \
	} while (0)

static void f_wait(void **next, const char *sym, int *req, int *status, int *ierr)
{
	if (!own()) {
		FNEXT(void (*)(int *, int *, int *), req, status, ierr);
		return;
	}
	cmx_h c = cmx_px.Request_f2c(*req);
	cmx_f_status_t st;
	int rc = MPI_Wait(&c, cmx_f_status(status, &st));
	*req = cmx_px.Request_c2f(c);
	cmx_f_status_back(status, &st, rc);
	FDONE(rc);
}

static void f_test(void **next, const char *sym, int *req, int *flag, int *status, int *ierr)
{
	if (!own()) {
		FNEXT(void (*)(int *, int *, int *, int *), req, flag, status, ierr);
		return;
	}
	cmx_h c = cmx_px.Request_f2c(*req);
	cmx_f_status_t st;
	int f = 0, rc = MPI_Test(&c, &f, cmx_f_status(status, &st));
	*req = cmx_px.Request_c2f(c);
	*flag = f != 0; /* LOGICAL: Open MPI's .TRUE. is 1 */
	if (f)
		cmx_f_status_back(status, &st, rc);
	FDONE(rc);
}

static void f_waitall(void **next, const char *sym, int *n, int *reqs, int *statuses, int *ierr)
{
	fset s;
	if (!own()) {
		FNEXT(void (*)(int *, int *, int *, int *), n, reqs, statuses, ierr);
		return;
	}
	if (!fset_in(&s, *n, reqs, statuses)) {
		FDONE(cmx_abi.err_other);
		return;
	}
	int rc = MPI_Waitall(s.n, s.reqs, fset_st(&s));
	fset_out(&s, reqs, statuses, s.n);
	FDONE(rc);
}

static void f_testall(void **next, const char *sym, int *n, int *reqs, int *flag, int *statuses, int *ierr)
{
	fset s;
	if (!own()) {
		FNEXT(void (*)(int *, int *, int *, int *, int *), n, reqs, flag, statuses, ierr);
		return;
	}
	if (!fset_in(&s, *n, reqs, statuses)) {
		FDONE(cmx_abi.err_other);
		return;
	}
	int f = 0, rc = MPI_Testall(s.n, s.reqs, &f, fset_st(&s));
	*flag = f != 0;
	fset_out(&s, reqs, statuses, f ? s.n : 0);
	FDONE(rc);
}

/* the requests back, and the one status where the call set it: that of
 * the request completed, or the empty status of MPI_UNDEFINED */
static void any_out(fset *s, int *reqs, int *status, int set, cmx_f_status_t *st, int rc)
{
	fset_out(s, reqs, NULL, 0);
	if (set)
		cmx_f_status_back(status, st, rc);
}

static void f_waitany(void **next, const char *sym, int *n, int *reqs, int *index, int *status, int *ierr)
{
	fset s;
	if (!own()) {
		FNEXT(void (*)(int *, int *, int *, int *, int *), n, reqs, index, status, ierr);
		return;
	}
	if (!fset_in(&s, *n, reqs, NULL)) {
		FDONE(cmx_abi.err_other);
		return;
	}
	cmx_f_status_t st;
	int i = -1, rc = MPI_Waitany(s.n, s.reqs, &i, cmx_f_status(status, &st));
	any_out(&s, reqs, status, 1, &st, rc);
	*index = i >= 0 ? i + 1 : i; /* MPI_UNDEFINED stays */
	FDONE(rc);
}

static void f_testany(void **next, const char *sym, int *n, int *reqs, int *index, int *flag, int *status, int *ierr)
{
	fset s;
	if (!own()) {
		FNEXT(void (*)(int *, int *, int *, int *, int *, int *), n, reqs, index, flag, status, ierr);
		return;
	}
	if (!fset_in(&s, *n, reqs, NULL)) {
		FDONE(cmx_abi.err_other);
		return;
	}
	cmx_f_status_t st;
	int i = -1, f = 0, rc = MPI_Testany(s.n, s.reqs, &i, &f, cmx_f_status(status, &st));
	any_out(&s, reqs, status, f, &st, rc);
	*index = i >= 0 ? i + 1 : i;
	*flag = f != 0;
	FDONE(rc);
}

/* MPI_WAITSOME and MPI_TESTSOME: fn is collmux's C function */
static void f_some(int (*fn)(int, void *, int *, int *, void *), void **next, const char *sym, int *n, int *reqs, int *outcount,
		   int *indices, int *statuses, int *ierr)
{
	fset s;
	if (!own()) {
		FNEXT(void (*)(int *, int *, int *, int *, int *, int *), n, reqs, outcount, indices, statuses, ierr);
		return;
	}
	if (!fset_in(&s, *n, reqs, statuses)) {
		FDONE(cmx_abi.err_other);
		return;
	}
	int rc = fn(s.n, s.reqs, outcount, indices, fset_st(&s));
	const int m = *outcount > 0 && *outcount <= s.n ? *outcount : 0; /* MPI_UNDEFINED: none; nothing set on an early error */
	fset_out(&s, reqs, statuses, m);
	for (int k = 0; k < m; k++)
		indices[k]++;
	FDONE(rc);
}

static void f_request_get_status(void **next, const char *sym, int *req, int *flag, int *status, int *ierr)
{
	if (!own()) {
		FNEXT(void (*)(int *, int *, int *, int *), req, flag, status, ierr);
		return;
	}
	cmx_f_status_t st;
	int f = 0, rc = MPI_Request_get_status(cmx_px.Request_f2c(*req), &f, cmx_f_status(status, &st));
	*flag = f != 0; /* LOGICAL: Open MPI's .TRUE. is 1 */
	if (f)
		cmx_f_status_back(status, &st, rc);
	FDONE(rc);
}

static void f_waitsome(void **next, const char *sym, int *n, int *reqs, int *outcount, int *indices, int *statuses, int *ierr)
{
	f_some(MPI_Waitsome, next, sym, n, reqs, outcount, indices, statuses, ierr);
}

static void f_testsome(void **next, const char *sym, int *n, int *reqs, int *outcount, int *indices, int *statuses, int *ierr)
{
	f_some(MPI_Testsome, next, sym, n, reqs, outcount, indices, statuses, ierr);
}

static void f_cancel(void **next, const char *sym, int *req, int *ierr)
{
	if (!own()) {
		FNEXT(void (*)(int *, int *), req, ierr);
		return;
	}
	cmx_h c = cmx_px.Request_f2c(*req);
	FDONE(MPI_Cancel(&c));
}

static void f_request_free(void **next, const char *sym, int *req, int *ierr)
{
	if (!own()) {
		FNEXT(void (*)(int *, int *), req, ierr);
		return;
	}
	cmx_h c = cmx_px.Request_f2c(*req);
	int rc = MPI_Request_free(&c);
	*req = cmx_px.Request_c2f(c);
	FDONE(rc);
}

/* A persistent request collmux made (on device memory, or a collective
 * the MPI lacks) is started by collmux; the others by the MPI. */
static void f_start(void **next, const char *sym, int *req, int *ierr)
{
	if (!own()) {
		FNEXT(void (*)(int *, int *), req, ierr);
		return;
	}
	cmx_h c = cmx_px.Request_f2c(*req);
	FDONE(MPI_Start(&c));
}

static void f_startall(void **next, const char *sym, int *n, int *reqs, int *ierr)
{
	fset s;
	if (!own()) {
		FNEXT(void (*)(int *, int *, int *), n, reqs, ierr);
		return;
	}
	if (!fset_in(&s, *n, reqs, NULL)) {
		FDONE(cmx_abi.err_other);
		return;
	}
	int rc = MPI_Startall(s.n, s.reqs);
	fset_out(&s, reqs, NULL, 0);
	FDONE(rc);
}

/* the four names Fortran compilers give a function (FortranNames in internal/genwrap) */
#define F4(low, UP, decl, ...)                                                   \
	CMX_EXPORT void mpi_##low##_ decl                                          \
	{                                                                           \
		static void *next;                                                  \
		f_##low(&next, "mpi_" #low "_", __VA_ARGS__);                       \
	}                                                                           \
	CMX_EXPORT void mpi_##low##__ decl                                         \
	{                                                                           \
		static void *next;                                                  \
		f_##low(&next, "mpi_" #low "__", __VA_ARGS__);                      \
	}                                                                           \
	CMX_EXPORT void mpi_##low decl                                             \
	{                                                                           \
		static void *next;                                                  \
		f_##low(&next, "mpi_" #low, __VA_ARGS__);                           \
	}                                                                           \
	CMX_EXPORT void MPI_##UP decl                                              \
	{                                                                           \
		static void *next;                                                  \
		f_##low(&next, "MPI_" #UP, __VA_ARGS__);                            \
	}

F4(wait, WAIT, (int *req, int *status, int *ierr), req, status, ierr)
F4(test, TEST, (int *req, int *flag, int *status, int *ierr), req, flag, status, ierr)
F4(waitall, WAITALL, (int *n, int *reqs, int *statuses, int *ierr), n, reqs, statuses, ierr)
F4(testall, TESTALL, (int *n, int *reqs, int *flag, int *statuses, int *ierr), n, reqs, flag, statuses, ierr)
F4(waitany, WAITANY, (int *n, int *reqs, int *index, int *status, int *ierr), n, reqs, index, status, ierr)
F4(testany, TESTANY, (int *n, int *reqs, int *index, int *flag, int *status, int *ierr), n, reqs, index, flag, status, ierr)
F4(waitsome, WAITSOME, (int *n, int *reqs, int *outcount, int *indices, int *statuses, int *ierr), n, reqs, outcount, indices, statuses, ierr)
F4(testsome, TESTSOME, (int *n, int *reqs, int *outcount, int *indices, int *statuses, int *ierr), n, reqs, outcount, indices, statuses, ierr)
F4(request_get_status, REQUEST_GET_STATUS, (int *req, int *flag, int *status, int *ierr), req, flag, status, ierr)
F4(cancel, CANCEL, (int *req, int *ierr), req, ierr)
F4(request_free, REQUEST_FREE, (int *req, int *ierr), req, ierr)
F4(start, START, (int *req, int *ierr), req, ierr)
F4(startall, STARTALL, (int *n, int *reqs, int *ierr), n, reqs, ierr)
