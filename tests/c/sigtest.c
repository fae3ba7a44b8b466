/*
 * sigtest: a fault in the program's own code after MPI_Init. Who sees it
 * must not depend on collmux: the program's own handler when it has one,
 * otherwise whatever the MPI installs (Open MPI prints "Process received
 * signal" and a backtrace), otherwise the default action.
 *
 *   sigtest WHEN [KIND]
 *     WHEN: none   no handler of the program's own
 *           before its SIGSEGV/SIGFPE handler is installed before MPI_Init
 *           after  ... after MPI_Init
 *     KIND: segv (a store through NULL, the default) or fpe (an integer
 *           division by zero)
 *
 * The handler prints one line and leaves with _exit(42).
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int *volatile target; /* NULL, read at run time: the compiler cannot see the fault */
static volatile int zero;

static void own_handler(int sig)
{
	char line[64];
	int n = snprintf(line, sizeof line, "sigtest: own handler: signal %d\n", sig);
	if (write(1, line, (size_t)n) < 0)
		_exit(43);
	_exit(42);
}

static void install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = own_handler;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGFPE, &sa, NULL);
}

int main(int argc, char **argv)
{
	const char *when = argc > 1 ? argv[1] : "none";
	const char *kind = argc > 2 ? argv[2] : "segv";
	int rank;
	if (strcmp(when, "before") == 0)
		install();
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (strcmp(when, "after") == 0)
		install();
	printf("sigtest: rank %d faulting (%s, handler %s)\n", rank, kind, when);
	fflush(stdout);
	if (strcmp(kind, "fpe") == 0)
		printf("%d\n", rank / zero);
	else
		*target = rank;
	printf("sigtest: survived\n");
	MPI_Finalize();
	return 0;
}
