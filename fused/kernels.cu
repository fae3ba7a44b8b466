// collmux fused kernels: one kernel copies this rank's input into its
// workspace (shared with the peers through CUDA IPC), signals the peers,
// waits for theirs, and reads/reduces straight from their workspaces over
// NVLink. Compiled at run time with NVRTC (no CUDA toolchain at build time).
//
// The kernel is resident: it stays on the GPU between calls and takes each
// job from a doorbell in host memory that the CPU writes with plain stores,
// so a call costs no kernel launch. After COLLMUX_FUSED_LINGER without a
// job it exits, and the next call launches it again.
//
// Workspace of each rank: two data slots (alternating calls, so one
// barrier per call suffices: a peer can only write a slot again after
// every rank passed the next call's barrier, i.e. finished reading it),
// then flags[CMX_MAX_BLOCKS][CMX_MAX_RANKS], written by peers, the rank's
// own Ctl, a word for the set-up probe, and two LL areas (alternating
// calls) of CMX_LL_SLOT per source rank, written by peers.

// CMX_MAX_RANKS, CMX_LL_MAX, the job codes and the element types are in
// abi.h, at the head of the module.
#define CMX_LL_SLOT (2 * CMX_LL_MAX) // one source rank's LL lines

typedef unsigned long long u64;
typedef unsigned int u32;

// Where this call's parts of every rank's workspace are. The pointers are
// worked out when used, from the kernel's parameter (which stays in the
// constant bank: __grid_constant__), not held in an array of 3 x
// CMX_MAX_RANKS pointers that the kernel would have to keep in registers
// or spill.
struct Peers {
	char *const *ws;     // every rank's workspace, mapped here (Ring::ws)
	u64 slot, flags, ll; // offsets of this call's data slot, the flags, this call's LL area
	__device__ __forceinline__ char *buf(int p) const { return ws[p] + slot; }
	__device__ __forceinline__ u32 *flag(int p) const { return (u32 *)(ws[p] + flags); }
	__device__ __forceinline__ char *ll_area(int p) const { return ws[p] + ll; } // CMX_LL_SLOT per source rank
};

struct Call {
	int n, me, root;
	u32 epoch;
	u64 timeout_ns;
	u32 *err; // host-mapped: bit p set when rank p did not arrive in time; err[1], the first job that timed out
};

__device__ __forceinline__ u64 now_ns()
{
	u64 t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}
// Ordered loads and stores of flags and control words, one PTX
// instruction each: semantics (relaxed, acquire, release), scope (gpu: the
// blocks of this kernel; sys: peers over NVLink and the host), width.
#define CMX_LD(name, T, ptx, reg)                                                   \
	__device__ __forceinline__ T name(const T *p)                               \
	{                                                                           \
		T v;                                                                \
		asm volatile(ptx " %0, [%1];" : "=" reg(v) : "l"(p) : "memory"); \
		return v;                                                           \
	}
#define CMX_ST(name, T, ptx, reg) \
	__device__ __forceinline__ void name(T *p, T v) { asm volatile(ptx " [%0], %1;" ::"l"(p), reg(v) : "memory"); }
CMX_LD(ld_relaxed, u32, "ld.relaxed.sys.global.u32", "r")
CMX_LD(ld_acquire, u32, "ld.acquire.sys.global.u32", "r")
CMX_ST(st_release, u32, "st.release.sys.global.u32", "r")
CMX_LD(ld_acquire_gpu, u32, "ld.acquire.gpu.global.u32", "r")
CMX_LD(ld_acquire_gpu64, u64, "ld.acquire.gpu.global.u64", "l")
CMX_ST(st_release_gpu, u32, "st.release.gpu.global.u32", "r")
CMX_ST(st_release_gpu64, u64, "st.release.gpu.global.u64", "l")

// The watchdog: rank p did not arrive within the timeout. The host fails
// the requests of this job and of those after it, not of those before:
// it reads err, then err[1], which is therefore written first.
__device__ __forceinline__ void missed(const Call &C, int p)
{
	atomicCAS(C.err + 1, 0u, C.epoch);
	__threadfence_system();
	atomicOr(C.err, 1u << p);
}

// Block b tells every peer that its part of this rank's slot is written,
// then waits until every peer's block b says the same (or the watchdog
// fires). Blocks touch the same index ranges on every rank, so this
// per-block barrier is all the ordering a call needs. A call's second
// barrier (two-shot all-reduce) uses the flags' second half: `row` is 0
// or CMX_MAX_BLOCKS / 2, and jobs have at most that many blocks. The block barrier
// then a system-scope release publishes every thread's writes (release is
// cumulative), and the acquire polls order the reads that follow: no
// separate fences, each of which costs about a microsecond.
__device__ __forceinline__ void barrier(const Peers &P, const Call &C, int row)
{
	__syncthreads();
	const int b = row + blockIdx.x, p = threadIdx.x;
	if (p < C.n) {
		st_release(P.flag(p) + b * CMX_MAX_RANKS + C.me, C.epoch);
		const u32 *f = P.flag(C.me) + b * CMX_MAX_RANKS + p;
		u64 t0 = 0;
		for (unsigned spins = 0; (int)(ld_acquire(f) - C.epoch) < 0; spins++) {
			if ((spins & 1023) == 0) { // the clock is read rarely: it is slow
				u64 t = now_ns();
				if (!t0)
					t0 = t;
				else if (t - t0 > C.timeout_ns) {
					missed(C, p);
					break;
				}
			}
		}
	}
	__syncthreads();
}

// the byte range [lo, hi) of an n-byte buffer that block b of the nb
// working on a job handles, in 16-byte units so vector copies stay aligned
__device__ __forceinline__ void my_range(u64 n, u32 nb, u64 *lo, u64 *hi)
{
	u64 units = (n + 15) / 16, per = (units + nb - 1) / nb;
	*lo = min(n, (u64)blockIdx.x * per * 16);
	*hi = min(n, *lo + per * 16);
}

// Loads that skip L1: the resident kernel reads the program's buffers call
// after call, and an L1 line kept from an earlier call would be stale.
__device__ __forceinline__ uint4 ld_cg16(const void *p)
{
	uint4 v;
	asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
	return v;
}
__device__ __forceinline__ uint2 ld_cg8(const void *p)
{
	uint2 v;
	asm volatile("ld.global.cg.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
	return v;
}
__device__ __forceinline__ char ld_cg1(const char *p)
{
	unsigned short v;
	asm volatile("ld.global.cg.u8 %0, [%1];" : "=h"(v) : "l"(p));
	return (char)v;
}

__device__ __forceinline__ void copy(char *dst, const char *src, u64 lo, u64 hi)
{
	if ((((u64)dst | (u64)src | lo) & 15) == 0) {
		u64 vhi = lo + ((hi - lo) & ~(u64)15);
		for (u64 i = lo + threadIdx.x * 16; i < vhi; i += blockDim.x * 16)
			*(uint4 *)(dst + i) = ld_cg16(src + i);
		lo = vhi;
	}
	for (u64 i = lo + threadIdx.x; i < hi; i += blockDim.x)
		dst[i] = ld_cg1(src + i);
}

// ---- data movement: allgather, bcast, alltoall (blk bytes per rank) ----
enum { MOVE_ALLGATHER, MOVE_BCAST, MOVE_ALLTOALL };

__device__ __forceinline__ void move(const Peers &P, const Call &C, const char *in, char *out, u64 blk, int mode, u32 nb)
{
	u64 lo, hi;
	my_range(blk, nb, &lo, &hi);
	char *mine = P.buf(C.me);
	if (mode == MOVE_ALLTOALL)
		for (int j = 0; j < C.n; j++)
			copy(mine + j * blk, in + j * blk, lo, hi);
	else if (mode == MOVE_ALLGATHER || C.me == C.root)
		copy(mine, in, lo, hi);
	barrier(P, C, 0);
	if (mode == MOVE_BCAST) {
		if (C.me != C.root)
			copy(out, P.buf(C.root), lo, hi);
		return;
	}
	for (int k = 0; k < C.n; k++) {
		int p = (C.me + k) % C.n; // start with different peers on each rank
		copy(out + p * blk, P.buf(p) + (mode == MOVE_ALLTOALL ? C.me * blk : 0), lo, hi);
	}
}

// ---- all-reduce, one shot: every rank reduces all slots in rank order ----
template <typename T> struct Sum {
	__device__ static T f(T a, T b) { return (T)(a + b); } // 8- and 16-bit integers add as int and wrap back, as in C (and MPI)
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
	acc.v = *(const uint4 *)(P.buf(0) + off);
	for (int p = 1; p < n; p++) {
		x.v = *(const uint4 *)(P.buf(p) + off);
#pragma unroll
		for (int k = 0; k < 16 / (int)sizeof(T); k++)
			acc.e[k] = R::f(acc.e[k], x.e[k]);
	}
	return acc.v;
}

// bytes [lo, hi) of every rank's slot reduced in rank order (the same bits
// on every rank) into out, and back into this rank's slot as well when
// `back` (two-shot); lo is a multiple of 16
template <typename T, typename R> __device__ __forceinline__ void reduce_range(const Peers &P, const Call &C, char *out, bool back, u64 lo, u64 hi)
{
	char *mine = P.buf(C.me);
	// 16-byte loads where the output allows (slots always do)
	if (((u64)out & 15) == 0) {
		u64 vhi = lo + ((hi - lo) & ~(u64)15);
		for (u64 i = lo + threadIdx.x * 16; i < vhi; i += blockDim.x * 16) {
			const uint4 v = reduce16<T, R>(P, C.n, i);
			*(uint4 *)(out + i) = v;
			if (back)
				*(uint4 *)(mine + i) = v;
		}
		lo = vhi;
	}
	// out may sit at any byte (ranks need not agree on alignment, so no
	// rank may turn the call down for it): element-wise, or bytes
	const bool aligned = (u64)out % sizeof(T) == 0;
	for (u64 i = lo / sizeof(T) + threadIdx.x; i < hi / sizeof(T); i += blockDim.x) {
		T acc = ((const T *)P.buf(0))[i];
		for (int p = 1; p < C.n; p++)
			acc = R::f(acc, ((const T *)P.buf(p))[i]);
		if (back)
			((T *)mine)[i] = acc;
		if (aligned)
			((T *)out)[i] = acc;
		else
			for (int k = 0; k < (int)sizeof(T); k++)
				out[i * sizeof(T) + k] = ((const char *)&acc)[k];
	}
}

// the part [*a, *b) of rank p's share (`share` bytes each, the last one
// short) that a block's slice [lo, hi) of every share covers
__device__ __forceinline__ void slice(int p, u64 share, u64 lo, u64 hi, u64 bytes, u64 *a, u64 *b)
{
	*a = min(bytes, p * share + lo);
	*b = min(bytes, p * share + hi);
}

// All-reduce through the slots: every rank copies its input into its slot,
// then reduces from every slot in one of two ways.
// - One shot: every rank reduces the whole message (one share, everyone's).
// - Two shots (reduce-scatter, then all-gather): each rank reduces only its
//   share, writes it back into its slot, and after a second barrier reads
//   the other shares from their owners: it reads 2(n-1)/n of the message
//   from its peers instead of n-1. Every element is reduced once, by its
//   owner, so every rank gets the same bits here too.
template <typename T, typename R> __device__ __forceinline__ void allreduce(const Peers &P, const Call &C, const char *in, char *out, u64 count, u32 nb, bool two)
{
	const u64 bytes = count * sizeof(T), shares = two ? C.n : 1;
	const u64 share = (bytes + shares * 16 - 1) / (shares * 16) * 16;
	u64 lo, hi, a, b;
	my_range(share, nb, &lo, &hi); // every block works on every share
	for (int p = 0; p < (int)shares; p++) {
		slice(p, share, lo, hi, bytes, &a, &b);
		copy(P.buf(C.me), in, a, b);
	}
	barrier(P, C, 0);
	slice(two ? C.me : 0, share, lo, hi, bytes, &a, &b);
	reduce_range<T, R>(P, C, out, two, a, b);
	if (!two)
		return;
	barrier(P, C, CMX_MAX_BLOCKS / 2);
	for (int k = 1; k < C.n; k++) {
		const int p = (C.me + k) % C.n;
		slice(p, share, lo, hi, bytes, &a, &b);
		copy(out, P.buf(p), a, b);
	}
}

// ---- all-reduce of small messages: the LL (low-latency) protocol ----
// Each rank stores its input straight into every peer's LL area, 8 bytes
// of data per 16-byte line with the job's number beside each half, and
// the reader polls the lines themselves: no flags, no fences, no round
// trip, one NVLink crossing. The host sends messages of a multiple of 8
// bytes this way; the buffers may sit at any byte (in8/out8). Job numbers
// are never 0, so a line never written cannot pass for one.
__device__ __forceinline__ uint4 ld_volatile16(const void *p)
{
	uint4 v;
	asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
	return v;
}
__device__ __forceinline__ void st_ll(char *p, uint2 d, u32 seq)
{
	asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(d.x), "r"(seq), "r"(d.y), "r"(seq) : "memory");
}
// 8 bytes of the program's buffer at any alignment (past L1, see ld_cg*)
__device__ __forceinline__ uint2 in8(const char *p)
{
	if (((u64)p & 7) == 0)
		return ld_cg8(p);
	union {
		uint2 v;
		char b[8];
	} u;
	for (int k = 0; k < 8; k++)
		u.b[k] = ld_cg1(p + k);
	return u.v;
}
__device__ __forceinline__ void out8(char *p, uint2 v)
{
	if (((u64)p & 7) == 0) {
		*(uint2 *)p = v;
		return;
	}
	for (int k = 0; k < 8; k++)
		p[k] = ((const char *)&v)[k];
}

// A thread's lines, CMX_LL_BATCH at a time (lines base + u * stride below
// end): every load of a batch is issued before any result is used, so a
// batch costs one memory latency, not one per line.

// the batch's lines from rank `from`, polled together until each carries
// the job's number; after a timeout (err bit set) the thread stops waiting
// for this and its later lines
__device__ __forceinline__ void ld_ll(const char *area, u64 base, u64 stride, u64 end, const Call &C, int from, bool *gave_up, uint2 *x)
{
	u32 missing = 0;
#pragma unroll
	for (int u = 0; u < CMX_LL_BATCH; u++)
		if (base + u * stride < end) {
			missing |= 1u << u;
			x[u] = make_uint2(0, 0);
		}
	u64 t0 = 0;
	for (unsigned spins = 0; missing && !*gave_up; spins++) {
		uint4 v[CMX_LL_BATCH];
#pragma unroll
		for (int u = 0; u < CMX_LL_BATCH; u++)
			if (missing >> u & 1)
				v[u] = ld_volatile16(area + (base + u * stride) * 16);
#pragma unroll
		for (int u = 0; u < CMX_LL_BATCH; u++)
			if ((missing >> u & 1) && v[u].y == C.epoch && v[u].w == C.epoch) {
				x[u] = make_uint2(v[u].x, v[u].z);
				missing &= ~(1u << u);
			}
		if (missing && (spins & 1023) == 0) {
			u64 t = now_ns();
			if (!t0)
				t0 = t;
			else if (t - t0 > C.timeout_ns) {
				missed(C, from);
				*gave_up = true;
			}
		}
	}
}

template <typename T, typename R> __device__ __forceinline__ void allreduce_ll(const Peers &P, const Call &C, const char *in, char *out, u64 count, u32 nb)
{
	u64 lo, hi;
	my_range(count * sizeof(T), nb, &lo, &hi);
	const u64 end = hi / 8, stride = blockDim.x;
	bool gave_up = false;
	for (u64 base = lo / 8 + threadIdx.x; base < end; base += CMX_LL_BATCH * stride) {
		uint2 mine[CMX_LL_BATCH], x[CMX_LL_BATCH];
		union {
			uint2 v;
			T e[8 / sizeof(T)];
		} acc[CMX_LL_BATCH], y;
#pragma unroll
		for (int u = 0; u < CMX_LL_BATCH; u++)
			if (base + u * stride < end)
				mine[u] = in8(in + (base + u * stride) * 8);
		for (int p = 0; p < C.n; p++)
			if (p != C.me)
#pragma unroll
				for (int u = 0; u < CMX_LL_BATCH; u++)
					if (base + u * stride < end)
						st_ll(P.ll_area(p) + C.me * CMX_LL_SLOT + (base + u * stride) * 16, mine[u], C.epoch);
		// rank order (0, 1, ..., n-1), as in allreduce: the same bits everywhere
		for (int p = 0; p < C.n; p++) {
			if (p != C.me)
				ld_ll(P.ll_area(C.me) + p * CMX_LL_SLOT, base, stride, end, C, p, &gave_up, x);
#pragma unroll
			for (int u = 0; u < CMX_LL_BATCH; u++) {
				y.v = p == C.me ? mine[u] : x[u];
				if (p == 0)
					acc[u].v = y.v;
				else
#pragma unroll
					for (int k = 0; k < 8 / (int)sizeof(T); k++)
						acc[u].e[k] = R::f(acc[u].e[k], y.e[k]);
			}
		}
#pragma unroll
		for (int u = 0; u < CMX_LL_BATCH; u++)
			if (base + u * stride < end)
				out8(out + (base + u * stride) * 8, acc[u].v);
	}
}

// All-gather and all-to-all, LL (blk a multiple of 8 bytes): each rank
// stores the lines it sends straight into its peers' LL areas, then polls
// its own area for the lines sent to it. A thread's lines are the same
// offsets in every rank's block, and it sends each before it writes that
// offset of out, so in place is safe. A rank reuses a peer's LL area two
// jobs later, having received that peer's lines of the job between, which
// the peer sent only after finishing the job before: every rank sends to
// and receives from every other, so none runs ahead. (A bcast's root would:
// it hears from no one, so bcast goes through the slots.)
__device__ __forceinline__ void move_ll(const Peers &P, const Call &C, const char *in, char *out, u64 blk, int mode, u32 nb)
{
	u64 lo, hi;
	my_range(blk, nb, &lo, &hi);
	const u64 end = hi / 8, stride = blockDim.x;
	bool gave_up = false;
	for (u64 base = lo / 8 + threadIdx.x; base < end; base += CMX_LL_BATCH * stride) {
		uint2 x[CMX_LL_BATCH];
		for (int k = 0; k < C.n; k++) {
			const int p = (C.me + k) % C.n; // this rank's own block first
			if (k == 0 || mode == MOVE_ALLTOALL)
#pragma unroll
				for (int u = 0; u < CMX_LL_BATCH; u++)
					if (base + u * stride < end)
						x[u] = in8(in + (mode == MOVE_ALLTOALL ? p * blk : 0) + (base + u * stride) * 8);
#pragma unroll
			for (int u = 0; u < CMX_LL_BATCH; u++)
				if (base + u * stride < end) {
					if (k)
						st_ll(P.ll_area(p) + C.me * CMX_LL_SLOT + (base + u * stride) * 16, x[u], C.epoch);
					else
						out8(out + C.me * blk + (base + u * stride) * 8, x[u]);
				}
		}
		for (int p = 0; p < C.n; p++) {
			if (p == C.me)
				continue;
			ld_ll(P.ll_area(C.me) + p * CMX_LL_SLOT, base, stride, end, C, p, &gave_up, x);
#pragma unroll
			for (int u = 0; u < CMX_LL_BATCH; u++)
				if (base + u * stride < end)
					out8(out + p * blk + (base + u * stride) * 8, x[u]);
		}
	}
}

// ---- the resident kernel ----

// A job as the host rings it: three 16-byte chunks in one host cache line,
// each led by the job's sequence number. The device reads each chunk in one
// load; when all three carry the new number, the job is whole.
struct BellSlot {
	u32 seq_a, code; // code: JOB_* [| JOB_LL or JOB_TWOSHOT] | (type*3+op or move mode) << 8
	u64 in;
	u32 seq_b, nb;   // blocks that work on the job (the others skip it)
	u64 out;
	u32 seq_c, root;
	u64 n;           // elements (all-reduce) or bytes per rank (moves)
	u32 pad[4];
};
// The doorbell: job s in slot s % CMX_BELL_SLOTS, so that a nonblocking
// call's job is written at its call, whether or not the kernel has taken
// the jobs before it (which may wait for peers still to make those calls).
// The host writes a slot again only once its job is finished.
struct Bell {
	BellSlot slot[CMX_BELL_SLOTS];
	// the next cache line is written by the device
	u32 done;   // the last job finished (jobs finish in order)
	u32 exited; // the launch id of an instance that stopped for want of jobs
	u32 err;    // watchdog: bit p set when rank p did not arrive in time
	u32 err_job; // the first job in which it did
	u32 stopping; // the launch id of an instance deciding whether to stop; 0 once it stays (see take_job)
	u32 pad2[11];
};
struct Job {
	u32 seq, code, nb, root;
	u64 in, out, n;
};
// this rank's own control words, in its workspace after the flags
struct Ctl {
	u64 go;    // the job all blocks see, published by block 0: nb << 32 | seq
	u32 quit;  // the launch id of an instance that is stopping
	u32 count; // blocks other than 0 done with the current job
	Job job;
};
struct Ring {
	char *ws[CMX_MAX_RANKS]; // every rank's workspace, mapped here
	Bell *bell;              // host-mapped
	Ctl *ctl;
	u64 slot, ll_off, timeout_ns, linger_ns;
	int n, me;
	u32 launch, last; // this instance's id; the job finished before it started
};

// job numbers run 1, 2, ..., 0xfffffffe, 1, ...: never 0 (see LL), and
// consecutive ones differ in parity, which picks the slot and LL area
// (cmx_fused_next_seq in fused/plan.c)
__device__ __forceinline__ u32 next_seq(u32 s) { return s >= 0xfffffffeu ? 1 : s + 1; }

// Block 0 waits for the job after `last` at the doorbell and publishes it
// to the other blocks, if it has any; after linger_ns without one it stops
// the instance instead (and says so at the doorbell, so the host launches
// a new one). 0: stop.
//
// The stop is a handshake with the host, which rings a job and then reads
// "exited" (fused/host.c, revive): a job rung within a PCIe round trip of
// the stop could otherwise be missed by both, the kernel having read the
// slot before the job came and the host "exited" before the stop, and wait
// for this rank's next collmux call while its peers wait for it. So the
// kernel announces the stop ("stopping"), fences, and reads the slot once
// more; the host fences between its writes and its read of "stopping".
// Of the two, at least one sees the other's write: a kernel that sees the
// job (even partly written) takes the announcement back and stays, and a
// host that sees the announcement waits the round trip until the kernel
// has decided ("exited", or "stopping" back to 0). The 16-byte volatile
// loads and the host's 4-byte stores are not "morally strong" in PTX's
// model, so this rests, as the polling above does, on the hardware: a
// read of host memory over PCIe does not pass the GPU's earlier posted
// writes, and fence.sc.sys completes them first.
__device__ __forceinline__ int take_job(const Ring &R, u32 last, Job *J)
{
	const u32 want = next_seq(last);
	u64 t0 = now_ns();
	for (unsigned spins = 1;; spins++) {
		// three independent loads in flight at once: one PCIe round trip
		const BellSlot *S = &R.bell->slot[want % CMX_BELL_SLOTS];
		uint4 a = ld_volatile16(&S->seq_a), b = ld_volatile16(&S->seq_b), c = ld_volatile16(&S->seq_c);
		if (a.x == want && b.x == want && c.x == want) {
			// no fence: the job is in these loads, and the program's
			// buffers are read with L1-bypassing loads (ld_cg*)
			J->seq = want, J->code = a.y, J->in = a.z | (u64)a.w << 32;
			J->nb = b.y, J->out = b.z | (u64)b.w << 32;
			J->root = c.y, J->n = c.z | (u64)c.w << 32;
			if (J->nb > 1) { // a job of one block is block 0's alone
				R.ctl->job = *J;
				st_release_gpu64(&R.ctl->go, (u64)J->nb << 32 | want);
			}
			return 1;
		}
		if ((spins % 32 == 0 || !R.linger_ns) && now_ns() - t0 > R.linger_ns) { // the clock is slow to read
			st_release(&R.bell->stopping, R.launch);
			asm volatile("fence.sc.sys;" ::: "memory");
			a = ld_volatile16(&S->seq_a), b = ld_volatile16(&S->seq_b), c = ld_volatile16(&S->seq_c);
			if (a.x == want || b.x == want || c.x == want) { // the host is ringing: stay
				st_release(&R.bell->stopping, 0u);
				t0 = now_ns();
				continue;
			}
			st_release_gpu(&R.ctl->quit, R.launch);
			st_release(&R.bell->exited, R.launch);
			return 0;
		}
	}
}

// The other blocks wait for block 0 to publish a job newer than `last`,
// or to stop. A block outside a job's nb neither works on it nor counts,
// and jobs of one block are not published, so a block may miss jobs
// altogether: it takes whatever is newest, and reads the job itself only
// when it is inside nb, when block 0 cannot publish another before this
// block has counted. (Before the first job, go holds 0, never a job
// number; after a relaunch, the last job published, which is not newer
// than `last`.)
__device__ __forceinline__ int follow_job(const Ring &R, u32 last, Job *J)
{
	for (;;) {
		const u64 g = ld_acquire_gpu64(&R.ctl->go);
		const u32 s = (u32)g, nb = (u32)(g >> 32);
		if (s && (int)(s - last) > 0) { // newer, across the wrap
			if (blockIdx.x < nb) {
				*J = R.ctl->job; // ordered by the acquire
			} else {
				J->seq = s, J->nb = nb, J->code = JOB_ALLREDUCE;
			}
			return 1;
		}
		if (ld_relaxed(&R.ctl->quit) == R.launch)
			return 0;
		__nanosleep(64);
	}
}

// The cases of a switch on type * 3 + op (abi.h's element types; ops sum,
// min, max), each running X(T, OP).
#define OP_CASES(X, t, T, S, MI, MA)     \
	case 3 * t: X(T, S); break;      \
	case 3 * t + 1: X(T, MI); break; \
	case 3 * t + 2: X(T, MA); break;
#define PLAIN(X, t, T) OP_CASES(X, t, T, Sum<T>, Min<T>, Max<T>)
#define HALF(X, t, T) OP_CASES(X, t, T, Half<Sum>, Half<Min>, Half<Max>)
#define AR_TYPE(t, T, how) how(AR, t, T)
#define RL_TYPE(t, T, how) how(RL, t, T)

#define AR(T, OP) (ll ? allreduce_ll<T, OP>(P, C, in, out, J.n, J.nb) : allreduce<T, OP>(P, C, in, out, J.n, J.nb, two))

// one job, by one of the J.nb blocks working on it
__device__ __forceinline__ void run(const Ring &R, const Job &J)
{
	const Peers P = {R.ws, (J.seq & 1) * R.slot, 2 * R.slot, R.ll_off + (J.seq & 1) * CMX_MAX_RANKS * CMX_LL_SLOT};
	Call C = {R.n, R.me, (int)J.root, J.seq, R.timeout_ns, &R.bell->err};
	const char *in = (const char *)J.in;
	char *out = (char *)J.out;
	const bool ll = J.code & JOB_LL, two = J.code & JOB_TWOSHOT;
	if ((J.code & 0xf) == JOB_MOVE) {
		if (ll)
			move_ll(P, C, in, out, J.n, J.code >> 8, J.nb);
		else
			move(P, C, in, out, J.n, J.code >> 8, J.nb);
		return;
	}
	switch (J.code >> 8) {
		CMX_ELEMENT_TYPES(AR_TYPE)
	}
}

// ---- MPI_Reduce_local on device memory: inout[i] = in[i] op inout[i] ----
// (fused/host.c sends only what gives the MPI's own answer this way)
template <typename T, typename OP> __device__ __forceinline__ void reduce_local(const T *in, T *inout, u64 n)
{
	for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
		inout[i] = OP::f(in[i], inout[i]);
}
#define RL(T, OP) reduce_local<T, OP>((const T *)in, (T *)inout, n)

extern "C" __global__ void cmx_reduce_local(const void *in, void *inout, u64 n, u32 code)
{
	switch (code) {
		CMX_ELEMENT_TYPES(RL_TYPE)
	}
}

// 512 threads a block (capi/fused.c launches it so): registers are capped to
// fit. Every function is inlined into it (__forceinline__): left to itself,
// the compiler called some through the stack once the two-shot all-reduce
// grew the kernel, spilling tens of KB, and the LL all-reduce took 1.2-1.9x
// as long (docs/results/gpu-2026-11-30-twoshot).
extern "C" __global__ void __launch_bounds__(512) cmx_ring(const __grid_constant__ Ring R)
{
	__shared__ Job Js;
	__shared__ int live;
	for (u32 last = R.last;;) {
		if (threadIdx.x == 0)
			live = blockIdx.x == 0 ? take_job(R, last, &Js) : follow_job(R, last, &Js);
		__syncthreads();
		if (!live)
			return;
		const Job J = Js; // thread 0 may overwrite Js once this job is done
		last = J.seq;
		if (blockIdx.x >= J.nb) { // not in this job (an exit takes every block)
			__syncthreads(); // every thread has read Js
			continue;
		}
		if ((J.code & 0xf) != JOB_EXIT)
			run(R, J);
		__syncthreads();
		if (threadIdx.x == 0) {
			// block 0 tells the host once the job's other blocks have
			// counted, and before it may stop the instance: the host reads
			// "done" before it believes "exited". The output is local, so
			// the blocks release it at GPU scope, and block 0's
			// system-scope release of "done" carries it on.
			if (blockIdx.x) {
				asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(&R.ctl->count) : "memory");
			} else {
				if (J.nb > 1) { // a job of one block has nothing to count
					while (ld_acquire_gpu(&R.ctl->count) != J.nb - 1)
						;
					R.ctl->count = 0;
				}
				st_release(&R.bell->done, J.seq);
			}
		}
		if ((J.code & 0xf) == JOB_EXIT)
			return;
	}
}
