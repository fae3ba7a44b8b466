/*
 * mtracer.so: starts glibc's malloc trace (mtrace, MALLOC_TRACE=file)
 * before any other preloaded library's constructor runs. Preloaded as
 * LD_PRELOAD="libcollmux.so mtracer.so libc_malloc_debug.so": the loader
 * runs the preloads' constructors last to first, so the trace covers
 * collmux's load and everything after it (tests/heap_test.go).
 */
#include <mcheck.h>

__attribute__((constructor)) static void start_trace(void) { mtrace(); }
