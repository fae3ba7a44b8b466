/*
 * weakmod: a module (loaded by dlhost with dlopen, as Python loads mpi4py)
 * that tests for MPI functions the way mpi4py's builds for several MPIs
 * do: a weak reference, which is null where no library defines the
 * function (dlsym: tests/c/unservedtest.c). Prints one line per function; MPI_Pack is in every
 * MPI, the others are MPI-4.0 and 4.1 functions an older MPI lacks, and
 * MPI_Pack_c one collmux provides through MPI_Pack where the MPI lacks it.
 */
#include <mpi.h>
#include <stdio.h>

#pragma weak MPI_Isendrecv
#pragma weak MPI_Isendrecv_replace
#pragma weak MPI_Psend_init
#pragma weak MPI_Comm_attach_buffer
#pragma weak MPI_Pack_c
#pragma weak MPI_Pack
/* declared here too: an MPI-3 mpi.h has none of them */
int MPI_Isendrecv(const void *, int, MPI_Datatype, int, int, void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
int MPI_Isendrecv_replace(void *, int, MPI_Datatype, int, int, int, int, MPI_Comm, MPI_Request *);
int MPI_Psend_init(const void *, int, MPI_Count, MPI_Datatype, int, int, MPI_Comm, MPI_Info, MPI_Request *);
int MPI_Comm_attach_buffer(MPI_Comm, void *, int);
int MPI_Pack_c(const void *, MPI_Count, MPI_Datatype, void *, MPI_Count, MPI_Count *, MPI_Comm);

int collmod_run(void)
{
	MPI_Init(NULL, NULL);
	const char *names[] = {"MPI_Isendrecv", "MPI_Isendrecv_replace", "MPI_Psend_init", "MPI_Comm_attach_buffer", "MPI_Pack_c", "MPI_Pack"};
	const void *weak[] = {(void *)MPI_Isendrecv, (void *)MPI_Isendrecv_replace, (void *)MPI_Psend_init, (void *)MPI_Comm_attach_buffer,
			      (void *)MPI_Pack_c, (void *)MPI_Pack};
	for (int i = 0; i < 6; i++)
		printf("%-24s %s\n", names[i], weak[i] ? "present" : "absent");
	/* a call through the procedure linkage table: bound at start-up too
	 * in the -z now program */
	char packed[16];
	int v = 7, at = 0;
	if (MPI_Pack && MPI_Pack(&v, 1, MPI_INT, packed, (int)sizeof packed, &at, MPI_COMM_WORLD) == MPI_SUCCESS)
		printf("MPI_Pack packed %d bytes\n", at);
	MPI_Finalize();
	return 0;
}

#ifdef WEAKMOD_MAIN
/* Built as a program linked with -z now: its weak references, and so
 * collmux's resolvers for them, are bound at start-up, before main. */
int main(void) { return collmod_run(); }
#endif
