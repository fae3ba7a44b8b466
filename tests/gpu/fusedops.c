/*
 * fusedops: the fused computation + collective operations of collmux.h
 * against a reference every rank computes on the host, on odd shapes,
 * every element type, MPI_COMM_WORLD and MPI_COMM_SELF, and calls on
 * alternating streams. Inputs are multiples of 1/8 in [-1, 1], exact in
 * every type, so every product and partial sum is exact in fp32 whatever
 * the order: the result must equal the exact sum rounded once to the
 * type (in the nccl form: each rank's exact partial rounded, then their
 * sum), bit for bit, and be the same bits on every rank. Then the errors
 * the API promises (bad arguments, host buffers). Prints
 * "fusedops: N ranks, F failures".
 *
 * build: mpicc -I$CUDA/include -o fusedops tests/gpu/fusedops.c -L$CUDA/lib64 -lcudart -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <string.h>

#include "../../include/collmux.h"
#include "gpu_common.h"

/* the communicator's integer handle, which collmux.h's operations take */
#if MPI_VERSION >= 5
#define COMM_INT(c) MPI_Comm_toint(c)
#else
#define COMM_INT(c) MPI_Comm_c2f(c)
#endif

static int rank, size, failures;
static int (*gemv_ar)(int, void *, int, int, int, int, const void *, long long, const void *, long long, void *, long long);
static int (*emb_a2a)(int, void *, int, int, int, long long, int, int, int, const void *, const long long *, const long long *,
		      const long long *, void *);
static int (*gemm_a2a)(int, void *, int, int, int, int, const void *, long long, const void *, const long long *, const long long *, void *,
		       long long, long long);
static int (*gemm_rs)(int, void *, int, long long, int, int, const void *, long long, const void *, long long, void *, long long);
static int (*ag_gemm)(int, void *, int, long long, int, int, const void *, long long, const void *, long long, void *, long long, void *,
		      long long);
static void *(*symm_alloc)(int, size_t);
static int (*symm_free)(int, void *);

static void fail(const char *fmt, int a, int b, int c, int d) /* fmt: up to four %d */
{
	failures++;
	fprintf(stderr, "fusedops: rank %d: ", rank);
	fprintf(stderr, fmt, a, b, c, d);
	fputc('\n', stderr);
}

/* element types, host side */
static const int esize[] = {4, 2, 2};
static uint16_t to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	u += 0x7fff + ((u >> 16) & 1); /* round to nearest even (no NaNs here) */
	return (uint16_t)(u >> 16);
}
static uint16_t to_f16(float f) /* normal range and zero, round to nearest even */
{
	uint32_t u;
	memcpy(&u, &f, 4);
	uint16_t s = (uint16_t)(u >> 16 & 0x8000);
	if ((u & 0x7fffffff) == 0)
		return s;
	int e = (int)(u >> 23 & 0xff) - 127 + 15;
	uint32_t m = u & 0x7fffff, r = m & 0x1fff;
	m >>= 13;
	if (r > 0x1000 || (r == 0x1000 && (m & 1)))
		m++;
	if (m == 0x400)
		m = 0, e++;
	return (uint16_t)(s | e << 10 | m);
}
static float from_f16(uint16_t h)
{
	int e = h >> 10 & 0x1f, m = h & 0x3ff;
	float f = e ? ldexpf(1.f + m / 1024.f, e - 15) : ldexpf(m / 1024.f, -14);
	return h & 0x8000 ? -f : f;
}
static void put(void *buf, size_t i, int t, float v)
{
	if (t == COLLMUX_FLOAT32)
		((float *)buf)[i] = v;
	else
		((uint16_t *)buf)[i] = t == COLLMUX_FLOAT16 ? to_f16(v) : to_bf16(v);
}
static float get(const void *buf, size_t i, int t)
{
	if (t == COLLMUX_FLOAT32)
		return ((const float *)buf)[i];
	uint16_t h = ((const uint16_t *)buf)[i];
	return t == COLLMUX_FLOAT16 ? from_f16(h) : gpu_from_bf16(h);
}
static float rounded(double v, int t) /* v rounded to type t, as a float */
{
	float f = (float)v; /* exact: every partial sum here is */
	return t == COLLMUX_FLOAT32 ? f : t == COLLMUX_FLOAT16 ? from_f16(to_f16(f)) : gpu_from_bf16(to_bf16(f));
}

/* the spacing of type t's values next to v */
static float ulp(float v, int t)
{
	int e;
	frexpf(v == 0 ? 1e-30f : v, &e);
	return ldexpf(1.f, e - 1 - (t == COLLMUX_FLOAT32 ? 23 : t == COLLMUX_FLOAT16 ? 10 : 7));
}

/* the input of rank r, element i of A or x (which = 0 or 1) in case c:
 * a multiple of 1/8 in [-1, 1], the same on every rank */
static float value(int c, int r, int which, size_t i)
{
	uint64_t h = (uint64_t)c * 0x9E3779B97F4A7C15ull ^ (uint64_t)r * 0xC2B2AE3D27D4EB4Full ^ (uint64_t)which << 60 ^ i * 0x165667B19E3779F9ull;
	h ^= h >> 29, h *= 0xBF58476D1CE4E5B9ull, h ^= h >> 32;
	return (float)((int)(h % 17) - 8) / 8.f;
}

/* Whether collmux_gemv_allreduce takes its nccl form (COLLMUX_OPS_ALGO,
 * and auto's rule in fused/ops.c, which takes the sum form where NCCL
 * cannot serve the communicator: ranks that share a GPU), whose partials
 * are rounded to the element type before NCCL sums them; the other forms
 * round once. */
static int nccl_form(int shared, int batch)
{
	const char *algo = getenv("COLLMUX_OPS_ALGO");
	if (algo && *algo && strcmp(algo, "auto") != 0)
		return strcmp(algo, "nccl") == 0;
	return batch > 1 && !shared;
}

typedef struct {
	int m, k, batch, pad; /* k: rank r has k + r * kstep columns */
	int kstep;
} shape;

/* An embedding case: tables_total tables of `rows0 + t` rows, dealt to
 * the ranks round the table numbers (rank r owns table_first(r) ...),
 * bags of (t + s) % maxlen lookups (empty ones too), every value a
 * multiple of 1/8: the pooled sums are exact in fp32, and a mean is that
 * sum divided in fp32, so every rank's output must equal the host's bit
 * for bit. */
static void emb(MPI_Comm comm, int c, int t, int mode, int dim, long long batch, int total, int maxlen, cudaStream_t stream)
{
	int me, n;
	MPI_Comm_rank(comm, &me);
	MPI_Comm_size(comm, &n);
	const int first = total * me / n, mine = total * (me + 1) / n - first, rows0 = 37;
	const size_t es = (size_t)esize[t];
	long long rows[130] = {0};
	for (int k = 0; k < mine; k++)
		rows[k + 1] = rows[k] + rows0 + first + k;
	long long *off = calloc((size_t)mine * batch + 1, sizeof *off), nnz = 0;
	for (int k = 0; k < mine; k++)
		for (long long s = 0; s < batch; s++)
			off[k * batch + s + 1] = nnz += (first + k + s) % maxlen;
	long long *idx = calloc((size_t)nnz + 1, sizeof *idx);
	for (int k = 0; k < mine; k++)
		for (long long s = 0; s < batch; s++)
			for (long long i = off[k * batch + s]; i < off[k * batch + s + 1]; i++)
				idx[i] = (long long)((uint64_t)(i * 7919 + s) % (uint64_t)(rows0 + first + k));
	void *hw = calloc((size_t)rows[mine] * dim + 1, es);
	for (int k = 0; k < mine; k++)
		for (long long r = 0; r < rows[k + 1] - rows[k]; r++)
			for (int d = 0; d < dim; d++)
				put(hw, (size_t)((rows[k] + r) * dim + d), t, value(c, first + k, (int)(r & 1), (size_t)(r * dim + d)));
	const long long b0 = batch * me / n, bn = batch * (me + 1) / n - b0;
	void *dw, *doff, *didx, *dout;
	CUDA_OK(cudaMalloc(&dw, (size_t)rows[mine] * dim * es + 16));
	CUDA_OK(cudaMalloc(&doff, ((size_t)mine * batch + 1) * 8));
	CUDA_OK(cudaMalloc(&didx, ((size_t)nnz + 1) * 8));
	CUDA_OK(cudaMalloc(&dout, (size_t)bn * total * dim * es + 16));
	CUDA_OK(cudaMemcpy(dw, hw, (size_t)rows[mine] * dim * es, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(doff, off, ((size_t)mine * batch + 1) * 8, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(didx, idx, ((size_t)nnz + 1) * 8, cudaMemcpyHostToDevice));
	int rc = emb_a2a(COMM_INT(comm), stream, t, mode, dim, batch, mine, first, total, dw, rows, doff, didx, dout);
	if (rc != 0)
		fail("embedding case %d (type %d): returned %d", c, t, rc, 0);
	CUDA_OK(cudaStreamSynchronize(stream));
	void *hout = calloc((size_t)bn * total * dim + 1, es);
	CUDA_OK(cudaMemcpy(hout, dout, (size_t)bn * total * dim * es, cudaMemcpyDeviceToHost));
	int bad = 0;
	for (long long s = b0; s < b0 + bn && rc == 0; s++)
		for (int tg = 0; tg < total; tg++) {
			/* table tg's owner, and its rows and bags as that rank made them */
			int p = 0;
			while (total * (p + 1) / n <= tg)
				p++;
			const int pf = total * p / n, k = tg - pf, len = (int)((tg + s) % maxlen), nr = rows0 + tg;
			long long start = 0; /* bag (k, s)'s first index on rank p */
			for (int kk = 0; kk <= k; kk++)
				for (long long ss = 0; ss < batch && !(kk == k && ss == s); ss++)
					start += (pf + kk + ss) % maxlen;
			for (int d = 0; d < dim; d++) {
				float sum = 0;
				for (int i = 0; i < len; i++) {
					const long long r = (long long)((uint64_t)((start + i) * 7919 + s) % (uint64_t)nr);
					sum += value(c, tg, (int)(r & 1), (size_t)(r * dim + d));
				}
				const float want = rounded(mode == COLLMUX_POOL_MEAN && len ? sum / (float)len : sum, t);
				if (get(hout, (size_t)(((s - b0) * total + tg) * dim + d), t) != want && bad++ < 3)
					fail("embedding case %d (type %d): sample %d table %d is not the host's pooling", c, t, (int)s, tg);
			}
		}
	cudaFree(dw), cudaFree(doff), cudaFree(didx), cudaFree(dout);
	free(off), free(idx), free(hw), free(hout);
}

/* A GEMM + all-to-all case: rank q holds 1 + (q + c) % 3 experts, and
 * expert e got moe_rows(c, q, e, p) of its rows from rank p (some none);
 * every rank computes every rank's counts, so each knows where the blocks
 * it sends land (rank p's out: holder 0's experts' blocks in order, then
 * holder 1's, ...) and which rows of which holder it gets back. Inputs are
 * multiples of 1/8, so every product's sum is exact in fp32: the output
 * must be the host's sum rounded once, bit for bit. The call is made reps
 * times on alternating streams with no host synchronisation between. With
 * symm, out lies in symmetric memory (256 bytes into it), where the ranks'
 * GEMMs write it directly. */
static int moe_experts(int c, int q) { return 1 + (q + c) % 3; }
static long long moe_rows(int c, int q, int e, int p) { return (c + 3 * q + 5 * e + 7 * p) % 6; }
static long long moe_dest(int c, int q, int e, int p) /* where block (q, e) lands in rank p's out */
{
	long long at = 0;
	for (int qq = 0; qq <= q; qq++)
		for (int ee = 0; ee < (qq == q ? e : moe_experts(c, qq)); ee++)
			at += moe_rows(c, qq, ee, p);
	return at;
}
static long long moe_arow(int c, int q, int e, int p, int n) /* block (e, p)'s first row in rank q's a */
{
	long long at = 0;
	for (int ee = 0; ee <= e; ee++)
		for (int pp = 0; pp < (ee == e ? p : n); pp++)
			at += moe_rows(c, q, ee, pp);
	return at;
}
static void moe(MPI_Comm comm, int c, int t, int k, int ncol, cudaStream_t *st, int reps, int symm)
{
	int me, n;
	MPI_Comm_rank(comm, &me);
	MPI_Comm_size(comm, &n);
	const size_t es = (size_t)esize[t];
	const int ex = moe_experts(c, me);
	long long rows[3 * 8], dest[3 * 8], arows = moe_arow(c, me, ex, 0, n), capacity = 0, out_rows = moe_dest(c, n, 0, me);
	for (int p = 0; p < n; p++) {
		const long long r = moe_dest(c, n, 0, p);
		capacity = r > capacity ? r : capacity;
	}
	for (int e = 0; e < ex; e++)
		for (int p = 0; p < n; p++)
			rows[e * n + p] = moe_rows(c, me, e, p), dest[e * n + p] = moe_dest(c, me, e, p);
	const long long lda = k + 3;
	void *ha = calloc((size_t)(arows * lda + 1), es), *hb = calloc((size_t)ex * k * ncol + 1, es);
	for (long long r = 0; r < arows; r++)
		for (int i = 0; i < k; i++)
			put(ha, (size_t)(r * lda + i), t, value(c, me, 0, (size_t)(r * k + i)));
	for (size_t i = 0; i < (size_t)ex * k * ncol; i++)
		put(hb, i, t, value(c, me, 1, i));
	void *da, *db, *dout;
	CUDA_OK(cudaMalloc(&da, (size_t)(arows * lda + 1) * es));
	CUDA_OK(cudaMalloc(&db, ((size_t)ex * k * ncol + 1) * es));
	void *base = NULL;
	if (symm) {
		base = symm_alloc(COMM_INT(comm), 256 + (size_t)capacity * ncol * es);
		if (!base) {
			fail("gemm case %d: collmux_symm_alloc failed", c, 0, 0, 0);
			return;
		}
		dout = (char *)base + 256;
	} else {
		CUDA_OK(cudaMalloc(&dout, ((size_t)out_rows * ncol + 1) * es));
	}
	CUDA_OK(cudaMemcpy(da, ha, (size_t)(arows * lda) * es, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(db, hb, (size_t)ex * k * ncol * es, cudaMemcpyHostToDevice));
	for (int i = 0; i < reps; i++) {
		const int rc = gemm_a2a(COMM_INT(comm), st[i % 2], t, k, ncol, ex, da, lda, db, rows, dest, dout, out_rows, capacity);
		if (rc != 0)
			fail("gemm case %d (type %d, k %d): returned %d", c, t, k, rc);
	}
	CUDA_OK(cudaDeviceSynchronize());
	void *hout = calloc((size_t)out_rows * ncol + 1, es);
	CUDA_OK(cudaMemcpy(hout, dout, (size_t)out_rows * ncol * es, cudaMemcpyDeviceToHost));
	int bad = 0;
	for (int q = 0; q < n; q++)
		for (int e = 0; e < moe_experts(c, q); e++)
			for (long long r = 0; r < moe_rows(c, q, e, me); r++) {
				const long long ar = moe_arow(c, q, e, me, n) + r, orow = moe_dest(c, q, e, me) + r;
				for (int j = 0; j < ncol; j++) {
					float sum = 0;
					for (int i = 0; i < k; i++)
						sum += value(c, q, 0, (size_t)(ar * k + i)) * value(c, q, 1, (size_t)e * k * ncol + (size_t)i * ncol + j);
					if (get(hout, (size_t)(orow * ncol + j), t) != rounded(sum, t) && bad++ < 3)
						fail("gemm case %d (type %d): row %d from rank %d is not the host's product", c, t, (int)orow, q);
				}
			}
	if (symm && symm_free(COMM_INT(comm), base) != 0)
		fail("gemm case %d: collmux_symm_free failed", c, 0, 0, 0);
	cudaFree(da), cudaFree(db);
	if (!symm)
		cudaFree(dout);
	free(ha), free(hb), free(hout);
}

/* Rank me's a (m x k, row stride lda) and b (k x ncol, ldb) of case ci,
 * in host memory (ha, hb) and copied into new device buffers (*da, *db,
 * each an element longer) */
static void gemm_inputs(int ci, int me, int t, long long m, int k, int lda, int ncol, int ldb, void *ha, void *hb, void **da, void **db)
{
	const size_t es = (size_t)esize[t];
	for (long long r = 0; r < m; r++)
		for (int j = 0; j < k; j++)
			put(ha, (size_t)(r * lda + j), t, value(ci, me, 0, (size_t)(r * k + j)));
	for (int j = 0; j < k; j++)
		for (int col = 0; col < ncol; col++)
			put(hb, (size_t)j * ldb + col, t, value(ci, me, 1, (size_t)j * ncol + col));
	CUDA_OK(cudaMalloc(da, (size_t)(m * lda + 1) * es));
	CUDA_OK(cudaMalloc(db, ((size_t)k * ldb + 1) * es));
	CUDA_OK(cudaMemcpy(*da, ha, (size_t)(m * lda) * es, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(*db, hb, (size_t)k * ldb * es, cudaMemcpyHostToDevice));
}

/* A GEMM + reduce-scatter case: rank r holds a (m x k + r * kstep, row
 * stride lda = its k + 5) and b (its k x ncol, ldb = ncol + 3); this rank
 * must get its rows block of the sum over ranks, ldo = ncol + 1, whose
 * last column must keep the 0x7f bytes it was filled with. Inputs are
 * multiples of 1/8, so every partial and the sum are exact in fp32: the
 * host's sum rounded once, bit for bit. The call is made reps times on
 * alternating streams with no host synchronisation between, each time on
 * inputs of its own (case c * 16 + i) into an output of its own, and every
 * output is checked. */
static void rs(MPI_Comm comm, int c, int t, long long m, int k0, int kstep, int ncol, cudaStream_t *st, int reps)
{
	int me, n;
	MPI_Comm_rank(comm, &me);
	MPI_Comm_size(comm, &n);
	const size_t es = (size_t)esize[t];
	const int k = k0 + me * kstep, lda = k + 5, ldb = ncol + 3, ldo = ncol + 1;
	const long long r0 = m * me / n, mine = m * (me + 1) / n - r0;
	void *ha = calloc((size_t)(m * lda + 1), es), *hb = calloc((size_t)k * ldb + 1, es), *hout = calloc((size_t)(mine * ldo + 1), es);
	void *da[4], *db[4], *dout[4];
	const unsigned char pad[4] = {0x7f, 0x7f, 0x7f, 0x7f};
	if (reps > 4)
		reps = 4;
	for (int i = 0; i < reps; i++) {
		gemm_inputs(c * 16 + i, me, t, m, k, lda, ncol, ldb, ha, hb, &da[i], &db[i]);
		CUDA_OK(cudaMalloc(&dout[i], (size_t)(mine * ldo + 1) * es));
		CUDA_OK(cudaMemset(dout[i], 0x7f, (size_t)(mine * ldo) * es));
	}
	for (int i = 0; i < reps; i++) {
		const int rc = gemm_rs(COMM_INT(comm), st[i % 2], t, m, ncol, k, da[i], lda, db[i], ldb, dout[i], ldo);
		if (rc != 0)
			fail("reduce-scatter case %d (type %d, m %d): returned %d", c, t, (int)m, rc);
	}
	CUDA_OK(cudaDeviceSynchronize());
	for (int i = 0; i < reps; i++) {
		const int ci = c * 16 + i;
		CUDA_OK(cudaMemcpy(hout, dout[i], (size_t)(mine * ldo) * es, cudaMemcpyDeviceToHost));
		int bad = 0;
		for (long long r = 0; r < mine; r++) {
			for (int j = 0; j < ncol; j++) {
				double sum = 0;
				for (int q = 0; q < n; q++) {
					const int kq = k0 + q * kstep;
					for (int x = 0; x < kq; x++)
						sum += (double)value(ci, q, 0, (size_t)((r0 + r) * kq + x)) * value(ci, q, 1, (size_t)x * ncol + j);
				}
				if (get(hout, (size_t)(r * ldo + j), t) != rounded((float)sum, t) && bad++ < 3)
					fail("reduce-scatter case %d (type %d, call %d): row %d is not the host's sum", c, t, i, (int)(r0 + r));
			}
			if (memcmp((char *)hout + (size_t)(r * ldo + ncol) * es, pad, es) != 0 && bad++ < 3)
				fail("reduce-scatter case %d (type %d, call %d): row %d's padding was written", c, t, i, (int)(r0 + r));
		}
		cudaFree(da[i]), cudaFree(db[i]), cudaFree(dout[i]);
	}
	free(ha), free(hb), free(hout);
}

/* An all-gather + GEMM case: rank r holds a (m x k, row stride lda = k +
 * 3) and b (k x its ncol = ncol0 + r, ldb = its ncol + 2); every rank must
 * get out (size * m x its ncol, ldo = its ncol + 1), the ranks' a stacked
 * times its b, the exact sums rounded once, and, where gathered, the
 * stacked a in ag (ldag = k + 2); the padding columns of out and ag must
 * keep the 0x7f bytes they were filled with. The call is made reps times
 * on alternating streams with no host synchronisation between, each on
 * inputs of its own (case c * 16 + i) into outputs of their own. */
static void agm(MPI_Comm comm, int c, int t, long long m, int k, int ncol0, cudaStream_t *st, int reps, int gathered)
{
	int me, n;
	MPI_Comm_rank(comm, &me);
	MPI_Comm_size(comm, &n);
	const size_t es = (size_t)esize[t];
	const int ncol = ncol0 + me, lda = k + 3, ldb = ncol + 2, ldo = ncol + 1, ldag = k + 2;
	const long long rows = m * n;
	void *ha = calloc((size_t)(m * lda + 1), es), *hb = calloc((size_t)k * ldb + 1, es), *hout = calloc((size_t)(rows * ldo + 1), es),
	     *hag = calloc((size_t)(rows * ldag + 1), es);
	void *da[4], *db[4], *dout[4], *dag[4];
	const unsigned char pad[4] = {0x7f, 0x7f, 0x7f, 0x7f};
	if (reps > 4)
		reps = 4;
	for (int i = 0; i < reps; i++) {
		gemm_inputs(c * 16 + i, me, t, m, k, lda, ncol, ldb, ha, hb, &da[i], &db[i]);
		CUDA_OK(cudaMalloc(&dout[i], (size_t)(rows * ldo + 1) * es));
		CUDA_OK(cudaMalloc(&dag[i], (size_t)(rows * ldag + 1) * es));
		CUDA_OK(cudaMemset(dout[i], 0x7f, (size_t)(rows * ldo) * es));
		CUDA_OK(cudaMemset(dag[i], 0x7f, (size_t)(rows * ldag) * es));
	}
	for (int i = 0; i < reps; i++) {
		const int rc = ag_gemm(COMM_INT(comm), st[i % 2], t, m, ncol, k, da[i], lda, db[i], ldb, dout[i], ldo, gathered ? dag[i] : NULL,
				       ldag);
		if (rc != 0)
			fail("all-gather + GEMM case %d (type %d, m %d): returned %d", c, t, (int)m, rc);
	}
	CUDA_OK(cudaDeviceSynchronize());
	for (int i = 0; i < reps; i++) {
		const int ci = c * 16 + i;
		CUDA_OK(cudaMemcpy(hout, dout[i], (size_t)(rows * ldo) * es, cudaMemcpyDeviceToHost));
		CUDA_OK(cudaMemcpy(hag, dag[i], (size_t)(rows * ldag) * es, cudaMemcpyDeviceToHost));
		int bad = 0;
		for (long long row = 0; row < rows; row++) {
			const int q = (int)(row / m);
			const long long r = row % m;
			for (int j = 0; j < ncol; j++) {
				double sum = 0;
				for (int x = 0; x < k; x++)
					sum += (double)value(ci, q, 0, (size_t)(r * k + x)) * value(ci, me, 1, (size_t)x * ncol + j);
				if (get(hout, (size_t)(row * ldo + j), t) != rounded(sum, t) && bad++ < 3)
					fail("all-gather + GEMM case %d (type %d, call %d): row %d is not the exact product", c, t, i, (int)row);
			}
			if (memcmp((char *)hout + (size_t)(row * ldo + ncol) * es, pad, es) != 0 && bad++ < 3)
				fail("all-gather + GEMM case %d (type %d, call %d): row %d's padding was written", c, t, i, (int)row);
			for (int x = 0; x < k && gathered; x++)
				if (get(hag, (size_t)(row * ldag + x), t) != rounded(value(ci, q, 0, (size_t)(r * k + x)), t) && bad++ < 3)
					fail("all-gather + GEMM case %d (type %d, call %d): gathered row %d is not rank %d's", c, t, i, (int)row);
			if (memcmp((char *)hag + (size_t)(row * ldag + (gathered ? k : 0)) * es, pad, es) != 0 && bad++ < 3)
				fail("all-gather + GEMM case %d (type %d, call %d): gathered row %d was written past its end", c, t, i, (int)row);
		}
		cudaFree(da[i]), cudaFree(db[i]), cudaFree(dout[i]), cudaFree(dag[i]);
	}
	free(ha), free(hb), free(hout), free(hag);
}

/* One case on comm: every rank's inputs made, the call made `reps`
 * times, alternating between two streams with no host synchronisation
 * between them, then the result checked against the exact reference and
 * across ranks. */
static void one(MPI_Comm comm, int c, int t, shape s, cudaStream_t *st, int reps)
{
	int me, n;
	MPI_Comm_rank(comm, &me);
	MPI_Comm_size(comm, &n);
	const int k = s.k + me * s.kstep, lda = k + s.pad, ldx = k + 2 * s.pad, ldy = s.m + s.pad, shared = gpu_shared(comm);
	const size_t es = (size_t)esize[t];
	void *ha = calloc((size_t)s.m * lda + 1, es), *hx = calloc((size_t)s.batch * ldx + 1, es), *hy = calloc((size_t)s.batch * ldy, es);
	for (int i = 0; i < s.m; i++)
		for (int j = 0; j < k; j++)
			put(ha, (size_t)i * lda + j, t, value(c, me, 0, (size_t)i * k + j));
	for (int b = 0; b < s.batch; b++)
		for (int j = 0; j < k; j++)
			put(hx, (size_t)b * ldx + j, t, value(c, me, 1, (size_t)b * k + j));
	void *da, *dx, *dy;
	CUDA_OK(cudaMalloc(&da, (size_t)s.m * lda * es + 16));
	CUDA_OK(cudaMalloc(&dx, (size_t)s.batch * ldx * es + 16));
	CUDA_OK(cudaMalloc(&dy, (size_t)s.batch * ldy * es));
	CUDA_OK(cudaMemcpy(da, ha, (size_t)s.m * lda * es, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(dx, hx, (size_t)s.batch * ldx * es, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemset(dy, 0x7f, (size_t)s.batch * ldy * es));
	int rc = 0;
	for (int i = 0; i < reps && rc == 0; i++)
		if ((rc = gemv_ar(COMM_INT(comm), st[i % 2], t, s.m, k, s.batch, da, lda, dx, ldx, dy, ldy)) != 0)
			fail("case %d (type %d, m %d): collmux_gemv_allreduce returned %d", c, t, s.m, rc);
	CUDA_OK(cudaStreamSynchronize(st[0]));
	CUDA_OK(cudaStreamSynchronize(st[1]));
	CUDA_OK(cudaMemcpy(hy, dy, (size_t)s.batch * ldy * es, cudaMemcpyDeviceToHost));
	int bad = 0;
	for (int b = 0; b < s.batch && rc == 0; b++)
		for (int i = 0; i < s.m; i++) {
			double ref = 0;
			float nref = 0; /* the nccl form: each rank's partial rounded, their sum (exact) rounded */
			for (int r = 0; r < n; r++) {
				double part = 0;
				for (int j = 0; j < s.k + r * s.kstep; j++) {
					const size_t kr = (size_t)(s.k + r * s.kstep);
					part += (double)value(c, r, 0, (size_t)i * kr + j) * value(c, r, 1, (size_t)b * kr + j);
				}
				ref += part;
				nref = rounded(nref + rounded(part, t), t);
			}
			const float got = get(hy, (size_t)b * ldy + i, t);
			/* NCCL adds 3 or more ranks' rounded partials in its own order:
			 * then within an ulp per rank of the rank-order sum */
			const int ok = !nccl_form(shared, s.batch) ? got == rounded(ref, t) : n <= 2 ? got == nref : fabsf(got - nref) <= n * ulp(nref, t);
			if (!ok && bad++ < 3)
				fail("case %d (type %d): y[%d][%d] is not the exact sum", c, t, b, i);
		}
	/* the same bits on every rank */
	uint64_t h = 1469598103934665603ull, h0 = 0;
	for (int b = 0; b < s.batch; b++)
		for (size_t i = 0; i < (size_t)s.m * es; i++)
			h = (h ^ ((unsigned char *)hy)[(size_t)b * ldy * es + i]) * 1099511628211ull;
	h0 = h;
	MPI_Bcast(&h0, 1, MPI_UINT64_T, 0, comm);
	if (h0 != h)
		fail("case %d (type %d, m %d, batch %d): the result differs from rank 0's", c, t, s.m, s.batch);
	cudaFree(da), cudaFree(dx), cudaFree(dy);
	free(ha), free(hx), free(hy);
}

int main(int argc, char **argv)
{
	gpu_mpi_start(&argc, &argv, &rank, &size);
	if (!(*(void **)&gemv_ar = dlsym(RTLD_DEFAULT, "collmux_gemv_allreduce"))) {
		fprintf(stderr, "fusedops: collmux_gemv_allreduce not found: preload libcollmux.so\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	*(void **)&emb_a2a = dlsym(RTLD_DEFAULT, "collmux_embedding_alltoall");
	*(void **)&gemm_a2a = dlsym(RTLD_DEFAULT, "collmux_gemm_alltoall");
	*(void **)&gemm_rs = dlsym(RTLD_DEFAULT, "collmux_gemm_reducescatter");
	*(void **)&ag_gemm = dlsym(RTLD_DEFAULT, "collmux_allgather_gemm");
	*(void **)&symm_alloc = dlsym(RTLD_DEFAULT, "collmux_symm_alloc");
	*(void **)&symm_free = dlsym(RTLD_DEFAULT, "collmux_symm_free");
	if (argc > 1 && strcmp(argv[1], "unavailable") == 0) {
		void *d;
		CUDA_OK(cudaMalloc(&d, 1 << 16));
		for (int i = 0; i < 3; i++)
			if (gemv_ar(COMM_INT(MPI_COMM_WORLD), 0, COLLMUX_FLOAT32, 64, 16, 1, d, 16, d, 16, d, 64) != -1)
				fail("call %d did not return -1 without kernels", i, 0, 0, 0);
		const long long one = 1, zero = 0;
		if (gemm_a2a && gemm_a2a(COMM_INT(MPI_COMM_SELF), 0, COLLMUX_FLOAT32, 16, 16, 1, d, 16, d, &one, &zero, d, 1, 1) != -1)
			fail("collmux_gemm_alltoall did not return -1 without kernels", 0, 0, 0, 0);
		if (gemm_rs && gemm_rs(COMM_INT(MPI_COMM_WORLD), 0, COLLMUX_FLOAT32, 16, 16, 16, d, 16, d, 16, d, 16) != -1)
			fail("collmux_gemm_reducescatter did not return -1 without kernels", 0, 0, 0, 0);
		if (ag_gemm && ag_gemm(COMM_INT(MPI_COMM_WORLD), 0, COLLMUX_FLOAT32, 4, 16, 16, d, 16, d, 16, d, 16, NULL, 0) != -1)
			fail("collmux_allgather_gemm did not return -1 without kernels", 0, 0, 0, 0);
		/* every rank refuses alike, with no rank left in a collective step */
		if (symm_alloc && symm_alloc(COMM_INT(MPI_COMM_WORLD), 4096) != NULL)
			fail("collmux_symm_alloc did not return NULL without kernels", 0, 0, 0, 0);
		/* one rank's size out of range: refused in the agreement, not before it */
		if (symm_alloc && symm_alloc(COMM_INT(MPI_COMM_WORLD), rank ? 4096 : 2) != NULL)
			fail("collmux_symm_alloc of a size out of range on rank 0 did not return NULL", 0, 0, 0, 0);
		if (symm_free && symm_free(COMM_INT(MPI_COMM_WORLD), d) != -1)
			fail("collmux_symm_free of memory it never gave did not return -1", 0, 0, 0, 0);
		int sum = 1;
		MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
		if (sum != size)
			fail("MPI_Allreduce after the calls gave %d", sum, 0, 0, 0);
		MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
		if (rank == 0)
			printf("fusedops: %d ranks, %d failures (unavailable)\n", size, failures);
		MPI_Finalize();
		return failures != 0;
	}
	cudaStream_t st[2], legacy[2] = {0, 0};
	CUDA_OK(cudaStreamCreateWithFlags(&st[0], cudaStreamNonBlocking));
	CUDA_OK(cudaStreamCreate(&st[1]));
	const shape shapes[] = {
		{1, 1, 1, 0, 0},     {7, 3, 3, 0, 1},    {33, 8, 2, 0, 0},     {1000, 1001, 5, 0, 3}, {4097, 513, 16, 0, 0},
		{300, 2053, 2, 5, 7}, {256, 0, 1, 0, 64}, {8192, 1024, 1, 0, 0}, {129, 4096, 8, 8, 0}, {20000, 64, 4, 0, 0},
		{20000, 96, 1, 0, 3}, {20000, 32, 12, 0, 3}, /* k in segments at batch 1 and 12, some of them empty */
	};
	int c = 0;
	for (int t = 0; t < 3; t++)
		for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++, c++)
			one(MPI_COMM_WORLD, c, t, shapes[i], st, 1);
	/* one rank alone, and again on the world after it, on the legacy stream */
	one(MPI_COMM_SELF, c++, COLLMUX_BFLOAT16, shapes[3], st, 1);
	one(MPI_COMM_WORLD, c++, COLLMUX_BFLOAT16, shapes[4], legacy, 1);
	/* bursts of calls, back to back on two streams */
	for (int i = 0; i < 8; i++) {
		shape s = {512 + 64 * i, 256, 1 + i % 4, 0, 0};
		one(MPI_COMM_WORLD, c++, i % 3, s, st, 25);
	}
	/* embedding pooling + all-to-all: every type, both modes, dims that are
	 * not a multiple of a warp's 128, a batch not divisible by the ranks,
	 * more tables than ranks and fewer */
	if (emb_a2a) {
		emb(MPI_COMM_WORLD, c++, COLLMUX_FLOAT32, COLLMUX_POOL_SUM, 16, 10, 3, 5, st[0]);
		emb(MPI_COMM_WORLD, c++, COLLMUX_FLOAT16, COLLMUX_POOL_MEAN, 130, 33, 5, 9, st[1]);
		emb(MPI_COMM_WORLD, c++, COLLMUX_BFLOAT16, COLLMUX_POOL_SUM, 64, 257, 1, 4, st[0]);
		emb(MPI_COMM_WORLD, c++, COLLMUX_FLOAT32, COLLMUX_POOL_MEAN, 128, 1000, 26, 21, st[1]);
		emb(MPI_COMM_SELF, c++, COLLMUX_BFLOAT16, COLLMUX_POOL_MEAN, 24, 7, 2, 3, st[0]);
	} else {
		fail("collmux_embedding_alltoall not found", 0, 0, 0, 0);
	}
	/* GEMM + all-to-all: every type, odd k and n, k = 0 (empty sums), blocks
	 * of no rows, repeated calls on two streams, one rank alone */
	if (gemm_a2a && symm_alloc && symm_free) {
		moe(MPI_COMM_WORLD, c++, COLLMUX_FLOAT32, 16, 8, st, 1, 0);
		moe(MPI_COMM_WORLD, c++, COLLMUX_FLOAT16, 33, 7, st, 3, 0);
		moe(MPI_COMM_WORLD, c++, COLLMUX_BFLOAT16, 128, 130, st, 2, 0);
		moe(MPI_COMM_WORLD, c++, COLLMUX_FLOAT32, 0, 5, st, 1, 0);
		moe(MPI_COMM_SELF, c++, COLLMUX_BFLOAT16, 64, 24, st, 1, 0);
		/* into symmetric memory: once, then repeated on two streams */
		moe(MPI_COMM_WORLD, c++, COLLMUX_BFLOAT16, 96, 40, st, 1, 1);
		moe(MPI_COMM_WORLD, c++, COLLMUX_FLOAT16, 33, 7, st, 4, 1);
		/* symmetric memory the ranks size differently, and a free of memory it never gave */
		if (symm_alloc(COMM_INT(MPI_COMM_WORLD), 4096 + (size_t)size * rank) != NULL && size > 1)
			fail("collmux_symm_alloc of different sizes did not fail", 0, 0, 0, 0);
		void *mine;
		CUDA_OK(cudaMalloc(&mine, 64));
		if (symm_free(COMM_INT(MPI_COMM_WORLD), mine) != -1)
			fail("collmux_symm_free of cudaMalloc'd memory did not fail", 0, 0, 0, 0);
		cudaFree(mine);
	} else {
		fail("collmux_gemm_alltoall not found", 0, 0, 0, 0);
	}
	/* GEMM + reduce-scatter: every type, blocks of unequal rows (m not a
	 * multiple of the ranks), fewer rows than ranks (some blocks empty),
	 * k differing between ranks and k = 0 on rank 0, repeated calls on two
	 * streams, one rank alone */
	if (gemm_rs) {
		rs(MPI_COMM_WORLD, c++, COLLMUX_FLOAT32, 37, 16, 3, 24, st, 1);
		rs(MPI_COMM_WORLD, c++, COLLMUX_BFLOAT16, 512, 128, 0, 256, st, 3);
		rs(MPI_COMM_WORLD, c++, COLLMUX_FLOAT16, 1, 8, 1, 7, st, 1);
		rs(MPI_COMM_WORLD, c++, COLLMUX_FLOAT32, 64, 0, 5, 33, st, 2);
		rs(MPI_COMM_SELF, c++, COLLMUX_BFLOAT16, 40, 64, 0, 100, st, 1);
	} else {
		fail("collmux_gemm_reducescatter not found", 0, 0, 0, 0);
	}
	/* all-gather + GEMM: every type, odd m, k and n, n differing between
	 * ranks, the gathered input or not, k = 0 (empty sums), repeated calls
	 * on two streams, one rank alone */
	if (ag_gemm) {
		agm(MPI_COMM_WORLD, c++, COLLMUX_FLOAT32, 37, 16, 24, st, 1, 1);
		agm(MPI_COMM_WORLD, c++, COLLMUX_BFLOAT16, 256, 128, 200, st, 3, 0);
		agm(MPI_COMM_WORLD, c++, COLLMUX_FLOAT16, 1, 9, 7, st, 2, 1);
		agm(MPI_COMM_WORLD, c++, COLLMUX_FLOAT32, 20, 0, 5, st, 1, 1);
		agm(MPI_COMM_SELF, c++, COLLMUX_BFLOAT16, 40, 64, 100, st, 1, 1);
	} else {
		fail("collmux_allgather_gemm not found", 0, 0, 0, 0);
	}
	/* the errors promised: every rank gets -1 and nothing is queued */
	void *d;
	CUDA_OK(cudaMalloc(&d, 1 << 20));
	static char host[1 << 16];
	const int f = COMM_INT(MPI_COMM_WORLD);
	const int errs[] = {
		gemv_ar(f, 0, COLLMUX_FLOAT32, 8, 8, 17, d, 8, d, 8, d, 8),            /* batch 17 */
		gemv_ar(f, 0, 7, 8, 8, 1, d, 8, d, 8, d, 8),                           /* no such type */
		gemv_ar(f, 0, COLLMUX_FLOAT32, 8, 8, 1, d, 4, d, 8, d, 8),             /* lda < k */
		gemv_ar(f, 0, COLLMUX_FLOAT32, 8, 8, 1, host, 8, host, 8, host, 8),    /* host buffers */
		gemv_ar(COMM_INT(MPI_COMM_NULL), 0, COLLMUX_FLOAT32, 8, 8, 1, d, 8, d, 8, d, 8), /* no communicator */
		gemm_a2a ? gemm_a2a(f, 0, COLLMUX_FLOAT32, 8, 8, 0, host, 8, host, NULL, NULL, host, 4, 4) : -1, /* host buffers */
		gemm_a2a ? gemm_a2a(f, 0, COLLMUX_FLOAT32, 8, 8, 0, d, 8, d, NULL, NULL, d, 5, 4) : -1,          /* out_rows > capacity */
		gemm_rs ? gemm_rs(f, 0, COLLMUX_FLOAT32, 64, 8, 8, host, 8, host, 8, host, 8) : -1,               /* host buffers */
		gemm_rs ? gemm_rs(f, 0, COLLMUX_FLOAT32, 64, 8, 8, d, 4, d, 8, d, 8) : -1,                        /* lda < k */
		gemm_rs ? gemm_rs(f, 0, 5, 64, 8, 8, d, 8, d, 8, d, 8) : -1,                                     /* no such type */
		ag_gemm ? ag_gemm(f, 0, COLLMUX_FLOAT32, 8, 8, 8, host, 8, host, 8, host, 8, NULL, 0) : -1,      /* host buffers */
		ag_gemm ? ag_gemm(f, 0, COLLMUX_FLOAT32, 8, 8, 8, d, 4, d, 8, d, 8, NULL, 0) : -1,               /* lda < k */
		ag_gemm ? ag_gemm(f, 0, COLLMUX_FLOAT32, 8, 8, 8, d, 8, d, 8, d, 8, d, 4) : -1,                  /* ldag < k */
	};
	for (int i = 0; i < (int)(sizeof errs / sizeof errs[0]); i++)
		if (errs[i] != -1)
			fail("error case %d returned %d, not -1", i, errs[i], 0, 0);
	/* and the communicator still works after them */
	one(MPI_COMM_WORLD, c++, COLLMUX_FLOAT32, shapes[2], st, 1);
	/* rank 0 alone refuses a call its peers make (a host buffer of its own,
	 * once set up, so that no collective step tells the others): the peers'
	 * kernels fail on its flags, its refusal sees theirs, and the next call
	 * on that communicator returns -1 on every rank (the operations off
	 * everywhere, nobody waiting for a call another will not make) */
	if (size > 1) {
		MPI_Comm dup;
		MPI_Comm_dup(MPI_COMM_WORLD, &dup);
		const int fd = COMM_INT(dup);
		one(dup, c++, COLLMUX_FLOAT32, shapes[2], st, 1); /* set up */
		const int rc = gemv_ar(fd, 0, COLLMUX_FLOAT32, 64, 8, 1, rank ? d : (void *)host, 8, d, 8, (char *)d + 4096, 64);
		if (rank == 0 && rc != -1)
			fail("rank 0's refused call returned %d, not -1", rc, 0, 0, 0);
		CUDA_OK(cudaDeviceSynchronize());
		MPI_Barrier(dup);
		if (gemv_ar(fd, 0, COLLMUX_FLOAT32, 64, 8, 1, d, 8, d, 8, (char *)d + 4096, 64) != -1)
			fail("the call after one rank's refusal did not return -1 on every rank", 0, 0, 0, 0);
		MPI_Comm_free(&dup);
	}
	cudaFree(d);
	MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("fusedops: %d ranks, %d failures\n", size, failures);
	MPI_Finalize();
	return failures != 0;
}
