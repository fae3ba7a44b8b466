// sync_costs: what each synchronisation step of the resident fused kernel
// costs on this machine, measured apart from everything else, to tell
// where a multi-block job's time goes (fused/kernels.cu: block 0 publishes
// a job to the other blocks, they work, store LL lines to the peer GPU and
// count, block 0 waits for the count and tells the host).
//
//   fence     a block stores a line a thread (nowhere, to local memory, or
//             over NVLink to the peer GPU), then thread 0 fences at GPU or
//             system scope: the fence waits for the stores it orders
//   publish   block 0 hands a word to block 1 and back (half a round trip):
//             release/acquire at GPU scope against volatile accesses, with
//             and without the follower's __nanosleep
//   count     block 0 publishes, 31 blocks count in with a GPU-scope
//             release, block 0 waits for all of them: the frame of a
//             multi-block job, with and without a line to the peer first
//
// Built and run by scripts/gpu-test.sh; with fewer than two GPUs (or no
// peer access) it says so and measures nothing.
#include <cuda_runtime.h>
#include <stdio.h>

typedef unsigned long long u64;
typedef unsigned int u32;

__device__ __forceinline__ void st_line(char *p, u32 v)
{
	asm volatile("st.volatile.global.v4.u32 [%0], {%1,%1,%1,%1};" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void fence(int scope)
{
	if (scope == 1)
		asm volatile("fence.acq_rel.gpu;" ::: "memory");
	else if (scope == 2)
		asm volatile("fence.acq_rel.sys;" ::: "memory");
}
__device__ __forceinline__ u32 ld_acq(const u32 *p)
{
	u32 v;
	asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
	return v;
}
__device__ __forceinline__ void st_rel(u32 *p, u32 v) { asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory"); }

// dst: null (no stores) or lines of 16 bytes, local or on the peer
__global__ void fence_cost(char *dst, u32 iters, int scope)
{
	for (u32 i = 1; i <= iters; i++) {
		if (dst)
			st_line(dst + (u64)threadIdx.x * 16, i);
		__syncthreads();
		if (threadIdx.x == 0)
			fence(scope);
		__syncthreads();
	}
}

// mode 0: release/acquire; 1: volatile; 2: release/acquire, follower sleeps 64 ns between polls
__global__ void publish(u32 *w, u32 iters, int mode)
{
	if (threadIdx.x)
		return;
	volatile u32 *v = w;
	u32 *mine = w + 32 * blockIdx.x, *theirs = w + 32 * (1 - blockIdx.x);
	for (u32 i = 1; i <= iters; i++) {
		if (blockIdx.x == 0)
			mode == 1 ? (void)(v[32] = i) : st_rel(theirs, i);
		while ((mode == 1 ? v[32 * blockIdx.x] : ld_acq(mine)) != i)
			if (mode == 2 && blockIdx.x)
				__nanosleep(64);
		if (blockIdx.x == 1)
			mode == 1 ? (void)(v[0] = i) : st_rel(theirs, i);
	}
}

// w[0]: go, w[32]: count; peer: a line per thread there before counting, or null
__global__ void count(u32 *w, char *peer, u32 iters)
{
	for (u32 i = 1; i <= iters; i++) {
		if (blockIdx.x == 0) {
			if (threadIdx.x == 0) {
				st_rel(w, i);
				while (ld_acq(w + 32) != i * (gridDim.x - 1))
					;
			}
			__syncthreads();
			continue;
		}
		if (threadIdx.x == 0)
			while (ld_acq(w) != i)
				;
		__syncthreads();
		if (peer)
			st_line(peer + ((u64)blockIdx.x * blockDim.x + threadIdx.x) * 16, i);
		__syncthreads();
		if (threadIdx.x == 0)
			asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(w + 32) : "memory");
	}
}

// the same frame inside a thread-block cluster: block 0 hands every block
// a job word through distributed shared memory, a cluster barrier
// publishes it, the blocks work (a line each thread to the peer, or
// nothing) and a second barrier tells block 0 they are done
__global__ void cluster_frame(char *peer, u32 iters, u32 *sink)
{
	__shared__ u32 job;
	u32 rank, size;
	asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
	asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
	u32 sum = 0;
	for (u32 i = 1; i <= iters; i++) {
		if (rank == 0 && threadIdx.x == 0)
			for (u32 b = 0; b < size; b++) {
				u32 a;
				asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"((u32)__cvta_generic_to_shared(&job)), "r"(b));
				asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(a), "r"(i) : "memory");
			}
		asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
		sum += job;
		if (peer)
			st_line(peer + ((u64)blockIdx.x * blockDim.x + threadIdx.x) * 16, i);
		asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
	}
	if (sum == 0)
		*sink = sum;
}

template <typename F> static float per_iter_us(u32 iters, F launch)
{
	cudaEvent_t a, b;
	cudaEventCreate(&a);
	cudaEventCreate(&b);
	launch(iters / 10); // warm
	cudaEventRecord(a);
	launch(iters);
	cudaEventRecord(b);
	cudaEventSynchronize(b);
	float ms = 0;
	cudaEventElapsedTime(&ms, a, b);
	return ms * 1000 / iters;
}

int main()
{
	int ndev = 0, can = 0;
	cudaGetDeviceCount(&ndev);
	if (ndev < 2 || cudaDeviceCanAccessPeer(&can, 0, 1) != cudaSuccess || !can) {
		printf("sync_costs: needs two GPUs with peer access\n");
		return 0;
	}
	char *remote, *local;
	u32 *w;
	cudaSetDevice(1);
	cudaMalloc(&remote, 1 << 20);
	cudaSetDevice(0);
	cudaDeviceEnablePeerAccess(1, 0);
	cudaMalloc(&local, 1 << 20);
	cudaMalloc(&w, 4096);
	const u32 N = 100000;
	const char *where[3] = {"no stores", "512 local lines", "512 lines to the peer"};
	char *dst[3] = {NULL, local, remote};
	for (int d = 0; d < 3; d++) {
		float t[3];
		for (int s = 0; s < 3; s++)
			t[s] = per_iter_us(N, [&](u32 n) { fence_cost<<<1, 512>>>(dst[d], n, s); });
		printf("fence, %s: none %.3f us, gpu scope +%.3f us, sys scope +%.3f us\n", where[d], t[0], t[1] - t[0], t[2] - t[0]);
	}
	const char *how[3] = {"release/acquire", "volatile", "release/acquire, follower sleeps 64 ns"};
	for (int m = 0; m < 3; m++) {
		cudaMemset(w, 0, 4096);
		float t = per_iter_us(N, [&](u32 n) {
			cudaMemset(w, 0, 4096);
			publish<<<2, 32>>>(w, n, m);
		});
		printf("publish block 0 -> block 1, %s: %.3f us one way\n", how[m], t / 2);
	}
	for (int p = 0; p < 2; p++) {
		float t = per_iter_us(N / 10, [&](u32 n) {
			cudaMemset(w, 0, 4096);
			count<<<32, 512>>>(w, p ? remote : NULL, n);
		});
		printf("publish + 31 blocks count in (gpu release) + block 0 sees the count%s: %.3f us\n", p ? ", a line each thread to the peer first" : "", t);
	}
	for (int cs = 8; cs <= 16; cs *= 2) {
		cudaFuncSetAttribute(cluster_frame, cudaFuncAttributeNonPortableClusterSizeAllowed, cs > 8);
		cudaLaunchConfig_t cfg = {};
		cudaLaunchAttribute at;
		at.id = cudaLaunchAttributeClusterDimension;
		at.val.clusterDim.x = cs, at.val.clusterDim.y = 1, at.val.clusterDim.z = 1;
		cfg.gridDim = dim3(cs), cfg.blockDim = dim3(512), cfg.attrs = &at, cfg.numAttrs = 1;
		int clusters = 0;
		cudaOccupancyMaxActiveClusters(&clusters, cluster_frame, &cfg);
		for (int p = 0; p < 2; p++) {
			float t = per_iter_us(N / 10, [&](u32 n) { cudaLaunchKernelEx(&cfg, cluster_frame, p ? remote : (char *)NULL, n, w); });
			printf("cluster of %d blocks (%d such clusters fit at once): job through shared memory + 2 cluster barriers%s: %.3f us (%s)\n", cs, clusters,
			       p ? ", a line each thread to the peer between" : "", t, cudaGetErrorString(cudaGetLastError()));
		}
	}
	cudaError_t e = cudaDeviceSynchronize();
	if (e != cudaSuccess) {
		printf("sync_costs: %s\n", cudaGetErrorString(e));
		return 1;
	}
	return 0;
}
