/*
 * reqtest.h: what nbtest.c and p2ptest.c share: failure counting, the
 * digest lines that make a run comparable byte for byte, and (with
 * -DCOLLTEST_CUDA) device mirrors of the test buffers, as in colltest.c.
 *
 * colltest.c copies every buffer to the device before a call and back after
 * it. A nonblocking call's buffers belong to MPI until the request
 * completes, and other requests may be in flight on other buffers, so here
 * the copies are per buffer and explicit: TODEV(p) before the call that
 * starts the operation, TOHOST(p) after the call that completes it. Each
 * copies the whole tracked allocation that holds p; an operation in flight
 * never shares an allocation with one being copied. Without COLLTEST_CUDA
 * both are no-ops and D(p) is p.
 */
#ifndef REQTEST_H
#define REQTEST_H
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#ifdef COLLTEST_CUDA
#include "mirror.h"
#define TODEV(p) mirror_copy_one((p), 1)
#define TOHOST(p) mirror_copy_one((p), 0)
#define MALLOC(n) mirror_alloc(n)
#define CALLOC(k, n) mirror_alloc((size_t)(k) * (n))
#define FREE(p) mirror_free(p)
#else
#define D(p) (p)
#define TODEV(p) ((void)(p))
#define TOHOST(p) ((void)(p))
#define MALLOC(n) calloc(1, (n))
#define CALLOC(k, n) calloc((k), (n))
#define FREE(p) free(p)
#endif

/* MPI_STATUSES_IGNORE through a variable: MPICH's is (MPI_Status *)1,
 * which gcc's array-parameter checks (-Wstringop-overflow) take for an
 * array of size 0. */
static MPI_Status *volatile statuses_ignore_;
#define STATUSES_IGNORE (statuses_ignore_ ? statuses_ignore_ : (statuses_ignore_ = MPI_STATUSES_IGNORE))

/* Every rank's digest goes, in world rank order, through world rank 0 (with
 * PMPI, so reporting is never a tested call): the output of a run is
 * deterministic. Called by the main thread only, in the same order on
 * every rank. */
static void report_digest(const char *name, uint64_t h) { report_line(name, 52, h); }
static void report(const char *name, const void *b, size_t n) { report_digest(name, digest(b, n)); }

/* One line that every rank agrees on (rank 0 prints it). */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	if (rank != 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

/* MPI's empty status: source MPI_ANY_SOURCE, tag MPI_ANY_TAG, count 0. */
static int empty_status(const MPI_Status *st)
{
	int n = -1;
	MPI_Get_count(st, MPI_BYTE, &n);
	return st->MPI_SOURCE == MPI_ANY_SOURCE && st->MPI_TAG == MPI_ANY_TAG && n == 0;
}

/* The final tally; returns the exit status. */
static int finish(const char *prog, const char *extra)
{
	int total = 0;
	PMPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("%s: %d ranks, %s%d failures\n", prog, size, extra, total);
	fflush(stdout);
	return total != 0;
}

/* The MPI_THREAD_MULTIPLE part of nbtest and p2ptest: NTHREAD threads,
 * thread t running worker((void *)t) on its own duplicate of
 * MPI_COMM_WORLD, tcomm[t], and leaving the digest of what it received in
 * thash[t], reported as "threads.t<t>.<iters>_<unit>". */
#define NTHREAD 2
static MPI_Comm tcomm[NTHREAD];
static uint64_t thash[NTHREAD];

static int run_threads(void *(*worker)(void *), int iters, const char *unit, const char *prog)
{
	for (int t = 0; t < NTHREAD; t++)
		MPI_Comm_dup(MPI_COMM_WORLD, &tcomm[t]);
	pthread_t th[NTHREAD];
	for (int t = 0; t < NTHREAD; t++)
		pthread_create(&th[t], NULL, worker, (void *)(long)t);
	for (int t = 0; t < NTHREAD; t++)
		pthread_join(th[t], NULL);
	for (int t = 0; t < NTHREAD; t++) {
		char name[64];
		snprintf(name, sizeof name, "threads.t%d.%d_%s", t, iters, unit);
		report_digest(name, thash[t]);
		MPI_Comm_free(&tcomm[t]);
	}
	return finish(prog, "2 threads, ");
}

#endif
