// collmux fused kernels: one launch copies this rank's input into its
// workspace (shared with the peers through CUDA IPC), signals the peers,
// waits for theirs, and reads/reduces straight from their workspaces over
// NVLink. Compiled at run time with NVRTC (no CUDA toolchain at build time).
//
// Workspace of each rank: two data slots (alternating calls, so one
// barrier per call suffices: a peer can only write a slot again after
// every rank passed the next call's barrier, i.e. finished reading it)
// followed by flags[CMX_MAX_BLOCKS][CMX_MAX_RANKS], written by peers.

#define CMX_MAX_RANKS 8
#define CMX_MAX_BLOCKS 64

typedef unsigned long long u64;
typedef unsigned int u32;

struct Peers {
	char *buf[CMX_MAX_RANKS];  // each rank's data slot for this call
	u32 *flags[CMX_MAX_RANKS]; // each rank's flag array
};

struct Call {
	int n, me, root;
	u32 epoch;
	u64 timeout_ns;
	u32 *err; // host-mapped: bit p set when rank p did not arrive in time
};

__device__ __forceinline__ u64 now_ns()
{
	u64 t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}
__device__ __forceinline__ void st_release(u32 *p, u32 v)
{
	asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ u32 ld_relaxed(const u32 *p)
{
	u32 v;
	asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
	return v;
}

// Block b tells every peer that its part of this rank's slot is written,
// then waits until every peer's block b says the same (or the watchdog
// fires). Blocks touch the same index ranges on every rank, so this
// per-block barrier is all the ordering a call needs. One system fence
// publishes the block's writes; polling is relaxed, with one acquire fence
// once every peer has arrived.
__device__ void barrier(const Peers &P, const Call &C)
{
	__syncthreads();
	if (threadIdx.x == 0)
		__threadfence_system();
	__syncthreads();
	const int b = blockIdx.x, p = threadIdx.x;
	if (p < C.n) {
		st_release(P.flags[p] + b * CMX_MAX_RANKS + C.me, C.epoch);
		const u32 *f = P.flags[C.me] + b * CMX_MAX_RANKS + p;
		u64 t0 = 0;
		for (unsigned spins = 0; (int)(ld_relaxed(f) - C.epoch) < 0; spins++) {
			if ((spins & 1023) == 0) { // the clock is read rarely: it is slow
				u64 t = now_ns();
				if (!t0)
					t0 = t;
				else if (t - t0 > C.timeout_ns) {
					atomicOr(C.err, 1u << p);
					break;
				}
			}
		}
		asm volatile("fence.acq_rel.sys;" ::: "memory");
	}
	__syncthreads();
}

// the byte range [lo, hi) of an n-byte buffer that block b handles, in
// 16-byte units so that vector copies stay aligned
__device__ __forceinline__ void my_range(u64 n, u64 *lo, u64 *hi)
{
	u64 units = (n + 15) / 16, per = (units + gridDim.x - 1) / gridDim.x;
	*lo = min(n, (u64)blockIdx.x * per * 16);
	*hi = min(n, *lo + per * 16);
}

__device__ void copy(char *dst, const char *src, u64 lo, u64 hi)
{
	if ((((u64)dst | (u64)src | lo) & 15) == 0) {
		u64 vhi = lo + ((hi - lo) & ~(u64)15);
		for (u64 i = lo + threadIdx.x * 16; i < vhi; i += blockDim.x * 16)
			*(uint4 *)(dst + i) = *(const uint4 *)(src + i);
		lo = vhi;
	}
	for (u64 i = lo + threadIdx.x; i < hi; i += blockDim.x)
		dst[i] = src[i];
}

// ---- data movement: allgather, bcast, alltoall (blk bytes per rank) ----
enum { MOVE_ALLGATHER, MOVE_BCAST, MOVE_ALLTOALL };

extern "C" __global__ void cmx_move(Peers P, Call C, const char *in, char *out, u64 blk, int mode)
{
	u64 lo, hi;
	my_range(blk, &lo, &hi);
	char *mine = P.buf[C.me];
	if (mode == MOVE_ALLTOALL)
		for (int j = 0; j < C.n; j++)
			copy(mine + j * blk, in + j * blk, lo, hi);
	else if (mode == MOVE_ALLGATHER || C.me == C.root)
		copy(mine, in, lo, hi);
	barrier(P, C);
	if (mode == MOVE_BCAST) {
		if (C.me != C.root)
			copy(out, P.buf[C.root], lo, hi);
		return;
	}
	for (int k = 0; k < C.n; k++) {
		int p = (C.me + k) % C.n; // start with different peers on each rank
		copy(out + p * blk, P.buf[p] + (mode == MOVE_ALLTOALL ? C.me * blk : 0), lo, hi);
	}
}

// ---- all-reduce, one shot: every rank reduces all slots in rank order ----
template <typename T> struct Sum {
	__device__ static T f(T a, T b) { return a + b; }
};
template <typename T> struct Min {
	__device__ static T f(T a, T b) { return b < a ? b : a; }
};
template <typename T> struct Max {
	__device__ static T f(T a, T b) { return a < b ? b : a; }
};

// 16-bit floats are reduced in fp32 and rounded once per step, as NCCL does
struct f16 {
	unsigned short v;
};
struct bf16 {
	unsigned short v;
};
__device__ __forceinline__ float tof(f16 x)
{
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.v));
	return f;
}
__device__ __forceinline__ f16 fromf(float f, f16)
{
	f16 x;
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(x.v) : "f"(f));
	return x;
}
__device__ __forceinline__ float tof(bf16 x) { return __uint_as_float((u32)x.v << 16); }
__device__ __forceinline__ bf16 fromf(float f, bf16)
{
	bf16 x;
	asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(x.v) : "f"(f));
	return x;
}
template <template <typename> class OP> struct Half {
	template <typename H> __device__ static H f(H a, H b) { return fromf(OP<float>::f(tof(a), tof(b)), a); }
};

// one 16-byte vector of every rank's slot at byte offset off, reduced
template <typename T, typename R> __device__ __forceinline__ uint4 reduce16(const Peers &P, int n, u64 off)
{
	union U {
		uint4 v;
		T e[16 / sizeof(T)];
	} acc, x;
	acc.v = *(const uint4 *)(P.buf[0] + off);
	for (int p = 1; p < n; p++) {
		x.v = *(const uint4 *)(P.buf[p] + off);
#pragma unroll
		for (int k = 0; k < 16 / (int)sizeof(T); k++)
			acc.e[k] = R::f(acc.e[k], x.e[k]);
	}
	return acc.v;
}

template <typename T, typename R> __device__ void allreduce(const Peers &P, const Call &C, const char *in, char *out, u64 count)
{
	u64 lo, hi;
	const u64 bytes = count * sizeof(T);
	my_range(bytes, &lo, &hi);
	copy(P.buf[C.me], in, lo, hi);
	barrier(P, C);
	// reduce in rank order (0, 1, ..., n-1) so that every rank gets the
	// same bits; 16-byte loads where the output allows (slots always do)
	if (((u64)out & 15) == 0) {
		u64 vhi = lo + ((hi - lo) & ~(u64)15);
		for (u64 i = lo + threadIdx.x * 16; i < vhi; i += blockDim.x * 16)
			*(uint4 *)(out + i) = reduce16<T, R>(P, C.n, i);
		lo = vhi;
	}
	for (u64 i = lo / sizeof(T) + threadIdx.x; i < hi / sizeof(T); i += blockDim.x) {
		T acc = ((const T *)P.buf[0])[i];
		for (int p = 1; p < C.n; p++)
			acc = R::f(acc, ((const T *)P.buf[p])[i]);
		((T *)out)[i] = acc;
	}
}

#define AR(name, T, R)                                                                                   \
	extern "C" __global__ void cmx_allreduce_##name(Peers P, Call C, const char *in, char *out, u64 count) \
	{                                                                                                \
		allreduce<T, R>(P, C, in, out, count);                                                   \
	}
#define AR3(name, T) AR(name##_sum, T, Sum<T>) AR(name##_min, T, Min<T>) AR(name##_max, T, Max<T>)
AR3(f32, float)
AR3(f64, double)
AR3(i32, int)
AR3(u32, unsigned)
AR3(i64, long long)
AR3(u64, unsigned long long)
AR(f16_sum, f16, Half<Sum>) AR(f16_min, f16, Half<Min>) AR(f16_max, f16, Half<Max>)
AR(bf16_sum, bf16, Half<Sum>) AR(bf16_min, bf16, Half<Min>) AR(bf16_max, bf16, Half<Max>)
