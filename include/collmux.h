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

/* Replaces the rules given by COLLMUX_RULES (the built-in defaults and the
 * tuning table stay in front), with the syntax of COLLMUX_RULES. Collective
 * over MPI_COMM_WORLD: every rank calls it with the same rules, between
 * MPI_Init and MPI_Finalize, while no other collective is in flight.
 * Returns 0, or -1 (rules unchanged, a message on stderr) when the rules do
 * not parse or differ between ranks. Each communicator takes the new rules
 * at its next collective. */
int collmux_set_rules(const char *rules);

/* The MPI extension CUDA-aware MPIs provide (Open MPI, MVAPICH2-GDR):
 * 1 while collmux carries device buffers for the MPI underneath (the CUDA
 * driver is present and COLLMUX_DISABLE is not set), whether or not that
 * MPI is CUDA-aware; otherwise that MPI's own answer, or 0. */
int MPIX_Query_cuda_support(void);

#ifdef __cplusplus
}
#endif

#endif
