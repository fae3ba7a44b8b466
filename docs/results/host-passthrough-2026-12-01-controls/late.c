/* a C library that loads the bare Go library only after MPI_Init: the Go
 * runtime starts once MPICH has set itself up */
#include <dlfcn.h>
#include <mpi.h>
#ifndef GOLIB
#define GOLIB "libbare.so" /* the bare Go library's path: -DGOLIB=... */
#endif
int MPI_Init(int *argc, char ***argv)
{
	int rc = PMPI_Init(argc, argv);
	if (!dlopen(GOLIB, RTLD_NOW | RTLD_LOCAL))
		return MPI_ERR_OTHER;
	return rc;
}
