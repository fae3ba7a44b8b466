/* VA reservations like a Go runtime: PROT_NONE regions and a heap at 0xc000000000 */
#include <sys/mman.h>
__attribute__((constructor)) static void start(void) {
  mmap((void*)0xc000000000, 64<<20, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
  for (int i = 0; i < 8; i++) mmap(0, 1<<20, PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE, -1, 0);
  mmap(0, 256<<20, PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE, -1, 0);
}
