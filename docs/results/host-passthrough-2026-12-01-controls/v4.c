/* five idle threads, as many as a Go runtime at rest */
#include <pthread.h>
#include <unistd.h>
static void *idle(void *u) { (void)u; for (;;) pause(); return 0; }
__attribute__((constructor)) static void start(void) { for (int i = 0; i < 5; i++) { pthread_t t; pthread_create(&t, 0, idle, 0); } }
