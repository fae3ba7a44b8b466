//go:build collmux_lib

/*
 * signals.c: a fault in the program reaches the program's and the MPI's own
 * handlers as it does without collmux.
 *
 * A Go c-shared library starts its runtime from a constructor of its own
 * (_rt0_amd64_linux_lib), and that constructor, synchronously and on the
 * loading thread (runtime.libpreinit -> initsig), installs Go's handler for
 * the signals Go turns into panics: SIGSEGV, SIGBUS and SIGFPE (SIGPIPE and
 * SIGURG too; those are left to Go here). So this happens as collmux loads,
 * before main, whether or not Go is ever called (COLLMUX_DISABLE=1 included).
 * Go's handler forwards a fault in non-Go code to the handler that was in
 * place when Go started, or, if there was none, dies of the signal. In an
 * MPI program that is not the same as without collmux:
 *  - Open MPI's MPI_Init installs its "Process received signal" backtrace
 *    handler (opal_signal) only for signals that have no handler yet; it
 *    finds Go's and stays out, so a NULL store prints no report;
 *  - a handler installed before collmux loaded (UCX's, from libucs's
 *    constructor, under MPICH) is called by Go's from Go's signal frame,
 *    which its backtrace does not unwind through: it stops in libcollmux.
 * Starting Go before MPI_Init (so that the MPI installs last) would not do:
 * Open MPI does not replace an installed handler, and handlers that were
 * there before collmux would still be called through Go's. So Go's handlers
 * are taken away again at once: a constructor with a priority, which runs
 * before the unprioritised ones, Go's among them, records the dispositions
 * Go is about to replace, and an unprioritised one, in this C file that is
 * linked after Go's own object (its constructor runs after Go's), puts them
 * back wherever Go's handler is in place, before main or MPI_Init can
 * install anything. From then on signals are handled as if collmux were not
 * loaded, whatever order the program and the MPI install their handlers in.
 *
 * The cost: a fault in collmux's own Go code (a nil dereference) is no
 * longer a Go panic with a Go traceback but a fault like any other, reported
 * by the program's or the MPI's handler, or death by the signal. collmux's Go
 * never recovers from a fault (no recover, no debug.SetPanicOnFault), and the
 * Go runtime takes no faults on purpose on Linux.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stddef.h>

static const int cmx_fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS};
#define CMX_NFATAL (sizeof cmx_fatal_signals / sizeof cmx_fatal_signals[0])

static struct sigaction cmx_sig_before[CMX_NFATAL];
static int cmx_sig_recorded[CMX_NFATAL];

/* whether sa's handler is code of this library, which installs none of its
 * own: then it is the Go runtime's */
static int cmx_handler_is_ours(const struct sigaction *sa)
{
	Dl_info h, self;
	void *fn = (sa->sa_flags & SA_SIGINFO) ? (void *)sa->sa_sigaction : (void *)sa->sa_handler;
	if (sa->sa_handler == SIG_DFL || sa->sa_handler == SIG_IGN)
		return 0;
	return dladdr(fn, &h) && dladdr((void *)&cmx_handler_is_ours, &self) && h.dli_fbase == self.dli_fbase;
}

__attribute__((constructor(101))) static void cmx_signals_before_go(void)
{
	for (size_t i = 0; i < CMX_NFATAL; i++)
		cmx_sig_recorded[i] = sigaction(cmx_fatal_signals[i], NULL, &cmx_sig_before[i]) == 0 &&
				      !cmx_handler_is_ours(&cmx_sig_before[i]);
}

__attribute__((constructor)) static void cmx_signals_after_go(void)
{
	for (size_t i = 0; i < CMX_NFATAL; i++) {
		struct sigaction now, was = cmx_sig_before[i];
		if (!cmx_sig_recorded[i] || sigaction(cmx_fatal_signals[i], NULL, &now) != 0 || !cmx_handler_is_ours(&now))
			continue;
		/* Go sets SA_ONSTACK on every handler it leaves in place, so that
		 * one run on a Go thread gets the signal stack, not a goroutine's;
		 * it changes nothing on a thread without an alternate stack. */
		if (was.sa_handler != SIG_DFL && was.sa_handler != SIG_IGN)
			was.sa_flags |= SA_ONSTACK;
		sigaction(cmx_fatal_signals[i], &was, NULL);
	}
}
