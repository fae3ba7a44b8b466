
// ---- fused computation + collective operations (fused/ops.c) ----
//
// Compiled with kernels.cu as one module (fused.Source is the two files
// one after the other), whose helpers these use. Unlike the resident
// collective kernel, an operation is ordinary kernels launched on the
// program's stream: the first computes this rank's part tile by tile and,
// as each tile is done, writes it straight into every peer's ops
// workspace (CUDA IPC, over NVLink) and raises a flag there, so the
// transfer of one tile hides under the computation of the others; the
// second waits for each tile's flags, which the peers raised long before
// unless they lag, and combines. No host thread takes part in a call.
//
// Ops workspace of each rank (OPS_* in fused/ops.c): two rows of flags
// (alternating calls) of CMX_OPS_TILES x CMX_MAX_RANKS 64-bit words, then
// two data halves (alternating calls). A flag holds the call's number in
// its low half and a digest of the call's shape in its high half, so a
// rank that called with another shape is caught at the first tile.
//
// Consecutive calls on one communicator are ordered on the GPU (ops.c
// makes a call on another stream wait for the last one), which is what
// makes two halves enough: a peer writes call s+2 into the half of call s
// only after its kernel s+1 finished, which needed this rank's flags of
// s+1, which this rank raises only once its kernel s, the reader of that
// half, is done.
//
// A refused call keeps this too: cmx_ops_refuse, which a rank queues in
// place of a call it refuses, raises its flags and then waits for every
// rank's flag of tile 0 of the call (whatever its shape: the kernels of
// every operation raise it, refused or not; the GEMV's nccl form, which
// raises none, is never refused by one rank alone, as its calls are agreed
// in fused/ops.c's admit()), so that a call every rank refuses still holds
// each rank until every rank's kernel before it is done.

// CMX_OPS_TILES, CMX_OPS_THREADS, CMX_OPS_RW and CMX_OPS_EMB_TABLES are in abi.h.

CMX_LD(ld_acquire64, u64, "ld.acquire.sys.global.u64", "l")
CMX_ST(st_release64, u64, "st.release.sys.global.u64", "l")

struct OpsCall {
	char *ws[CMX_MAX_RANKS]; // every rank's ops workspace, mapped here
	u64 flags, data;         // offsets of this call's row of flags and data half
	int n, me;
	u32 seq, shape; // the call's number and its shape's digest, in every flag
	u64 timeout_ns;
	u32 *err; // host-mapped: bit p, rank p did not arrive in time; bit 16, shapes differ
	// device memory, set with err: a waiting block polls this one, as a
	// read of host-mapped memory crosses PCIe and concurrent ones queue
	// (one each per block made a 16-tile sum wait 9 us, a 264-block one
	// 200 us)
	u32 *gone;
	// 1: cmx_ops_await, the kernel before this one, made this kernel's
	// raises and waits (ranks that share a GPU through MPS, fused/ops.c);
	// its waits then only ask whether that one gave up
	u32 split;
};

__device__ __forceinline__ u64 *ops_flag(const OpsCall &O, int p, u32 tile, int src)
{
	return (u64 *)(O.ws[p] + O.flags) + (u64)tile * CMX_MAX_RANKS + src;
}

// Raises this block's flag for tile t in every rank's workspace, once
// every thread's pushes of the tile are written (the barrier, then a
// system-scope release from one thread per peer, as barrier() does).
__device__ __forceinline__ void ops_raise(const OpsCall &O, u32 t)
{
	__syncthreads();
	if ((int)threadIdx.x < O.n)
		st_release64(ops_flag(O, threadIdx.x, t, O.me), (u64)O.shape << 32 | O.seq);
}

// Lets the kernel queued after this one start once every block of this
// one has (fused/ops.c queues the GEMV's sum so, cmx_cuda_launch_early):
// the sum's blocks then take their places and wait on the flags while the
// last GEMV blocks finish, instead of launching after them. The sum reads
// nothing of this kernel's that its flags do not guard, and writes only y,
// which may not overlap A or x (collmux.h) because of this. The GEMV
// itself stays a plain launch, after the sum before it: the two data
// halves the calls alternate between rely on that.
__device__ __forceinline__ void ops_let_next_start()
{
#if __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// The other end, in the kernel launched early: its end waits for the whole
// kernel before it and that kernel's memory, as PTX asks of a dependent
// grid, so that whatever follows it in the stream (the next call, an
// event the program waits for) follows both; on a block that gave up on a
// peer, the GEMV may still be reading A and x. Nothing where the kernel
// was launched in plain stream order.
__device__ __forceinline__ void ops_after_previous()
{
#if __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Polls rank p's flag of tile t here until it holds this call's number;
// false, with the reason in err, when p did not raise it within the
// timeout or called with another shape, or when another block gave up.
__device__ __forceinline__ bool ops_poll(const OpsCall &O, u32 t, int p)
{
	const u64 *f = ops_flag(O, O.me, t, p);
	u64 t0 = 0, v;
	for (unsigned spins = 0; (u32)(v = ld_acquire64(f)) != O.seq; spins++) {
		if ((spins & 1023) == 0) {
			if (ld_relaxed(O.gone)) // another block gave up on a peer: so does this one, at once
				return false;
			u64 now = now_ns();
			if (!t0)
				t0 = now;
			else if (now - t0 > O.timeout_ns) {
				atomicOr(O.gone, 1u);
				if (!(atomicOr(O.err, 1u << p) & (1u << p)))
					printf("collmux: a fused operation on rank %d: rank %d did not arrive within COLLMUX_TIMEOUT; its "
					       "result is not valid\n",
					       O.me, p);
				return false;
			}
		}
	}
	if ((u32)(v >> 32) != O.shape) {
		atomicOr(O.gone, 1u);
		if (!(atomicOr(O.err, 1u << 16) & (1u << 16)))
			printf("collmux: a fused operation on rank %d: rank %d called it with another shape or type; its result is "
			       "not valid\n",
			       O.me, p);
		return false;
	}
	return true;
}

// Waits until every rank raised its flags for tiles [t, t + count) here,
// all polled at once, a thread a flag (the sum of a GEMV cut into
// segments waits for every segment's), rather than one after another with
// three barriers each; false (and the reason in err) when one did not
// within the timeout or called with another shape: the block then leaves
// its tile as it is.
__device__ __forceinline__ bool ops_wait(const OpsCall &O, u32 t, u32 count = 1)
{
	if (O.split) // the same answer in every thread: the await kernel is done
		return !ld_relaxed(O.gone);
	__shared__ int bad;
	if (threadIdx.x == 0)
		bad = 0;
	__syncthreads();
	for (u32 i = threadIdx.x; i < count * (u32)O.n; i += blockDim.x)
		if (!ops_poll(O, t + i / O.n, i % O.n))
			bad = 1;
	__syncthreads();
	const bool ok = !bad;
	__syncthreads(); // every thread has read it before the next tile's wait resets it
	return ok;
}

// The raises and waits of the kernel after it, for ranks that share a GPU
// through MPS: one block raises this rank's flags of tiles [first, first +
// tiles) where `raise` says the next kernel would, then waits for every
// rank's. A kernel whose blocks all wait holds a place on many
// multiprocessors while another rank's kernel that it waits for needs
// room on the same GPU (a fused GEMV block takes a whole multiprocessor's
// registers); this one holds one block's. The next kernel (O.split)
// then runs without waiting, unless this one gave up.
struct Await {
	u32 first, tiles, raise;
};
extern "C" __global__ void __launch_bounds__(CMX_OPS_THREADS) cmx_ops_await(const __grid_constant__ OpsCall O, const __grid_constant__ Await A)
{
	if (A.raise)
		for (u32 t = A.first; t < A.first + A.tiles; t++)
			ops_raise(O, t);
	ops_wait(O, A.first, A.tiles);
}

// Eight consecutive elements as floats. Eight is 16 bytes of a 16-bit
// type and 32 of fp32: one or two vector loads.
template <typename T> struct Eight {
	uint4 w[sizeof(T) / 2];
};
__device__ __forceinline__ void unpack(const Eight<float> &e, float *v)
{
#pragma unroll
	for (int i = 0; i < 8; i++)
		v[i] = __uint_as_float(((const u32 *)e.w)[i]);
}
template <typename H> __device__ __forceinline__ void unpack(const Eight<H> &e, float *v)
{
	const u32 *w = (const u32 *)e.w;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		H lo, hi;
		lo.v = (unsigned short)(w[i] & 0xffff), hi.v = (unsigned short)(w[i] >> 16);
		v[2 * i] = tof(lo), v[2 * i + 1] = tof(hi);
	}
}
__device__ __forceinline__ float tof(float f) { return f; }
__device__ __forceinline__ float fromf(float f, float) { return f; }

// Eight elements of the program's read-only memory from p on (0 past
// `left`); vec: p is 16-byte aligned and all eight are there.
template <typename T> __device__ __forceinline__ void ld8(const T *p, bool vec, int left, float *v)
{
	if (vec) {
		Eight<T> e;
#pragma unroll
		for (int i = 0; i < (int)(sizeof(T) / 2); i++)
			e.w[i] = __ldg((const uint4 *)p + i);
		unpack(e, v);
	} else {
#pragma unroll
		for (int i = 0; i < 8; i++)
			v[i] = i < left ? tof(p[i]) : 0.f;
	}
}

// ---- GEMV + all-reduce: y = sum over ranks r of A_r x_r ----
//
// A_r: m x k_r (row-major, lda), x_r: batch x k_r (ldx), y: batch x m
// (ldy); k_r may differ between ranks. A tile is 8 warps x rw rows of
// this rank's partial product A_r x_r, each row a dot product per batch
// column, accumulated in fp32; the partial goes, in fp32, to every rank's
// data half at [me][b][row]. Every rank then sums the n partials of a row
// in rank order and rounds once: the same bits on every rank.
struct Gemv {
	const void *a, *x;
	void *y;
	long long lda, ldx, ldy;
	int m, k, batch, rw;
	bool vec, xvec; // a (x) and its rows 16-byte aligned
	int segs;       // gemv_tc: k is cut into this many segments, each a tile's unit of its own
};

// One block a tile, which it computes and pushes to every rank, raising
// its flag there; it never waits (ops_sum, the next kernel, does). The
// loop runs free, with no barrier: each lane reads eight elements of
// each of its warp's rows per step (a warp, 512 contiguous bytes of 16-bit
// rows), and the matching eight of x, which every warp of the SM reads
// alike, from L1. A group of U steps' loads of A is issued, raw, before
// any of them is used, so that U x rw loads per lane are in flight.
template <typename T> __device__ __forceinline__ void ld_raw(const T *p, bool vec, int left, Eight<T> &e)
{
	if (vec) {
#pragma unroll
		for (int i = 0; i < (int)(sizeof(T) / 2); i++)
			e.w[i] = __ldg((const uint4 *)p + i);
	} else {
		T *v = (T *)e.w;
#pragma unroll
		for (int i = 0; i < 8; i++)
			v[i] = i < left ? p[i] : fromf(0.f, T());
	}
}

template <typename T, int NB> __device__ __forceinline__ void gemv_ar(const OpsCall &O, const Gemv &G)
{
	const int U = sizeof(T) == 4 ? 2 : 4; // steps a group: 16 (fp32: 32) registers of A a row
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int rows = 8 * G.rw;
	const u32 tiles = (u32)((G.m + rows - 1) / rows);
	const T *A = (const T *)G.a, *X = (const T *)G.x;
	const u64 mb = (u64)G.m * G.batch; // one rank's partial, in floats
	ops_let_next_start();
	for (u32 t = blockIdx.x; t < tiles; t += gridDim.x) {
		const int row0 = t * rows + warp * G.rw;
		float acc[CMX_OPS_RW][NB];
#pragma unroll
		for (int r = 0; r < CMX_OPS_RW; r++)
#pragma unroll
			for (int b = 0; b < NB; b++)
				acc[r][b] = 0.f;
		const T *rowp[CMX_OPS_RW];
#pragma unroll
		for (int r = 0; r < CMX_OPS_RW; r++) // rows past the warp's or the matrix's: no loads
			rowp[r] = r < G.rw && row0 + r < G.m ? A + (long long)(row0 + r) * G.lda : NULL;
		for (int j0 = lane * 8; j0 < G.k; j0 += 256 * U) {
			Eight<T> raw[CMX_OPS_RW][U];
#pragma unroll
			for (int u = 0; u < U; u++)
#pragma unroll
				for (int r = 0; r < CMX_OPS_RW; r++) {
					const int j = j0 + 256 * u;
					if (rowp[r] && j < G.k)
						ld_raw(rowp[r] + j, G.vec && j + 8 <= G.k, G.k - j, raw[r][u]);
					else
#pragma unroll
						for (int i = 0; i < (int)(sizeof(T) / 2); i++)
							raw[r][u].w[i] = make_uint4(0, 0, 0, 0);
				}
#pragma unroll
			for (int u = 0; u < U; u++) {
				const int j = j0 + 256 * u;
				if (j >= G.k)
					break;
#pragma unroll
				for (int b = 0; b < NB; b++) {
					if (b >= G.batch)
						break;
					float xv[8];
					ld8(X + (long long)b * G.ldx + j, G.xvec && j + 8 <= G.k, G.k - j, xv);
#pragma unroll
					for (int r = 0; r < CMX_OPS_RW; r++) {
						if (r >= G.rw) // the same branch in every thread
							break;
						float av[8];
						unpack(raw[r][u], av);
#pragma unroll
						for (int i = 0; i < 8; i++)
							acc[r][b] = fmaf(av[i], xv[i], acc[r][b]);
					}
				}
			}
		}
		// each row's sums across the warp; lane (r * NB + b) % 32 sends it
#pragma unroll
		for (int r = 0; r < CMX_OPS_RW; r++)
#pragma unroll
			for (int b = 0; b < NB; b++) {
				float v = acc[r][b];
#pragma unroll
				for (int s = 16; s > 0; s >>= 1)
					v += __shfl_xor_sync(0xffffffffu, v, s);
				const int row = row0 + r;
				if (lane == ((r * NB + b) & 31) && r < G.rw && row < G.m && b < G.batch)
					for (int p = 0; p < O.n; p++)
						((float *)(O.ws[p] + O.data))[O.me * mb + (u64)b * G.m + row] = v;
			}
		ops_raise(O, t);
	}
}

// The same product on tensor cores, for 16-bit types (sm_80 on): a unit is
// a tile of 32 rows and one of G.segs segments of k (so that there are
// enough units to keep every multiprocessor busy to the end, whatever m):
// two groups of 16 rows, each split by k among four warps, which run
// mma.m16n8k16 (one per 8 batch columns, fp32 accumulators) over their
// quarter and add up in shared memory, in a fixed order. Its partial goes
// to [me][segment][b][row] of every rank's data half, and its flag is
// that of "tile" t * segs + segment; ops_sum adds the segments too. A lane loads 16
// bytes of each of its two rows (g and g + 8 of the group) and of x's
// row g, the same eight columns of all three: a k-sum does not care which
// of its slots holds which column, so long as A and x put a column in the
// same one, and the mma's fragment layout then needs no shuffle. The
// kernel streams A as the loop above does, with the products on tensor
// cores: at batch 16 the CUDA-core loop is compute-bound.
#define CMX_TC_U 4     // 32-column steps a warp loads before using them

// d += a b on the tensor cores, for T = bf16 or f16 (ty, its PTX name)
#if __CUDA_ARCH__ >= 800
#define CMX_MMA16816(ty)                                                                                                      \
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." ty "." ty ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \
		     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                                             \
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
#else
#define CMX_MMA16816(ty)
#endif
template <typename T> __device__ __forceinline__ void mma16816(float *d, const u32 *a, u32 b0, u32 b1);
template <> __device__ __forceinline__ void mma16816<bf16>(float *d, const u32 *a, u32 b0, u32 b1) { CMX_MMA16816("bf16"); }
template <> __device__ __forceinline__ void mma16816<f16>(float *d, const u32 *a, u32 b0, u32 b1) { CMX_MMA16816("f16"); }

// 16 bytes of a matrix read once: past L1, and with L2 fetching the
// whole 256-byte block around it from memory, the rest of which this and
// the neighbouring lanes read next. A GEMV streams its matrix; on one
// H200 this made the kernel alone 7-13 % faster from 64 MiB up (8192 x
// 8192 bf16: 38.5 -> 34.8 us, cuBLAS 35.5), and 10 % slower where the
// whole matrix stays in L2 between calls (4096 x 4096), which a real
// model's layers, each read once a step, do not
// (docs/results/gpu-2026-12-01-session18).
__device__ __forceinline__ uint4 ld_stream16(const void *p)
{
#if __CUDA_ARCH__ >= 800
	uint4 v;
	asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
		     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
		     : "l"(p));
	return v;
#else
	return __ldg((const uint4 *)p);
#endif
}

// 8 elements (16 bytes) of row p from column j on, zero past `left`
// columns or where p is NULL; STREAM: p is the matrix (ld_stream16), else
// x, which every block reads
template <bool STREAM, typename T> __device__ __forceinline__ uint4 ld16(const T *p, bool vec, int left)
{
	if (!p || left <= 0)
		return make_uint4(0, 0, 0, 0);
	if (vec && left >= 8)
		return STREAM ? ld_stream16(p) : __ldg((const uint4 *)p);
	union {
		uint4 v;
		unsigned short h[8];
	} u;
#pragma unroll
	for (int i = 0; i < 8; i++)
		u.h[i] = i < left ? ((const unsigned short *)p)[i] : 0;
	return u.v;
}

// CMX_TC_U chunks of 32 columns from c0 on into d: a lane's 16 bytes of
// its two rows and of x's rows, loaded all before any is used. FULL: the
// unit's rows and chunks are all there and aligned, so no load is checked.
// The checks of every load (a NULL row, columns left, alignment) cost the
// kernel alone 3-5 % at 16384 x 16384 and at batch 16, and the whole call
// at one rank 12-17 % at 4096 x 4096 (where the matrix stays in L2 and
// instructions count) (docs/results/gpu-2026-12-01-session19).
template <bool FULL, typename T, int NT>
__device__ __forceinline__ void tc_chunks(float (&d)[NT][4], const T *(&ar)[2], const T *(&xr)[NT], int c0, int c_hi, int t4,
					  const Gemv &G)
{
	uint4 a[CMX_TC_U][2], x[CMX_TC_U][NT];
#pragma unroll
	for (int u = 0; u < CMX_TC_U; u++) {
		const int j = (c0 + u) * 32 + 8 * t4, left = FULL || c0 + u < c_hi ? G.k - j : 0;
#pragma unroll
		for (int h = 0; h < 2; h++)
			a[u][h] = FULL ? ld_stream16(ar[h] + j) : ld16<true>(ar[h] ? ar[h] + j : (const T *)NULL, G.vec, left);
#pragma unroll
		for (int n = 0; n < NT; n++)
			x[u][n] = FULL ? (xr[n] ? __ldg((const uint4 *)(xr[n] + j)) : make_uint4(0, 0, 0, 0))
				       : ld16<false>(xr[n] ? xr[n] + j : (const T *)NULL, G.xvec, left);
	}
#pragma unroll
	for (int u = 0; u < CMX_TC_U; u++)
#pragma unroll
		for (int half = 0; half < 2; half++) { // columns 0-3 then 4-7 of the lane's eight
			// rows g, g + 8 of columns 2 t4 (+ 1), then of 2 t4 + 8 (+ 9), in the mma's words
			const u32 frag[4] = {half ? a[u][0].z : a[u][0].x, half ? a[u][1].z : a[u][1].x, half ? a[u][0].w : a[u][0].y,
					     half ? a[u][1].w : a[u][1].y};
#pragma unroll
			for (int n = 0; n < NT; n++)
				mma16816<T>(d[n], frag, half ? x[u][n].z : x[u][n].x, half ? x[u][n].w : x[u][n].y);
		}
}

template <typename T, int NT> __device__ __forceinline__ void gemv_tc(const OpsCall &O, const Gemv &G)
{
	__shared__ float red[8][16][8 * NT]; // [warp][row of its group][batch column]
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
	const u32 units = (u32)((G.m + CMX_OPS_TC_ROWS - 1) / CMX_OPS_TC_ROWS) * G.segs;
	const T *A = (const T *)G.a, *X = (const T *)G.x;
	const u64 mb = (u64)G.m * G.batch;
	const int chunks = (G.k + 31) / 32, q = warp & 3; // 32 columns a chunk; this warp's quarter of a segment's
	const T *xr[NT]; // x's rows g (and g + 8) for this lane, NULL past the batch
#pragma unroll
	for (int n = 0; n < NT; n++)
		xr[n] = g + 8 * n < G.batch ? X + (long long)(g + 8 * n) * G.ldx : NULL;
	ops_let_next_start();
	for (u32 unit = blockIdx.x; unit < units; unit += gridDim.x) {
		const u32 t = unit / G.segs, seg = unit % G.segs;
		const int s_lo = (int)((long long)chunks * seg / G.segs), s_hi = (int)((long long)chunks * (seg + 1) / G.segs);
		const int c_lo = s_lo + (s_hi - s_lo) * q / 4, c_hi = s_lo + (s_hi - s_lo) * (q + 1) / 4;
		const int r0 = t * CMX_OPS_TC_ROWS + (warp >> 2) * 16 + g;
		const T *ar[2] = {r0 < G.m ? A + (long long)r0 * G.lda : NULL, r0 + 8 < G.m ? A + (long long)(r0 + 8) * G.lda : NULL};
		float d[NT][4];
#pragma unroll
		for (int n = 0; n < NT; n++)
			d[n][0] = d[n][1] = d[n][2] = d[n][3] = 0.f;
		int c0 = c_lo;
		// the whole tile's rows, aligned, and this warp's chunks all within k
		if (G.vec && G.xvec && (int)(t + 1) * CMX_OPS_TC_ROWS <= G.m && c_hi * 32 <= G.k)
			for (; c0 + CMX_TC_U <= c_hi; c0 += CMX_TC_U)
				tc_chunks<true>(d, ar, xr, c0, c_hi, t4, G);
		for (; c0 < c_hi; c0 += CMX_TC_U)
			tc_chunks<false>(d, ar, xr, c0, c_hi, t4, G);
		// d[n]: rows g, g + 8 of the group; batch columns 8n + 2 t4, + 1
#pragma unroll
		for (int n = 0; n < NT; n++) {
			red[warp][g][8 * n + 2 * t4] = d[n][0], red[warp][g][8 * n + 2 * t4 + 1] = d[n][1];
			red[warp][g + 8][8 * n + 2 * t4] = d[n][2], red[warp][g + 8][8 * n + 2 * t4 + 1] = d[n][3];
		}
		__syncthreads();
		for (int i = threadIdx.x; i < CMX_OPS_TC_ROWS * G.batch; i += blockDim.x) {
			const int rl = i % CMX_OPS_TC_ROWS, b = i / CMX_OPS_TC_ROWS, w0 = (rl / 16) * 4, row = t * CMX_OPS_TC_ROWS + rl;
			if (row >= G.m)
				continue;
			const float v = ((red[w0][rl % 16][b] + red[w0 + 1][rl % 16][b]) + red[w0 + 2][rl % 16][b]) + red[w0 + 3][rl % 16][b];
			for (int p = 0; p < O.n; p++)
				((float *)(O.ws[p] + O.data))[((u64)O.me * G.segs + seg) * mb + (u64)b * G.m + row] = v;
		}
		ops_raise(O, unit); // its barrier: every thread has read red before the next unit writes it
	}
}

// ---- the sum: every rank's partial, in rank order, rounded once ----
//
// A kernel of its own after the one that made the partials, so that no
// block ever waits for a peer's block that cannot be scheduled: a block
// here waits only for flags that the peers' earlier kernels raise (push)
// or that blocks of this kernel, all resident at once, raise first
// (pull). Push: the fused GEMV wrote rank p's partial into every rank's
// data half at [p][b][row], raising a flag per tile (and segment) of its
// own. Pull: cuBLAS wrote this rank's partial into its own data half at
// [b][row] in the kernel before; each block announces its tiles, then
// reads every rank's over NVLink. A block here sums a tile of `rows` rows,
// whose flags are `flags` consecutive ones (pull: its own one): push, as
// many of the GEMV's tiles as give every thread an element to add, so
// that the waits, three barriers and system-scope polls each, are few
// (fused/ops.c).
struct SumTo {
	void *y;
	long long ldy;
	int m, batch, rows;
	bool pull;
	int segs;        // push: the segments of k of each rank's partial (gemv_tc's; 1 otherwise)
	u32 flags, units; // the flags of a tile, from t * flags on; the flags in all
};
template <typename T> __device__ __forceinline__ void ops_sum(const OpsCall &O, const SumTo &S)
{
	const u32 tiles = (u32)((S.m + S.rows - 1) / S.rows);
	const u64 mb = (u64)S.m * S.batch;
	if (S.pull && !O.split)
		for (u32 t = blockIdx.x; t < tiles; t += gridDim.x)
			ops_raise(O, t);
	for (u32 t = blockIdx.x; t < tiles; t += gridDim.x) {
		const u32 first = t * S.flags;
		if (!ops_wait(O, first, min(S.flags, S.units - first)))
			continue;
		for (int i = threadIdx.x; i < S.rows * S.batch; i += blockDim.x) {
			const int row = t * S.rows + i % S.rows, b = i / S.rows;
			if (row >= S.m)
				continue;
			float s = 0.f;
			for (int p = 0; p < O.n; p++)
				if (S.pull)
					s += __ldcg((const float *)(O.ws[p] + O.data) + (u64)b * S.m + row);
				else
					for (int g = 0; g < S.segs; g++)
						s += __ldcg((const float *)(O.ws[O.me] + O.data) + ((u64)p * S.segs + g) * mb + (u64)b * S.m + row);
			((T *)S.y)[(long long)b * S.ldy + row] = fromf(s, T());
		}
	}
	ops_after_previous();
}
extern "C" __global__ void __launch_bounds__(CMX_OPS_THREADS) cmx_ops_sum_f32(const __grid_constant__ OpsCall O, const __grid_constant__ SumTo S) { ops_sum<float>(O, S); }
extern "C" __global__ void __launch_bounds__(CMX_OPS_THREADS) cmx_ops_sum_f16(const __grid_constant__ OpsCall O, const __grid_constant__ SumTo S) { ops_sum<f16>(O, S); }
extern "C" __global__ void __launch_bounds__(CMX_OPS_THREADS) cmx_ops_sum_bf16(const __grid_constant__ OpsCall O, const __grid_constant__ SumTo S) { ops_sum<bf16>(O, S); }

#define CMX_GEMV(name, T, NB) \
	extern "C" __global__ void __launch_bounds__(CMX_OPS_THREADS) name(const __grid_constant__ OpsCall O, const __grid_constant__ Gemv G) { gemv_ar<T, NB>(O, G); }
#define CMX_GEMV_NB(T, t) \
	CMX_GEMV(cmx_gemv_ar_##t##_1, T, 1) CMX_GEMV(cmx_gemv_ar_##t##_2, T, 2) CMX_GEMV(cmx_gemv_ar_##t##_4, T, 4) \
	CMX_GEMV(cmx_gemv_ar_##t##_8, T, 8) CMX_GEMV(cmx_gemv_ar_##t##_16, T, 16)
CMX_GEMV_NB(float, f32)
CMX_GEMV_NB(f16, f16)
CMX_GEMV_NB(bf16, bf16)
// The batch-8 kernel is held to 64 registers, four blocks a multiprocessor
// (76 bytes spill): it then streams A as fast as cuBLAS's GEMV in one
// wave (docs/results/gpu-2026-12-01-session19, run 7; plan.c sizes its
// segments for it). The batch-16 one needs its 114.
#define CMX_GEMV_TC(name, T, NT, BLOCKS) \
	extern "C" __global__ void __launch_bounds__(CMX_OPS_THREADS, BLOCKS) name(const __grid_constant__ OpsCall O, const __grid_constant__ Gemv G) { gemv_tc<T, NT>(O, G); }
CMX_GEMV_TC(cmx_gemv_tc_f16_8, f16, 1, 4) CMX_GEMV_TC(cmx_gemv_tc_f16_16, f16, 2, 1)
CMX_GEMV_TC(cmx_gemv_tc_bf16_8, bf16, 1, 4) CMX_GEMV_TC(cmx_gemv_tc_bf16_16, bf16, 2, 1)

// ---- embedding pooling + all-to-all (DLRM's model-parallel embeddings) ----
//
// This rank owns `tables` of the job's tables_total (global numbers from
// table_first on), every sample of the global batch looks each of them up
// (bags in CSR: bag (t, s) is indices[offsets[t * batch + s] ...
// offsets[t * batch + s + 1]), rows of table t), and rank q owns the samples
// from batch * q / n on. A warp pools one bag in fp32 (sum, or mean over
// its length) and writes it, rounded once, where its owner's output wants
// it, [sample][global table][dim]: straight into the output when the
// sample is this rank's, else into the owner's data half, laid out as
// that output. The next kernel (emb_land) tells the peers and copies what
// they sent into the output, around the columns this rank wrote itself.
struct Emb {
	const void *w; // rows x dim, the tables one after the other
	const long long *offsets, *indices;
	void *out;
	long long batch;
	int dim, tables, table_first, tables_total, mean;
	bool vec; // dim a multiple of 4, w and out aligned to four elements: vector loads and stores
	long long rows[CMX_OPS_EMB_TABLES + 1]; // table t: rows[t] ... rows[t + 1] - 1 of w
};

__device__ __forceinline__ long long emb_first(long long batch, int n, int q) { return batch * q / n; }

// Four consecutive elements in one access: 16 bytes of fp32, 8 of a
// 16-bit type (a warp, 512 or 256 contiguous bytes of a row).
template <typename T> struct Four {
	typedef uint2 v;
};
template <> struct Four<float> {
	typedef uint4 v;
};

template <typename T> __device__ __forceinline__ void emb_pool(const OpsCall &O, const Emb &E)
{
	typedef typename Four<T>::v V;
	const int lane = threadIdx.x & 31;
	const long long bag = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	if (bag >= (long long)E.tables * E.batch)
		return;
	const int t = (int)(bag / E.batch);
	const long long s = bag % E.batch;
	int q = (int)(s * O.n / E.batch); // the sample's owner: the q with first(q) <= s < first(q + 1)
	while (q + 1 < O.n && emb_first(E.batch, O.n, q + 1) <= s)
		q++;
	while (q > 0 && emb_first(E.batch, O.n, q) > s)
		q--;
	const long long lo = E.offsets[bag], hi = E.offsets[bag + 1], nrows = E.rows[t + 1] - E.rows[t];
	const T *w = (const T *)E.w + E.rows[t] * E.dim;
	T *dst = (T *)(q == O.me ? (char *)E.out : O.ws[q] + O.data) +
		 ((s - emb_first(E.batch, O.n, q)) * E.tables_total + E.table_first + t) * E.dim;
	for (int d0 = 0; d0 < E.dim; d0 += 32 * 4) { // four elements a lane per pass
		const int d = d0 + lane * 4;
		float acc[4] = {0.f, 0.f, 0.f, 0.f};
		union {
			V v;
			T e[4];
		} u;
		for (long long i = lo; i < hi; i++) {
			const long long r = __ldg(E.indices + i);
			if (r < 0 || r >= nrows) { // as EmbeddingBag refuses it; reported, the row left out
				if (lane == 0 && d0 == 0 && !(atomicOr(O.err, 1u << 17) & (1u << 17)))
					printf("collmux: collmux_embedding_alltoall on rank %d: index %lld out of range for table %d (%lld rows)\n",
					       O.me, r, E.table_first + t, nrows);
				continue;
			}
			if (E.vec) {
				if (d < E.dim) {
					u.v = __ldg((const V *)(w + r * E.dim + d));
#pragma unroll
					for (int k = 0; k < 4; k++)
						acc[k] += tof(u.e[k]);
				}
			} else
#pragma unroll
				for (int k = 0; k < 4; k++)
					if (d + k < E.dim)
						acc[k] += tof(w[r * E.dim + d + k]);
		}
		const float scale = E.mean && hi > lo ? (float)(hi - lo) : 1.f;
#pragma unroll
		for (int k = 0; k < 4; k++)
			u.e[k] = fromf(E.mean ? acc[k] / scale : acc[k], T());
		if (E.vec) {
			if (d < E.dim)
				*(V *)(dst + d) = u.v;
		} else
#pragma unroll
			for (int k = 0; k < 4; k++)
				if (d + k < E.dim)
					dst[d + k] = u.e[k];
	}
}

// The last kernel of an operation whose kernels before it on the stream
// pushed this rank's results into the peers' data halves (the embedding
// pooling, the GEMMs of the GEMM + all-to-all): raises this rank's flag at
// every peer once they have written everything (block 0, so that every
// block of every rank can wait: the grid is never larger than the GPU
// holds at once), waits for every rank's, then copies the data half into
// the output (bytes of it, rows of `row` bytes), all but the columns
// [skip_lo, skip_hi) of each row, which this rank wrote there itself. The
// flags are those of `tile`; with no bytes it is a barrier of the ranks'
// streams (the GEMM + all-to-all's into symmetric memory: before its
// GEMMs write into the peers' outputs, every peer's stream has reached the
// call, and after, every peer's GEMMs are done).
struct Land {
	void *out;
	u64 bytes, row, skip_lo, skip_hi;
	u32 tile;
};
__device__ __forceinline__ void ops_land(const OpsCall &O, const Land &L)
{
	if (blockIdx.x == 0 && !O.split)
		ops_raise(O, L.tile);
	if (!ops_wait(O, L.tile))
		return;
	const char *in = O.ws[O.me] + O.data;
	char *out = (char *)L.out;
	const bool vec = (((u64)out | L.row | L.skip_lo | L.skip_hi) & 15) == 0;
	for (u64 i = ((u64)blockIdx.x * blockDim.x + threadIdx.x) * 16; i < L.bytes; i += (u64)gridDim.x * blockDim.x * 16)
		if (vec) { // a unit lies in one row, wholly in or out of the skipped columns
			const u64 col = i % L.row;
			if (col < L.skip_lo || col >= L.skip_hi)
				*(uint4 *)(out + i) = __ldcg((const uint4 *)(in + i));
		} else
			for (u64 j = i; j < i + 16 && j < L.bytes; j++) {
				const u64 col = j % L.row;
				if (col < L.skip_lo || col >= L.skip_hi)
					out[j] = in[j];
			}
}

// ---- GEMM + reduce-scatter: rank q gets rows block q of sum over r of A_r B_r ----
//
// Each rank's GEMMs (cuBLAS, before this kernel on the stream) wrote its
// fp32 partial of rank q's block straight into q's data half, at
// [this rank][block's rows][cols]. This kernel, on every rank: block 0
// tells the peers that this rank's GEMMs are done (the flag of `tile`),
// every block waits for every rank's, then sums the ranks' partials of
// this rank's block in rank order and rounds once into out (row stride
// ldo). All its blocks are resident at once (fused/ops.c waiting_grid).
struct RSum {
	void *out;
	long long ldo;
	u64 elems, slot; // elements of this rank's block (rows x cols); between two ranks' partials
	u32 cols, tile;
};
template <typename T> __device__ __forceinline__ void ops_rsum(const OpsCall &O, const RSum &R)
{
	if (blockIdx.x == 0 && !O.split)
		ops_raise(O, R.tile);
	if (!ops_wait(O, R.tile))
		return;
	const float *part = (const float *)(O.ws[O.me] + O.data);
	for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < R.elems; i += (u64)gridDim.x * blockDim.x) {
		float s = 0.f;
		for (int p = 0; p < O.n; p++)
			s += __ldcg(part + p * R.slot + i);
		const u64 at = R.ldo == (long long)R.cols ? i : (i / R.cols) * (u64)R.ldo + i % R.cols;
		((T *)R.out)[at] = fromf(s, T());
	}
}
extern "C" __global__ void __launch_bounds__(CMX_OPS_THREADS) cmx_ops_rsum_f32(const __grid_constant__ OpsCall O, const __grid_constant__ RSum R) { ops_rsum<float>(O, R); }
extern "C" __global__ void __launch_bounds__(CMX_OPS_THREADS) cmx_ops_rsum_f16(const __grid_constant__ OpsCall O, const __grid_constant__ RSum R) { ops_rsum<f16>(O, R); }
extern "C" __global__ void __launch_bounds__(CMX_OPS_THREADS) cmx_ops_rsum_bf16(const __grid_constant__ OpsCall O, const __grid_constant__ RSum R) { ops_rsum<bf16>(O, R); }

// ---- all-gather + GEMM: every rank gets gather(A_q over ranks q) B ----
//
// No kernel of its own computes: each rank's copy engines push its m x k
// block of A into every peer's data half, at [this rank], one peer after
// another on collmux's stream, and after each push this kernel raises the
// flag that says so at that peer; on the program's stream cuBLAS computes
// the rank's own rows at once, under the pushes, then each peer's rows as
// this kernel finds its flag here. One warp, one thread working: it waits
// on the stream, holding no room a GEMM needs.
struct Signal {
	int to, from; // raise this rank's flag at rank `to`, then wait for rank `from`'s here; -1: neither
	u32 tile;
};
extern "C" __global__ void cmx_ops_signal(const __grid_constant__ OpsCall O, const __grid_constant__ Signal S)
{
	if (threadIdx.x != 0)
		return;
	const u64 tag = (u64)O.shape << 32 | O.seq;
	if (S.to >= 0) { // the push before it on the stream is complete: its bytes are there
		st_release64(ops_flag(O, S.to, S.tile, O.me), tag);
		st_release64(ops_flag(O, S.to, 0, O.me), tag); // tile 0 too: cmx_ops_refuse waits for it (the header says why)
	}
	if (S.from >= 0)
		ops_poll(O, S.tile, S.from); // a failure is in err: the call's result is not valid, the next call fails
}

// A rank that refuses a call its peers make (an argument of its own,
// found once the operations are set up, when no step of the call is
// collective): its flags of the call's first two tiles carry a shape no
// call has, so that the peers' waits report another shape at once, and
// its next call keeps the peers' numbering instead of being taken for this
// one. It then waits for every rank's flag of tile 0 (the header says why).
extern "C" __global__ void cmx_ops_refuse(const __grid_constant__ OpsCall O)
{
	const int p = threadIdx.x;
	if (p >= O.n)
		return;
	for (u32 t = 0; t < 2; t++)
		st_release64(ops_flag(O, p, t, O.me), (u64)0xffffffffu << 32 | O.seq);
	// then rank p's flag of tile 0 (the header says why). A rank that made
	// the call has failed it on this rank's flags and turns the operations
	// off; so does this rank, so that neither waits for the other's next
	// call. A rank that does not come within the timeout is reported as
	// ops_wait reports it.
	const u64 *f = ops_flag(O, O.me, 0, p);
	u64 t0 = 0, v;
	for (unsigned spins = 0; (u32)(v = ld_acquire64(f)) != O.seq; spins++)
		if ((spins & 1023) == 0) {
			const u64 now = now_ns();
			if (!t0)
				t0 = now;
			else if (now - t0 > O.timeout_ns) {
				atomicOr(O.gone, 1u);
				if (!(atomicOr(O.err, 1u << p) & (1u << p)))
					printf("collmux: a fused operation on rank %d: rank %d did not arrive within COLLMUX_TIMEOUT\n", O.me, p);
				return;
			}
		}
	if ((u32)(v >> 32) != 0xffffffffu)
		atomicOr(O.err, 1u << 16);
}

extern "C" __global__ void __launch_bounds__(CMX_OPS_THREADS) cmx_emb_pool_f32(const __grid_constant__ OpsCall O, const __grid_constant__ Emb E) { emb_pool<float>(O, E); }
extern "C" __global__ void __launch_bounds__(CMX_OPS_THREADS) cmx_emb_pool_f16(const __grid_constant__ OpsCall O, const __grid_constant__ Emb E) { emb_pool<f16>(O, E); }
extern "C" __global__ void __launch_bounds__(CMX_OPS_THREADS) cmx_emb_pool_bf16(const __grid_constant__ OpsCall O, const __grid_constant__ Emb E) { emb_pool<bf16>(O, E); }
extern "C" __global__ void __launch_bounds__(CMX_OPS_THREADS) cmx_ops_land(const __grid_constant__ OpsCall O, const __grid_constant__ Land L) { ops_land(O, L); }
