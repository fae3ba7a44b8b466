/*
 * collmux.h: the public C interface of libcollmux.so.
 *
 * An MPI program needs none of this: preloading the library (or linking it
 * before libmpi) is enough, and every MPI collective goes through collmux.
 * These functions let a program or a test ask collmux about itself.
 */
#ifndef COLLMUX_H
#define COLLMUX_H

#include <stddef.h>

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

/* ---- Fused computation + collective operations ----
 *
 * Each is collective over a communicator of ranks on one node whose GPUs
 * reach each other (NVLink or PCIe peer access), up to 8 ranks, and runs
 * as one kernel queued on `stream` (a CUstream or cudaStream_t; 0 is the
 * legacy default stream): the call returns once it is queued, and the
 * result is there when the stream gets past it. The kernel computes this
 * rank's part and writes it, tile by tile as each is done, into the
 * peers' memory, so the communication hides under the computation.
 *
 * comm is the communicator's integer handle, which every MPI ABI has:
 * MPI_Comm_c2f(comm) in C (MPI_Comm_toint(comm) under the MPI-5 standard
 * ABI, whose library has no Fortran conversions), comm.py2f() in mpi4py.
 * Every rank passes the
 * same shape and type; calls on one communicator are ordered on the GPU
 * even across streams. A call cannot be captured into a CUDA graph (it
 * returns -1): each call is numbered as it is made, and a replay would
 * reuse the numbers. They return 0 once queued, or -1 with the reason
 * on stderr, naming the call: nothing is computed then on any rank where
 * the reason is one every rank shares (an argument, the set-up). A rank
 * that refuses a call for a reason of its own (an argument that may
 * differ between ranks, a host buffer) marks the call so that the peers'
 * kernels stop at once with a message; a rank that never arrives, or
 * passes another shape, makes them give up after COLLMUX_TIMEOUT seconds.
 * Their results are then not valid, and the communicator's next call
 * returns -1. */

/* Element types of the operations' buffers. */
enum { COLLMUX_FLOAT32 = 0, COLLMUX_FLOAT16 = 1, COLLMUX_BFLOAT16 = 2 };

/* GEMV + all-reduce, the row-parallel linear layer: y = sum over the ranks
 * r of A_r x_r, the same bits on every rank. A is this rank's m x k slice
 * (row-major, row stride lda >= k; in PyTorch, weight[:, k0:k0+k] of a
 * Linear layer), x its batch x k slice of the input (row stride ldx), y
 * batch x m (row stride ldy); k may differ between ranks, m and batch
 * (1 to 16) may not, and m is at most 131072; y may not overlap A or x
 * (as in BLAS's GEMV). Products accumulate in fp32. COLLMUX_OPS_ALGO
 * picks the form (docs/usage.md): in the fused one and the cublas one
 * each rank's partial travels in fp32 and the partials are summed in rank
 * order, then rounded once to dtype; in the nccl one, the default past
 * batch 1, the partials are rounded to dtype and NCCL sums them. */
int collmux_gemv_allreduce(int comm, void *stream, int dtype, int m, int k, int batch, const void *a, long long lda,
			   const void *x, long long ldx, void *y, long long ldy);

/* Pooling modes of collmux_embedding_alltoall, as torch.nn.EmbeddingBag's. */
enum { COLLMUX_POOL_SUM = 0, COLLMUX_POOL_MEAN = 1 };

/* Embedding pooling + all-to-all, DLRM's model-parallel embeddings. This
 * rank owns `tables` of the job's tables_total embedding tables (global
 * numbers table_first on; at most 128 a rank), stored one after the other
 * in weights (row-major, dim columns; table t is rows rows[t] to
 * rows[t + 1] - 1, a host array of tables + 1 offsets). Every sample of
 * the global batch looks up each of its tables: bag (t, s) is
 * indices[offsets[t * batch + s]] to indices[offsets[t * batch + s + 1] - 1]
 * (device arrays of int64, rows of table t, as EmbeddingBag's offsets and
 * indices per table), pooled in fp32 by sum or mean, rounded once to
 * dtype. Rank q owns samples batch * q / n to batch * (q + 1) / n - 1 and
 * gets out: (its samples) x tables_total x dim, row-major, the pooled
 * vectors of every rank's tables for its samples, written by the owner of
 * each table as soon as it has pooled them. An index out of its table's
 * range is left out and reported. */
int collmux_embedding_alltoall(int comm, void *stream, int dtype, int mode, int dim, long long batch, int tables, int table_first,
			       int tables_total, const void *weights, const long long *rows, const long long *offsets,
			       const long long *indices, void *out);

/* GEMM + all-to-all, a mixture-of-experts layer's expert computation and
 * its combine. This rank holds `experts` experts; expert e's weight is the
 * k x n row-major matrix at b + e * k * n (elements). The rows of a (k
 * columns, row stride lda) are the tokens routed to them, as the dispatch
 * all-to-all leaves them: for expert 0, the rows from rank 0, then those
 * from rank 1, ..., then expert 1's; rows[e * size + p] (a host array of
 * experts x size) says how many rows expert e got from rank p. Each row's
 * product with its expert's weight goes back to the rank it came from:
 * block (e, p) lands at row dest[e * size + p] (host array) of rank p's
 * out. out is this rank's out_rows x n, row-major and contiguous; rows of
 * it that no rank's block lands in are left undefined. capacity, the same
 * on every rank, bounds every rank's out_rows and every block's end (it
 * sizes collmux's workspace); k, n and dtype are the same on every rank,
 * experts and the counts may differ. Products accumulate in fp32 and are
 * rounded once to dtype. cuBLAS computes each block and writes it straight
 * into the memory of the rank it goes to (over NVLink, tile by tile as
 * the GEMM runs), so the all-to-all costs no pass of its own but the
 * receiver's copy of what it got into out. */
int collmux_gemm_alltoall(int comm, void *stream, int dtype, int k, int n, int experts, const void *a, long long lda, const void *b,
			  const long long *rows, const long long *dest, void *out, long long out_rows, long long capacity);

/* GEMM + reduce-scatter, a tensor-parallel row-parallel linear layer
 * with its output scattered by rows (sequence parallelism). Rank r holds
 * a (m x k rows, row-major, row stride lda), this rank's slice of the
 * input's columns, and b (k x n, ldb), the matching rows of the weight;
 * k may differ between ranks, m, n and dtype may not. Rank q gets rows
 * m * q / size to m * (q + 1) / size - 1 of the sum over ranks of a b,
 * in out (those rows x n, row stride ldo), each rank's partial in fp32,
 * summed in rank order and rounded once. cuBLAS computes each rank's
 * partial of each block and writes it straight into the memory of the
 * rank that owns the block (over NVLink, as the GEMM runs); that rank
 * then sums what it got. */
int collmux_gemm_reducescatter(int comm, void *stream, int dtype, long long m, int n, int k, const void *a, long long lda,
			       const void *b, long long ldb, void *out, long long ldo);

/* All-gather + GEMM, a tensor-parallel column-parallel linear layer
 * whose input is sharded by rows (sequence parallelism). Rank r holds a
 * (m x k, row-major, row stride lda), rows m * r to m * (r + 1) - 1 of
 * the input, and b (k x n, ldb), its columns of the weight; m, k and
 * dtype are the same on every rank, n may differ. Every rank gets out
 * (size * m rows x n, row stride ldo) = the ranks' a stacked in rank
 * order, times b, accumulated in fp32 and rounded once; and, where ag is
 * not NULL, the stacked a itself in ag (size * m x k, row stride ldag).
 * The copy engines push this rank's a into the peers' memory over NVLink
 * while cuBLAS computes this rank's own rows; each peer's rows are
 * computed as soon as its a has arrived. */
int collmux_allgather_gemm(int comm, void *stream, int dtype, long long m, int n, int k, const void *a, long long lda, const void *b,
			   long long ldb, void *out, long long ldo, void *ag, long long ldag);

/* Symmetric memory: `bytes` of device memory on every rank of comm (every
 * rank passes the same bytes), on the device of the current CUDA context,
 * each rank's mapped by its peers, zeroed. Where collmux_gemm_alltoall's
 * out lies in it with room for capacity rows, at the same offset of the
 * same allocation on every rank, the ranks' GEMMs write straight into the
 * ranks' out, with no landing copy: blocks then land anywhere in those
 * capacity rows, not only in the first out_rows. Every rank must pass
 * such an out, or none: a mismatch fails the call on the peers. After a
 * call that failed (a rank that never came within COLLMUX_TIMEOUT), the
 * symmetric memory's contents are undefined, since the GEMMs of the ranks
 * that came may have written into the peers' out. Collective; NULL, with
 * the reason on stderr, when it cannot. Freed by collmux_symm_free
 * (collective: it waits for the communicator's last operation), or with
 * the process: MPI_Comm_free leaves it allocated. */
void *collmux_symm_alloc(int comm, size_t bytes);
int collmux_symm_free(int comm, void *p);

#ifdef __cplusplus
}
#endif

#endif
