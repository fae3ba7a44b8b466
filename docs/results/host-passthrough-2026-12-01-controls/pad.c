#include <stdlib.h>
extern int collmux_trivial(void);
static void *keep;
__attribute__((constructor)) static void pad(void) { if (N) keep = malloc(N); (void)collmux_trivial; }
