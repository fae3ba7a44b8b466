/*
 * collmux.h: the public C interface of libcollmux.so.
 *
 * An MPI program needs none of this: preloading the library (or linking it
 * before libmpi) is enough, and every MPI collective goes through collmux.
 * These functions let a program or a test ask collmux about itself.
 */
#ifndef COLLMUX_H
#define COLLMUX_H

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the library, "MAJOR.MINOR.PATCH". */
const char *collmux_version(void);

/* Which MPI ABI collmux found underneath: "openmpi", "mpich", "mpi-abi",
 * or "unknown" before the first MPI call. */
const char *collmux_mpi_abi(void);

/* Number of MPI communicators that currently carry collmux state. State is
 * freed with its communicator (MPI_Comm_free) and at MPI_Finalize. */
int collmux_comm_states(void);

#ifdef __cplusplus
}
#endif

#endif
