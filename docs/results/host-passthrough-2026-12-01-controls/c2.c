static __thread long x __attribute__((tls_model("initial-exec")));
long collmux_trivial_tls(void) { return ++x; }
__attribute__((constructor)) static void start(void) { x = 1; }
