/* signal handlers on every signal, SA_ONSTACK|SA_SIGINFO|SA_RESTART, like Go's */
#include <signal.h>
static void h(int s, siginfo_t *i, void *c) { (void)s; (void)i; (void)c; }
__attribute__((constructor)) static void start(void) {
  struct sigaction sa = {0}; sa.sa_sigaction = h; sa.sa_flags = SA_ONSTACK|SA_SIGINFO|SA_RESTART; sigfillset(&sa.sa_mask);
  for (int s = 1; s < 65; s++) if (s != SIGKILL && s != SIGSTOP && s != SIGSEGV && s != SIGBUS && s != SIGFPE && s != SIGILL && s != SIGINT && s != SIGTERM && s != SIGCHLD && s != SIGPIPE) sigaction(s, &sa, 0);
}
