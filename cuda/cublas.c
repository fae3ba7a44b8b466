/* cublas.c: cuBLAS, loaded with dlopen at first use, for the unfused form
 * of collmux's fused operations (fused/ops.c). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>

#include "cmx.h"

static struct {
	int (*Create)(void **);
	int (*SetStream)(void *, void *);
	int (*SetMathMode)(void *, int);
	int (*GemmEx)(void *, int, int, int, int, int, const void *, const void *, int, int, const void *, int, int, const void *, void *,
		      int, int, int, int);
} bl;
static void *handle; /* one for the process: each call sets its stream under mu */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static int load(void)
{
	static int tried;
	if (tried)
		return handle != NULL;
	tried = 1;
	const char *names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so", NULL};
	void *h = NULL;
	for (int i = 0; names[i] && !h; i++)
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return 0;
	*(void **)&bl.Create = dlsym(h, "cublasCreate_v2");
	*(void **)&bl.SetStream = dlsym(h, "cublasSetStream_v2");
	*(void **)&bl.GemmEx = dlsym(h, "cublasGemmEx");
	*(void **)&bl.SetMathMode = dlsym(h, "cublasSetMathMode");
	/* CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION (16): a split-K
	 * GEMM sums its pieces in fp32, not in the 16-bit output type, which
	 * it does by default (the GPU suite caught bf16 partials off by an
	 * ulp); collmux.h promises fp32 accumulation */
	enum { DEFAULT_MATH = 0, DISALLOW_REDUCED_PRECISION_REDUCTION = 16 };
	if (!bl.Create || !bl.SetStream || !bl.GemmEx || !bl.SetMathMode || bl.Create(&handle) != 0 ||
	    bl.SetMathMode(handle, DEFAULT_MATH | DISALLOW_REDUCED_PRECISION_REDUCTION) != 0)
		handle = NULL;
	return handle != NULL;
}

int cmx_cublas_ready(void)
{
	pthread_mutex_lock(&mu);
	const int ok = load();
	pthread_mutex_unlock(&mu);
	return ok;
}

/* One column-major GemmEx, r = op(p) q, accumulating in fp32, on stream
 * (the handle is the process's: its stream is set under mu). */
static int gemm_ex(void *stream, int op_p, int m, int n, int k, const void *p, int ptype, long long ldp, const void *q, int qtype,
		   long long ldq, void *r, int rtype, long long ldr)
{
	/* cudaDataType: R_32F 0, R_16F 2, R_16BF 14; CUBLAS_COMPUTE_32F 68 */
	static const int types[] = {0, 2, 14};
	enum { OP_N = 0, COMPUTE_32F = 68, GEMM_DEFAULT = -1 };
	const float one = 1, zero = 0;
	pthread_mutex_lock(&mu);
	int ok = load() && bl.SetStream(handle, stream) == 0 &&
		 bl.GemmEx(handle, op_p, OP_N, m, n, k, &one, p, types[ptype], (int)ldp, q, types[qtype], (int)ldq, &zero, r, types[rtype],
			   (int)ldr, COMPUTE_32F, GEMM_DEFAULT) == 0;
	pthread_mutex_unlock(&mu);
	return ok;
}

int cmx_cublas_gemv(void *stream, int dtype, int m, int k, int batch, const void *a, long long lda, const void *x, long long ldx, void *y,
		    int ytype, long long ldy)
{
	/* row-major A (m x k) is column-major k x m: y (m x batch, column-major) = A^T x */
	return gemm_ex(stream, 1 /* OP_T */, m, batch, k, a, dtype, lda, x, dtype, ldx, y, ytype, ldy);
}

int cmx_cublas_gemm(void *stream, int dtype, int rows, int n, int k, const void *a, long long lda, const void *b, long long ldb, void *c,
		    int ctype, long long ldc)
{
	/* row-major C (rows x n) = A B is column-major C^T (n x rows) = B^T A^T,
	 * and row-major B and A are column-major B^T and A^T */
	return gemm_ex(stream, 0 /* OP_N */, n, rows, k, b, dtype, ldb, a, dtype, lda, c, ctype, ldc);
}
