//go:build collmux_lib

/*
 * ops.c: the entry points of collmux.h's fused operations (run by
 * fused/ops.c): collmux set up, MPI initialised, and collmux's state of
 * the communicator, from its integer handle, which every ABI can pass.
 */
#include "cmx.h"
#include "collmux.h"

/* The communicator `comm` names, or NULL and *why. */
static cmx_comm *ops_comm(int comm, const char **why)
{
	int rc = 0;
	cmx_init();
	if (cmx_cfg.disable || !cmx_mpi_setup() || (!cmx_px.Comm_f2c && !cmx_abi.int_handles))
		return *why = "MPI is not initialised, or collmux is disabled (COLLMUX_DISABLE)", NULL;
	/* MPICH's MPI_Comm_f2c is a cast (a macro, no function); Open MPI's
	 * gives NULL for a handle it never gave; under the MPI-5 ABI this is
	 * MPI_Comm_fromint (mpi/pmpi.c) */
	const cmx_h h = cmx_px.Comm_f2c ? cmx_px.Comm_f2c(comm) : (cmx_h)(unsigned)comm;
	cmx_comm *c = h ? cmx_comm_get(h, &rc) : NULL;
	if (!c)
		*why = "not a valid communicator (pass MPI_Comm_c2f(comm), MPI_Comm_toint(comm) under the MPI-5 ABI, or comm.py2f() in "
		       "mpi4py)";
	return c;
}

CMX_EXPORT int collmux_gemv_allreduce(int comm, void *stream, int dtype, int m, int k, int batch, const void *a, long long lda,
				      const void *x, long long ldx, void *y, long long ldy)
{
	const char *why = NULL;
	cmx_comm *c = ops_comm(comm, &why);
	return cmx_ops_gemv_allreduce(c, why, stream, dtype, m, k, batch, a, lda, x, ldx, y, ldy);
}

CMX_EXPORT int collmux_embedding_alltoall(int comm, void *stream, int dtype, int mode, int dim, long long batch, int tables,
					  int table_first, int tables_total, const void *weights, const long long *rows,
					  const long long *offsets, const long long *indices, void *out)
{
	const char *why = NULL;
	cmx_comm *c = ops_comm(comm, &why);
	return cmx_ops_embedding_alltoall(c, why, stream, dtype, mode, dim, batch, tables, table_first, tables_total, weights, rows,
					  offsets, indices, out);
}

CMX_EXPORT int collmux_gemm_alltoall(int comm, void *stream, int dtype, int k, int n, int experts, const void *a, long long lda,
				     const void *b, const long long *rows, const long long *dest, void *out, long long out_rows,
				     long long capacity)
{
	const char *why = NULL;
	cmx_comm *c = ops_comm(comm, &why);
	return cmx_ops_gemm_alltoall(c, why, stream, dtype, k, n, experts, a, lda, b, rows, dest, out, out_rows, capacity);
}

CMX_EXPORT int collmux_gemm_reducescatter(int comm, void *stream, int dtype, long long m, int n, int k, const void *a, long long lda,
					  const void *b, long long ldb, void *out, long long ldo)
{
	const char *why = NULL;
	cmx_comm *c = ops_comm(comm, &why);
	return cmx_ops_gemm_reducescatter(c, why, stream, dtype, m, n, k, a, lda, b, ldb, out, ldo);
}

CMX_EXPORT int collmux_allgather_gemm(int comm, void *stream, int dtype, long long m, int n, int k, const void *a, long long lda,
				      const void *b, long long ldb, void *out, long long ldo, void *ag, long long ldag)
{
	const char *why = NULL;
	cmx_comm *c = ops_comm(comm, &why);
	return cmx_ops_allgather_gemm(c, why, stream, dtype, m, n, k, a, lda, b, ldb, out, ldo, ag, ldag);
}

CMX_EXPORT void *collmux_symm_alloc(int comm, size_t bytes)
{
	const char *why = NULL;
	cmx_comm *c = ops_comm(comm, &why);
	return cmx_ops_symm_alloc(c, why, bytes);
}

CMX_EXPORT int collmux_symm_free(int comm, void *p)
{
	const char *why = NULL;
	cmx_comm *c = ops_comm(comm, &why);
	return cmx_ops_symm_free(c, why, p);
}
