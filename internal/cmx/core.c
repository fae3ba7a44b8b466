/*
 * core.c: what every layer of the C core shares: the configuration Go
 * sets once, the process state, and reporting (cmx_fatal, cmx_log).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cmx.h"

cmx_state_t cmx_state;
cmx_config cmx_cfg;

void cmx_fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "collmux: fatal: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	abort();
}

int cmx_log_rank(void) { return __atomic_load_n(&cmx_state.log_rank, __ATOMIC_RELAXED) - 1; }

/* A line begins with collmux[rank N] once MPI is initialised (N in
 * MPI_COMM_WORLD), with collmux[pid] before; written in one piece, so that
 * ranks sharing stderr do not interleave within a line. */
void cmx_log(int level, const char *fmt, ...)
{
	if (cmx_cfg.log < level)
		return;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	int rank = cmx_log_rank();
	if (rank >= 0)
		fprintf(stderr, "collmux[rank %d]: %s\n", rank, msg);
	else
		fprintf(stderr, "collmux[%d]: %s\n", (int)getpid(), msg);
}
