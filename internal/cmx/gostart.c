//go:build collmux_lib

/*
 * gostart.c: the Go runtime starts at collmux's first call into Go (the
 * set-up after PMPI_Init returns), not as the library loads.
 *
 * Why: a Go c-shared library starts its runtime from its constructor
 * (_rt0_amd64_lib), which makes a thread (x_cgo_sys_thread_create) that
 * maps the Go heap, starts the runtime's threads and runs the packages'
 * init. Made before PMPI_Init, that moved MPICH 4.0.2's 8-byte
 * MPI_Iallreduce + MPI_Wait by 3-6 % against native; the same bare Go
 * library started after PMPI_Init left it at 1.00
 * (docs/results/host-passthrough-2026-12-01-session13.md); under Open MPI
 * 5.0.7 this file takes that row from 1.069 to 1.004
 * (docs/results/host-passthrough-2026-12-01-session16.md). So the library
 * is linked with --wrap=pthread_create: the one thread the runtime's
 * constructor asks for while the library loads is recorded, not made, and
 * cmx_go_start() makes it. Everything else of the constructor still runs at
 * load (runtime.libpreinit: the signal handlers signals.c deals with).
 *
 * Nothing can wait for a runtime that never starts: every call from C into
 * Go goes through cgo's _cgo_wait_runtime_init_done, which is wrapped too
 * and starts the runtime first; cmx_aside() starts it before it posts.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "cmx.h"

int __real_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);
uintptr_t __real__cgo_wait_runtime_init_done(void);

/* The window in which the runtime's start is recorded: from the prioritised
 * constructor below, which runs before every unprioritised one (Go's among
 * them), to the unprioritised one at the end of this file, which runs
 * after Go's: the C of the library's packages is linked after Go's own
 * object (capi/signals.c relies on the same order; TestGoStartsAfterMPIInit
 * fails if it ever changes). */
static int loading;
static pthread_t loader; /* the thread loading the library: only its requests are the runtime's */
static void *(*go_fn)(void *);
static void *go_arg;
static int deferred; /* the runtime's thread was asked for and is not made yet */
static int wanted;   /* a start came before the request (another thread's, while the library loads) */
static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;

__attribute__((constructor(101))) static void cmx_go_window_open(void)
{
	loader = pthread_self();
	__atomic_store_n(&loading, 1, __ATOMIC_RELEASE);
}
__attribute__((constructor)) static void cmx_go_window_close(void) { __atomic_store_n(&loading, 0, __ATOMIC_RELEASE); }

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	if (__atomic_load_n(&loading, __ATOMIC_ACQUIRE) && pthread_equal(pthread_self(), loader)) {
		pthread_mutex_lock(&start_mu);
		int record = !deferred && !wanted;
		if (record) {
			go_fn = fn;
			go_arg = arg;
			__atomic_store_n(&deferred, 1, __ATOMIC_RELEASE);
			memset(t, 0, sizeof *t); /* x_cgo_sys_thread_create makes it detached and never looks at it */
		}
		pthread_mutex_unlock(&start_mu);
		if (record)
			return 0;
	}
	return __real_pthread_create(t, attr, fn, arg);
}

/* Starts the runtime's thread if it was asked for and is not made yet. A
 * start that comes before the request (another thread's, while the
 * library loads) has the request made at once when it comes. Go's own
 * thread creation retries EAGAIN too (a tight pids.max in a container). */
void cmx_go_start(void)
{
	if (!__atomic_load_n(&deferred, __ATOMIC_ACQUIRE) && !__atomic_load_n(&loading, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&start_mu);
	if (deferred) {
		pthread_attr_t attr;
		pthread_t t;
		int err;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		for (int i = 0; (err = __real_pthread_create(&t, &attr, go_fn, go_arg)) == EAGAIN && i < 20; i++)
			usleep(1000 * (i + 1));
		pthread_attr_destroy(&attr);
		if (err != 0)
			cmx_fatal("cannot start the Go runtime's thread: %s", strerror(err));
		__atomic_store_n(&deferred, 0, __ATOMIC_RELEASE);
	} else if (__atomic_load_n(&loading, __ATOMIC_ACQUIRE)) {
		wanted = 1;
	}
	pthread_mutex_unlock(&start_mu);
}

uintptr_t __wrap__cgo_wait_runtime_init_done(void)
{
	cmx_go_start();
	return __real__cgo_wait_runtime_init_done();
}
