/* one idle thread, created in a constructor, by a library that has static
 * (initial-exec) TLS, as a Go c-shared library does */
#include <pthread.h>
#include <unistd.h>
__thread long tls_word __attribute__((tls_model("initial-exec")));
static void *idle(void *u) { (void)u; for (;;) pause(); return 0; }
__attribute__((constructor)) static void start(void) { tls_word = 1; pthread_t t; pthread_create(&t, 0, idle, 0); }
