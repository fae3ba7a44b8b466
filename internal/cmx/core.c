/*
 * core.c: what every layer of the C core shares: the configuration Go
 * sets once, the process state, and reporting (cmx_fatal, cmx_config_error,
 * cmx_log).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cmx.h"

cmx_state_t cmx_state;
cmx_config cmx_cfg;

/* One write(2) a line, not stdio: the program or the MPI may have made
 * stderr buffered (setvbuf), and then a line can reach the launcher in
 * pieces, among other ranks' lines (seen under MPICH 4.2.1: two ranks'
 * warnings split mid-line), or, before abort(), not at all. */
static void put_line(const char *prefix, const char *fmt, va_list ap)
{
	char msg[1024], line[sizeof msg + 64]; /* a longer message is cut; prefixes are short */
	vsnprintf(msg, sizeof msg, fmt, ap);
	int n = snprintf(line, sizeof line, "%s%s\n", prefix, msg);
	n = n < (int)sizeof line ? n : (int)sizeof line - 1;
	for (int off = 0; off < n;) {
		ssize_t w = write(STDERR_FILENO, line + off, (size_t)(n - off));
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		off += (int)w;
	}
}

void cmx_fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	put_line("collmux: fatal: ", fmt, ap);
	va_end(ap);
	abort();
}

/* A configuration error stops the job: running on with a half-applied
 * configuration would silently change where calls go. Once the MPI is
 * initialised, through MPI_Abort, so that the launcher reports the failure:
 * an exit after MPI_Init without MPI_Finalize is not reliably one (MPICH
 * 4.2.1's mpiexec returned 0 in some runs). The launcher gets a tenth of a
 * second to forward the line first: MPICH 4.2.1's drops an aborting rank's
 * last output now and then, natively too (3 runs in 30; none in 30 with
 * the pause). Called on a program thread, which may call the MPI (aside.c
 * hands Go's errors to one), perhaps inside collmux's one-time set-up:
 * _exit, so that no exit handler can call into collmux and wait for that
 * set-up to end (the line is written already; Go's os.Exit did the same). */
void cmx_config_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	put_line("collmux: fatal: ", fmt, ap);
	va_end(ap);
	if (!cmx_forked() && cmx_px.Abort && cmx_mpi_usable()) { /* a child of fork must not abort its parent's job */
		usleep(100000);
		cmx_px.Abort(cmx_abi.comm_world, 1);
	}
	_exit(1);
}

int cmx_mpi_usable(void)
{
	int inited = 0, fin = 1;
	return cmx_px.Initialized && cmx_px.Finalized && cmx_px.Initialized(&inited) == 0 && inited && cmx_px.Finalized(&fin) == 0 &&
	       !fin;
}

int cmx_log_rank(void) { return __atomic_load_n(&cmx_state.log_rank, __ATOMIC_RELAXED) - 1; }

/* A line begins with collmux[rank N] once MPI is initialised (N in
 * MPI_COMM_WORLD), with collmux[pid] before; written in one piece, so that
 * ranks sharing stderr do not interleave within a line. */
void cmx_log(int level, const char *fmt, ...)
{
	if (cmx_cfg.log < level)
		return;
	char prefix[48];
	int rank = cmx_log_rank();
	if (rank >= 0)
		snprintf(prefix, sizeof prefix, "collmux[rank %d]: ", rank);
	else
		snprintf(prefix, sizeof prefix, "collmux[%d]: ", (int)getpid());
	va_list ap;
	va_start(ap, fmt);
	put_line(prefix, fmt, ap);
	va_end(ap);
}
