/*
 * dlhost: a program that does not link MPI and loads an MPI-using module
 * with dlopen(RTLD_LOCAL), the way Python loads mpi4py.
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: dlhost module.so\n");
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlhost: %s\n", dlerror());
		return 2;
	}
	int (*run)(void) = (int (*)(void))dlsym(h, "collmod_run");
	return run ? run() : 2;
}
