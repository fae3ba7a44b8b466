// The library's tensor-core GEMV kernel alone, as nvcc compiles it, timed
// as ../gpu-2026-12-01-session18/gemvx.cu times its variants (runs 4 and
// 5): mod.cu is the module's head and one variant of fused/ops.cu:
//   { cat fused/abi.h; sed -n 1,470p fused/kernels.cu; cat ops.cu; } > mod.cu
//   nvcc -O3 -std=c++17 -arch=sm_90 -o h harness.cu -lcublas
//   ./h [blas]       (blas: cuBLAS's GEMV of the same shape too)
// A record of what was measured, not part of the build.
#include <cstdio>
#include "mod.cu"
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cublas_v2.h>
#define CK(x) do { auto e_ = (x); if (e_) { printf("%s:%d err %d\n", __FILE__, __LINE__, (int)e_); exit(1); } } while (0)
template <typename F> float timeit(F f)
{
	cudaEvent_t a, b;
	cudaEventCreate(&a), cudaEventCreate(&b);
	for (int i = 0; i < 5; i++) f();
	std::vector<float> v;
	for (int r = 0; r < 7; r++) {
		cudaEventRecord(a);
		for (int i = 0; i < 50; i++) f();
		cudaEventRecord(b);
		cudaEventSynchronize(b);
		float ms;
		cudaEventElapsedTime(&ms, a, b);
		v.push_back(ms * 1000 / 50);
	}
	CK(cudaGetLastError());
	std::sort(v.begin(), v.end());
	return v[3];
}
int main(int argc, char **argv)
{
	const bool blas = argc > 1;
	const size_t most = 28672ull * 28672;
	unsigned short *A, *X;
	float *R;
	char *ws;
	u32 *err, *gone;
	CK(cudaMalloc(&A, most * 2));
	CK(cudaMalloc(&X, 16ull * 28672 * 2));
	CK(cudaMalloc(&R, 16ull * 28672 * 4));
	CK(cudaMemset(A, 0x3c, most * 2));
	CK(cudaMemset(X, 0x3c, 16ull * 28672 * 2));
	const size_t flags = (size_t)CMX_OPS_TILES * CMX_MAX_RANKS * 8;
	CK(cudaMalloc(&ws, flags + (64u << 20)));
	CK(cudaMalloc(&err, 4));
	CK(cudaMalloc(&gone, 4));
	CK(cudaMemset(ws, 0, flags));
	OpsCall O = {};
	O.ws[0] = ws, O.flags = 0, O.data = flags, O.n = 1, O.me = 0, O.seq = 1, O.timeout_ns = ~0ull, O.err = err, O.gone = gone;
	cublasHandle_t hb;
	cublasCreate(&hb);
	const float one = 1, zero = 0;
	struct { int m, batch, segs; } cases[] = {{8192, 1, 1}, {8192, 16, 1}, {16384, 1, 5}, {16384, 1, 1}, {16384, 4, 5}, {16384, 16, 2}, {28672, 1, 3}, {28672, 4, 3}, {28672, 16, 2}};
	for (auto c : cases) {
		const int m = c.m, k = c.m;
		Gemv G = {A, X, R, k, k, m, m, k, c.batch, 4, true, true, c.segs};
		const unsigned grid = (unsigned)((m + CMX_OPS_TC_ROWS - 1) / CMX_OPS_TC_ROWS) * c.segs;
		float t = timeit([&] {
			if (c.batch > 8)
				cmx_gemv_tc_bf16_16<<<grid, CMX_OPS_THREADS>>>(O, G);
			else
				cmx_gemv_tc_bf16_8<<<grid, CMX_OPS_THREADS>>>(O, G);
		});
		float tb = blas ? timeit([&] { cublasGemmEx(hb, CUBLAS_OP_T, CUBLAS_OP_N, m, c.batch, k, &one, A, CUDA_R_16BF, k, X, CUDA_R_16BF, k, &zero, R, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT); }) : 0;
		printf("m=k=%d batch %d segs %d: kernel %.1f us, cublas %.1f\n", m, c.batch, c.segs, t, tb);
	}
	return 0;
}
