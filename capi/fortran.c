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

#include "cmx.h"

int cmx_fortran_direct(void)
{
	if (CMX_UNLIKELY(!__atomic_load_n(&cmx_state.ready, __ATOMIC_ACQUIRE)))
		cmx_init();
	return cmx_abi.abi == CMX_ABI_OPENMPI && !cmx_state.forward_only && cmx_px.Comm_f2c && cmx_px.Type_f2c && cmx_px.Op_f2c &&
	       cmx_px.Status_c2f;
}

void *cmx_fortran_next(void **next, const char *sym)
{
	void *f = __atomic_load_n(next, __ATOMIC_ACQUIRE);
	if (!f) {
		if (!(f = dlsym(RTLD_NEXT, sym)))
			cmx_fatal("%s: the MPI library's Fortran binding is not loaded", sym);
		__atomic_store_n(next, f, __ATOMIC_RELEASE);
	}
	return f;
}

/* Open MPI's Fortran MPI_IN_PLACE and MPI_BOTTOM are common blocks; a
 * program compiled by any Fortran compiler names one of these. The
 * addresses are those every reference resolves to (global scope). */
static void *in_place[4], *bottom[4], *status_ignore[4];
static pthread_once_t sentinels_once = PTHREAD_ONCE_INIT;

static void find_sentinels(void)
{
	static const char *ip[4] = {"mpi_fortran_in_place_", "mpi_fortran_in_place__", "mpi_fortran_in_place", "MPI_FORTRAN_IN_PLACE"};
	static const char *bt[4] = {"mpi_fortran_bottom_", "mpi_fortran_bottom__", "mpi_fortran_bottom", "MPI_FORTRAN_BOTTOM"};
	static const char *si[4] = {"mpi_fortran_status_ignore_", "mpi_fortran_status_ignore__", "mpi_fortran_status_ignore",
				    "MPI_FORTRAN_STATUS_IGNORE"};
	for (int i = 0; i < 4; i++) {
		in_place[i] = dlsym(RTLD_DEFAULT, ip[i]);
		bottom[i] = dlsym(RTLD_DEFAULT, bt[i]);
		status_ignore[i] = dlsym(RTLD_DEFAULT, si[i]);
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
 * MPI_Init does for C programs (under MPICH the binding calls MPI_Init,
 * which collmux intercepts already). */
static void f_init(void **next, const char *sym, int *ierr)
{
	cmx_init();
	((void (*)(int *))cmx_fortran_next(next, sym))(ierr);
	if (cmx_fortran_direct())
		cmx_after_init(*ierr);
}

static void f_init_thread(void **next, const char *sym, int *required, int *provided, int *ierr)
{
	cmx_init();
	((void (*)(int *, int *, int *))cmx_fortran_next(next, sym))(required, provided, ierr);
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
static int ignored(const int *f)
{
	pthread_once(&sentinels_once, find_sentinels);
	for (int i = 0; i < 4; i++)
		if (f && (const void *)f == status_ignore[i])
			return 1;
	return 0;
}

void *cmx_f_status(int *f, cmx_f_status_t *c) { return ignored(f) ? (void *)cmx_abi.status_ignore : (void *)c; }

void cmx_f_status_back(int *f, cmx_f_status_t *c, int rc)
{
	(void)rc; /* MPI fills the status of a failed receive too (MPI_ERR_TRUNCATE: its count) */
	if (!ignored(f))
		cmx_px.Status_c2f(c, f);
}
