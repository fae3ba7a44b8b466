int collmux_trivial_sym(void) { return 1; }
