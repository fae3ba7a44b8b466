/* the same library loading the bare Go library before MPI_Init: a control for late.c */
#include <dlfcn.h>
#include <mpi.h>
int MPI_Init(int *argc, char ***argv)
{
	if (!dlopen("/tmp/bare/libbare.so", RTLD_NOW | RTLD_LOCAL))
		return MPI_ERR_OTHER;
	return PMPI_Init(argc, argv);
}
