// The experiment behind the tensor-core GEMV's loads and segments
// (fused/ops.cu gemv_tc, fused/plan.c cmx_gemv_plan): variants of the
// kernel alone (no flags, no pushes, no sum kernel) against cuBLAS's GEMV
// on one GPU, bf16, m = k from 4096 to 28672, batch 1, 4 and 16. A record
// of what was measured, not part of the build: nvcc compiles it in
// seconds, where the library's module takes NVRTC minutes.
//   nvcc -O3 -std=c++17 -arch=sm_90 -o gemvx gemvx.cu -lcublas
//   ./gemvx          run 2: loads (H0 __ldg, H1 L2::256B, H2 L2::128B),
//                    chunks in flight (U), 16-row groups a tile (G), segments
//   ./gemvx fence    run 4: a system-scope flag per unit (F1) and
//                    persistent grids of 2 and 3 blocks a multiprocessor
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cuda_bf16.h>
#include <cublas_v2.h>
typedef unsigned u32;
#define CK(x) do { auto e_ = (x); if (e_) { printf("%s:%d err %d\n", __FILE__, __LINE__, (int)e_); exit(1); } } while (0)

__device__ __forceinline__ void mma(float *d, const u32 *a, u32 b0, u32 b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
		     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <int H> __device__ __forceinline__ uint4 ldA(const void *p)
{
	uint4 v;
	if (H == 1)
		asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
	else if (H == 2)
		asm volatile("ld.global.nc.L1::no_allocate.L2::128B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
	else
		v = __ldg((const uint4 *)p);
	return v;
}

// Tile: G groups of 16 rows; W = 8 / G warps split k within a group.
// Lane (g, t4): rows g, g+8; per chunk of 32 columns 16 B at 8*t4.
// Unit = tile x segment. Out: partial[seg][b][row] fp32 (full k, so segs=1 here).
__device__ unsigned long long flags[1 << 16];
template <int NT, int U, int G, int H, int F = 0>
__global__ void __launch_bounds__(256) tc(const __nv_bfloat16 *A, const __nv_bfloat16 *X, float *Y, int m, int k, int batch, int segs)
{
	constexpr int W = 8 / G, ROWS = 16 * G;
	__shared__ float red[8][16][8 * NT];
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
	const int chunks = k / 32, q = warp % W, grp = warp / W;
	const u32 units = (u32)((m + ROWS - 1) / ROWS) * segs;
	for (u32 unit = blockIdx.x; unit < units; unit += gridDim.x) {
		const u32 t = unit / segs, seg = unit % segs;
		const int s_lo = chunks * seg / segs, s_hi = chunks * (seg + 1) / segs;
		const int c_lo = s_lo + (s_hi - s_lo) * q / W, c_hi = s_lo + (s_hi - s_lo) * (q + 1) / W;
		const int r0 = t * ROWS + grp * 16 + g;
		const __nv_bfloat16 *ar0 = A + (long long)min(r0, m - 1) * k, *ar1 = A + (long long)min(r0 + 8, m - 1) * k;
		float d[NT][4] = {};
		int c0 = c_lo;
		for (; c0 + U <= c_hi; c0 += U) {
			uint4 a[U][2], x[U][NT];
#pragma unroll
			for (int u = 0; u < U; u++) {
				const int j = (c0 + u) * 32 + 8 * t4;
				a[u][0] = ldA<H>(ar0 + j), a[u][1] = ldA<H>(ar1 + j);
#pragma unroll
				for (int n = 0; n < NT; n++)
					x[u][n] = g + 8 * n < batch ? __ldg((const uint4 *)(X + (long long)(g + 8 * n) * k + j)) : make_uint4(0, 0, 0, 0);
			}
#pragma unroll
			for (int u = 0; u < U; u++)
#pragma unroll
				for (int h = 0; h < 2; h++) {
					const u32 f[4] = {h ? a[u][0].z : a[u][0].x, h ? a[u][1].z : a[u][1].x, h ? a[u][0].w : a[u][0].y, h ? a[u][1].w : a[u][1].y};
#pragma unroll
					for (int n = 0; n < NT; n++)
						mma(d[n], f, h ? x[u][n].z : x[u][n].x, h ? x[u][n].w : x[u][n].y);
				}
		}
		for (; c0 < c_hi; c0++) {
			const int j = c0 * 32 + 8 * t4;
			uint4 a0 = ldA<H>(ar0 + j), a1 = ldA<H>(ar1 + j), x[NT];
#pragma unroll
			for (int n = 0; n < NT; n++)
				x[n] = g + 8 * n < batch ? __ldg((const uint4 *)(X + (long long)(g + 8 * n) * k + j)) : make_uint4(0, 0, 0, 0);
#pragma unroll
			for (int h = 0; h < 2; h++) {
				const u32 f[4] = {h ? a0.z : a0.x, h ? a1.z : a1.x, h ? a0.w : a0.y, h ? a1.w : a1.y};
#pragma unroll
				for (int n = 0; n < NT; n++)
					mma(d[n], f, h ? x[n].z : x[n].x, h ? x[n].w : x[n].y);
			}
		}
#pragma unroll
		for (int n = 0; n < NT; n++) {
			red[warp][g][8 * n + 2 * t4] = d[n][0], red[warp][g][8 * n + 2 * t4 + 1] = d[n][1];
			red[warp][g + 8][8 * n + 2 * t4] = d[n][2], red[warp][g + 8][8 * n + 2 * t4 + 1] = d[n][3];
		}
		__syncthreads();
		for (int i = threadIdx.x; i < ROWS * batch; i += blockDim.x) {
			const int rl = i % ROWS, b = i / ROWS, w0 = (rl / 16) * W, row = t * ROWS + rl;
			if (row >= m)
				continue;
			float v = 0;
			for (int w = 0; w < W; w++)
				v += red[w0 + w][rl % 16][b];
			Y[((long long)seg * batch + b) * m + row] = v;
		}
		__syncthreads();
		if (F && threadIdx.x == 0)
			asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(&flags[unit]), "l"((unsigned long long)unit + 1) : "memory");
	}
}

// batch-1 loop: warp per RW rows, lane 8 elements per step, U steps in flight
template <int RW, int U, int H>
__global__ void __launch_bounds__(256) loop1(const __nv_bfloat16 *A, const __nv_bfloat16 *X, float *Y, int m, int k)
{
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int rows = 8 * RW, tiles = (m + rows - 1) / rows;
	for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
		const int row0 = t * rows + warp * RW;
		float acc[RW] = {};
		for (int j0 = lane * 8; j0 < k; j0 += 256 * U) {
			uint4 raw[RW][U];
#pragma unroll
			for (int u = 0; u < U; u++)
#pragma unroll
				for (int r = 0; r < RW; r++)
					raw[r][u] = j0 + 256 * u < k ? ldA<H>(A + (long long)min(row0 + r, m - 1) * k + j0 + 256 * u) : make_uint4(0, 0, 0, 0);
#pragma unroll
			for (int u = 0; u < U; u++) {
				if (j0 + 256 * u >= k)
					break;
				uint4 xv = __ldg((const uint4 *)(X + j0 + 256 * u));
				const __nv_bfloat162 *xh = (const __nv_bfloat162 *)&xv;
#pragma unroll
				for (int r = 0; r < RW; r++) {
					const __nv_bfloat162 *ah = (const __nv_bfloat162 *)&raw[r][u];
#pragma unroll
					for (int i = 0; i < 4; i++) {
						float2 a2 = __bfloat1622float2(ah[i]), x2 = __bfloat1622float2(xh[i]);
						acc[r] = fmaf(a2.x, x2.x, fmaf(a2.y, x2.y, acc[r]));
					}
				}
			}
		}
#pragma unroll
		for (int r = 0; r < RW; r++) {
			float v = acc[r];
			for (int s = 16; s; s >>= 1)
				v += __shfl_xor_sync(~0u, v, s);
			if (lane == r && row0 + r < m)
				Y[row0 + r] = v;
		}
	}
}

__global__ void roof(const uint4 *A, size_t n16, float *Y)
{
	u32 s = 0;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16; i += (size_t)gridDim.x * blockDim.x) {
		uint4 v = __ldcs(A + i);
		s ^= v.x ^ v.y ^ v.z ^ v.w;
	}
	if (s == 0x12345678)
		Y[0] = 1;
}

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
	const bool fence = argc > 1 && strcmp(argv[1], "fence") == 0; // run 4's set; else run 2's
	int sms;
	cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
	const size_t most = 28672ull * 28672;
	__nv_bfloat16 *A, *X;
	float *Y, *R;
	CK(cudaMalloc(&A, most * 2));
	CK(cudaMalloc(&X, 16ull * 28672 * 2));
	CK(cudaMalloc(&Y, 8ull * 16 * 28672 * 4));
	CK(cudaMalloc(&R, 16ull * 28672 * 4));
	{
		std::vector<__nv_bfloat16> h(1 << 20);
		for (size_t i = 0; i < h.size(); i++) h[i] = __float2bfloat16((float)((i * 7919) % 17) / 8 - 1);
		for (size_t o = 0; o < most; o += h.size()) CK(cudaMemcpy(A + o, h.data(), std::min(h.size(), most - o) * 2, cudaMemcpyHostToDevice));
		CK(cudaMemcpy(X, h.data(), 16ull * 28672 * 2, cudaMemcpyHostToDevice));
	}
	cublasHandle_t hb;
	cublasCreate(&hb);
	float one = 1, zero = 0;
	printf("sms %d\n", sms);
	printf("roof: %.0f GB/s (1.5 GiB streamed)\n", most * 2 / timeit([&] { roof<<<sms * 8, 512>>>((const uint4 *)A, most * 2 / 16, Y); }) / 1e3);
	const int ms_[] = {4096, 8192, 16384, 28672};
	for (int m : ms_) {
		const int k = m;
		for (int batch : {1, 4, 16}) {
			const double gb = (double)m * k * 2 / 1e3;
			float tb = timeit([&] { cublasGemmEx(hb, CUBLAS_OP_T, CUBLAS_OP_N, m, batch, k, &one, A, CUDA_R_16BF, k, X, CUDA_R_16BF, k, &zero, R, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT); });
			printf("m=k=%d batch %d cublas %.1f us %.0f GB/s\n", m, batch, tb, gb / tb);
			std::vector<float> ref(batch * m), got(batch * m);
			CK(cudaMemcpy(ref.data(), R, ref.size() * 4, cudaMemcpyDeviceToHost));
			auto check = [&](int segs) {
				CK(cudaDeviceSynchronize());
				std::vector<float> p(segs * batch * m);
				CK(cudaMemcpy(p.data(), Y, p.size() * 4, cudaMemcpyDeviceToHost));
				double worst = 0;
				for (int i = 0; i < batch * m; i++) {
					float s = 0;
					for (int g = 0; g < segs; g++) s += p[g * batch * m + i];
					worst = std::max(worst, (double)fabsf(s - ref[i]) / (1 + fabsf(ref[i])));
				}
				return worst;
			};
#define TC(NT, U, G, H, segs)                                                                                              \
	do {                                                                                                               \
		const int units = (m + 16 * G - 1) / (16 * G) * segs;                                                          \
		float t = timeit([&] { tc<NT, U, G, H><<<units, 256>>>(A, X, Y, m, k, batch, segs); });                         \
		printf("  tc NT%d U%d G%d H%d segs%d: %.1f us %.0f GB/s %.2fx  err %.1e\n", NT, U, G, H, segs, t, gb / t, tb / t, check(segs)); \
	} while (0)
			auto segsfor = [&](int rows) { int tiles = (m + rows - 1) / rows; if (tiles < 3 * sms) return 1; int w = (16 * sms + tiles - 1) / tiles; return std::min(w, 6); };
#define TCF(NT, F, segs, grid)                                                                                      \
	do {                                                                                                               \
		const int units = (m + 31) / 32 * segs;                                                                        \
		const int gr = grid ? std::min(grid, units) : units;                                                           \
		float t = timeit([&] { tc<NT, 4, 2, 1, F><<<gr, 256>>>(A, X, Y, m, k, batch, segs); });                        \
		printf("  tc NT%d H1 F%d segs%d grid %d: %.1f us %.0f GB/s %.2fx  err %.1e\n", NT, F, segs, gr, t, gb / t, tb / t, check(segs)); \
	} while (0)
			if (!fence && batch <= 8) {
				const int s2 = segsfor(32), s4 = segsfor(64), s8 = segsfor(128);
				TC(1, 4, 2, 0, 1); TC(1, 4, 2, 0, s2);
				TC(1, 4, 2, 1, s2); TC(1, 4, 2, 2, s2);
				TC(1, 8, 2, 0, s2); TC(1, 8, 2, 1, s2);
				TC(1, 4, 4, 0, s4); TC(1, 4, 4, 1, s4); TC(1, 8, 4, 1, s4);
				TC(1, 4, 8, 0, s8); TC(1, 4, 8, 1, s8); TC(1, 8, 8, 1, s8);
				TC(1, 8, 8, 1, 1);
			} else if (!fence) {
				const int s2 = segsfor(32), s4 = segsfor(64);
				TC(2, 4, 2, 0, s2); TC(2, 4, 2, 1, s2); TC(2, 8, 2, 1, s2);
				TC(2, 4, 4, 1, s4); TC(2, 8, 4, 1, s4);
			}
			if (fence) {
				const int s2 = segsfor(32), nt2 = batch > 8;
				for (int sg : {1, s2, std::max(1, s2 / 2)}) {
					if (nt2) { TCF(2, 0, sg, 0); TCF(2, 1, sg, 0); TCF(2, 1, sg, 2 * sms); }
					else { TCF(1, 0, sg, 0); TCF(1, 1, sg, 0); TCF(1, 1, sg, 2 * sms); TCF(1, 1, sg, 3 * sms); }
				}
			}
			if (!fence && batch == 1) {
#define LP(RW, U, H)                                                                                              \
	do {                                                                                                      \
		float t = timeit([&] { loop1<RW, U, H><<<(m + 8 * RW - 1) / (8 * RW), 256>>>(A, X, Y, m, k); });   \
		printf("  loop RW%d U%d H%d: %.1f us %.0f GB/s %.2fx  err %.1e\n", RW, U, H, t, gb / t, tb / t, check(1)); \
	} while (0)
				LP(4, 4, 0); LP(4, 4, 1); LP(2, 4, 1); LP(2, 8, 1); LP(1, 8, 1); LP(4, 2, 1);
			}
		}
	}
	return 0;
}
