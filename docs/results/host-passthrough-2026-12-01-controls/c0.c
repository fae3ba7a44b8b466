int collmux_trivial_c(void) { return 1; }
