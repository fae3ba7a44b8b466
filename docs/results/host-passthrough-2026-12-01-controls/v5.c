/* a 2.5 MB image, like a Go runtime's: text and data */
__attribute__((used)) static const char big_ro[2 << 20] = {1};
__attribute__((used)) static char big_rw[512 << 10] = {1};
int collmux_trivial_big(void) { return big_ro[5] + big_rw[7]; }
