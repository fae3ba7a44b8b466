static __thread long x[8] __attribute__((tls_model("initial-exec"), aligned(64)));
long collmux_trivial_tls(void) { return ++x[0]; }
__attribute__((constructor)) static void start(void) { x[0] = 1; }
