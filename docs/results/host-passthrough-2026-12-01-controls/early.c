/* the same library loading the bare Go library before MPI_Init: a control for late.c */
#include <dlfcn.h>
#include <mpi.h>
#ifndef GOLIB
#define GOLIB "libbare.so" /* the bare Go library's path: -DGOLIB=... */
#endif
int MPI_Init(int *argc, char ***argv)
{
	if (!dlopen(GOLIB, RTLD_NOW | RTLD_LOCAL))
		return MPI_ERR_OTHER;
	return PMPI_Init(argc, argv);
}
