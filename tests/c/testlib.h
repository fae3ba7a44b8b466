/*
 * testlib.h: what the C test programs share: the rank, the size and the
 * failure count; CHECK, which counts a failure and prints the first 20;
 * FNV-1a digests; and reporting through world rank 0 with PMPI (reporting
 * is never a tested call, and rank 0 prints in rank order, so a run's
 * output is deterministic and two runs compare byte for byte).
 */
#ifndef TESTLIB_H
#define TESTLIB_H
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((unused)) static int rank, size, failures;

#define CHECK(cond, ...)                                                                 \
	do {                                                                             \
		if (!(cond)) {                                                           \
			if (__atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED) < 20) { \
				fprintf(stderr, "FAIL rank %d: ", rank);                 \
				fprintf(stderr, __VA_ARGS__);                            \
				fprintf(stderr, "\n");                                   \
			}                                                                \
		}                                                                        \
	} while (0)

#define HSEED 1469598103934665603ull
__attribute__((unused)) static uint64_t digest_more(uint64_t h, const void *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ ((const unsigned char *)b)[i]) * 1099511628211ull;
	return h;
}
__attribute__((unused)) static uint64_t digest(const void *b, size_t n) { return digest_more(HSEED, b, n); }

/* One line: name, padded to width, then every rank's digest h. */
__attribute__((unused)) static void report_line(const char *name, int width, uint64_t h)
{
	uint64_t *all = rank == 0 ? malloc(8 * (size_t)size) : NULL;
	PMPI_Gather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("%-*s", width, name);
		for (int i = 0; i < size; i++)
			printf(" %016llx", (unsigned long long)all[i]);
		printf("\n");
	}
	free(all);
}

/* MPI_Init, or MPI_Init_thread asking for MPI_THREAD_MULTIPLE (threads),
 * then rank and size; errors_return 1: the errors of MPI_COMM_WORLD come
 * back as return codes, 2: those of MPI_COMM_SELF too (tests of erroneous
 * calls).
 * Returns the thread level MPI provides. */
__attribute__((unused)) static int test_init(int *argc, char ***argv, int threads, int errors_return)
{
	int provided = MPI_THREAD_SINGLE;
	if (threads)
		MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
	else
		MPI_Init(argc, argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (errors_return)
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	if (errors_return > 1)
		MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
	return provided;
}

/* How a call returned, said by rank 0 only: ok, or an error and its class. */
__attribute__((unused)) static void show_rc(const char *what, int width, int rc)
{
	int cls = -1;
	if (rank != 0)
		return;
	if (rc != MPI_SUCCESS)
		MPI_Error_class(rc, &cls);
	printf("%-*s rc=%s class=%d\n", width, what, rc == MPI_SUCCESS ? "ok" : "error", cls);
}

#endif
