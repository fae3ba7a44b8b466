// launch_floor: the least a blocking GPU collective can cost on this
// machine: one kernel launch and waiting for it, with nothing in the
// kernel; and, for collmux's resident fused kernel, one round trip through
// a doorbell in host memory to a kernel that is already running; what
// ordering a call after the legacy default stream adds, what telling a
// device buffer from a host one costs, and how long a flag takes to cross
// NVLink between two GPUs. Built and
// run by scripts/gpu-test.sh; the figures go with the benchmark results.
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <time.h>

__global__ void empty() {}
__global__ void flag(volatile unsigned *f, unsigned v)
{
	if (threadIdx.x == 0) {
		__threadfence_system();
		*f = v;
	}
}

// polls a doorbell in host memory and answers each ring, as the resident
// fused kernel does, with no work in between; the answer is ordered after
// the job's writes at system scope (fence 2, the kernel's st.release.sys),
// at GPU scope only (1: enough for the program's later GPU work, not for a
// host reading the output), or not at all (0: the floor); with out, each
// job first writes a word of device memory per thread, as a job's output
__global__ void resident(volatile unsigned *bell, volatile unsigned *done, unsigned n, int fence, unsigned *out)
{
	for (unsigned i = 1; i <= n; i++) {
		while (*bell != i)
			;
		if (out)
			out[threadIdx.x] = i;
		if (fence == 2)
			__threadfence_system();
		else if (fence == 1)
			__threadfence();
		*done = i;
	}
}

// the same with k pollers, warp w starting w/k of a round trip late, so
// that a ring waits for the next poll a k-th as long; the first to see it
// answers
__global__ void resident_k(volatile unsigned *bell, volatile unsigned *done, unsigned n, unsigned k, unsigned stagger_ns)
{
	__shared__ volatile unsigned seen;
	const unsigned w = threadIdx.x / 32;
	if (threadIdx.x == 0)
		seen = 0;
	__syncthreads();
	if (threadIdx.x % 32 || w >= k)
		return;
	__nanosleep(w * stagger_ns);
	for (unsigned i = 1; i <= n; i++) {
		while (seen < i) {
			if (*bell == i && seen < i) {
				seen = i;
				__threadfence_system();
				*done = i;
			}
		}
	}
}

// one GPU writes a flag in the other's memory over NVLink and waits for
// the answer in its own: two one-way crossings per round
__global__ void ping(volatile unsigned *mine, volatile unsigned *theirs, unsigned n, int first)
{
	for (unsigned i = 1; i <= n; i++) {
		if (first)
			*theirs = i;
		while (*mine != i)
			;
		if (!first)
			*theirs = i;
	}
}

static double now_us()
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main()
{
	cudaStream_t s;
	unsigned *h, *d;
	cudaStreamCreate(&s);
	cudaHostAlloc((void **)&h, 4, cudaHostAllocMapped);
	cudaHostGetDevicePointer((void **)&d, h, 0);
	*h = 0;
	const int N = 20000;
	for (int i = 0; i < 1000; i++) {
		empty<<<1, 512, 0, s>>>();
		cudaStreamSynchronize(s);
	}
	double t0 = now_us();
	for (int i = 0; i < N; i++)
		empty<<<1, 512, 0, s>>>();
	cudaStreamSynchronize(s);
	printf("kernel launch alone (queued back to back): %.2f us\n", (now_us() - t0) / N);
	t0 = now_us();
	for (int i = 0; i < N; i++) {
		empty<<<1, 512, 0, s>>>();
		cudaStreamSynchronize(s);
	}
	printf("launch + cudaStreamSynchronize, empty kernel: %.2f us\n", (now_us() - t0) / N);
	t0 = now_us();
	for (unsigned i = 1; i <= (unsigned)N; i++) {
		flag<<<1, 512, 0, s>>>(d, i);
		while (*(volatile unsigned *)h != i)
			;
	}
	printf("launch + spin on a host-mapped completion flag: %.2f us\n", (now_us() - t0) / N);

	unsigned *hb, *db, *hd, *dd;
	cudaStream_t nb;
	cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking);
	cudaHostAlloc((void **)&hb, 64, cudaHostAllocMapped);
	cudaHostAlloc((void **)&hd, 64, cudaHostAllocMapped);
	cudaHostGetDevicePointer((void **)&db, hb, 0);
	cudaHostGetDevicePointer((void **)&dd, hd, 0);
	*hb = *hd = 0;
	const char *fences[3] = {"no fence before the answer", "GPU-scope fence", "system-scope fence (the fused kernel's)"};
	unsigned *out;
	cudaMalloc((void **)&out, 32 * sizeof(unsigned));
	for (int job = 0; job < 6; job++) {
		const int fence = 2 - job % 3;
		*hb = *hd = 0;
		resident<<<1, 32, 0, nb>>>(db, dd, N + 1000, fence, job < 3 ? NULL : out);
		for (unsigned i = 1; i <= (unsigned)N + 1000; i++) {
			if (i == 1001)
				t0 = now_us();
			*(volatile unsigned *)hb = i;
			while (*(volatile unsigned *)hd != i)
				;
		}
		printf("doorbell round trip to a resident kernel%s, %s: %.2f us\n", job < 3 ? "" : " writing device memory", fences[fence],
		       (now_us() - t0) / N);
		cudaStreamSynchronize(nb);
	}
	for (unsigned k = 2; k <= 8; k *= 2) {
		*hb = *hd = 0;
		resident_k<<<1, 32 * k, 0, nb>>>(db, dd, N + 1000, k, 1000 / k);
		for (unsigned i = 1; i <= (unsigned)N + 1000; i++) {
			if (i == 1001)
				t0 = now_us();
			*(volatile unsigned *)hb = i;
			while (*(volatile unsigned *)hd != i)
				;
		}
		printf("doorbell round trip, %u staggered pollers: %.2f us\n", k, (now_us() - t0) / N);
		cudaStreamSynchronize(nb);
	}
	t0 = now_us();
	for (int i = 0; i < N; i++)
		cudaStreamQuery(cudaStreamLegacy);
	printf("cudaStreamQuery(legacy default stream), idle: %.2f us\n", (now_us() - t0) / N);

	// a blocking call on a non-blocking stream, ordered after the legacy
	// default stream two ways: on the device (event recorded there, waited
	// for on the stream; the NCCL path) and on the host (a query; the
	// resident fused kernel, which cannot wait on the device)
	cudaEvent_t ev;
	cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
	t0 = now_us();
	for (int i = 0; i < N; i++) {
		empty<<<1, 512, 0, nb>>>();
		cudaStreamSynchronize(nb);
	}
	double plain = (now_us() - t0) / N;
	t0 = now_us();
	for (int i = 0; i < N; i++) {
		cudaEventRecord(ev, cudaStreamLegacy);
		cudaStreamWaitEvent(nb, ev, 0);
		empty<<<1, 512, 0, nb>>>();
		cudaStreamSynchronize(nb);
	}
	printf("launch + sync on a non-blocking stream: %.2f us; ordered after the legacy stream by an event: +%.2f us\n", plain,
	       (now_us() - t0) / N - plain);
	t0 = now_us();
	for (int i = 0; i < N; i++) {
		cudaStreamQuery(cudaStreamLegacy);
		empty<<<1, 512, 0, nb>>>();
		cudaStreamSynchronize(nb);
	}
	printf("ordered after the legacy stream by a query: +%.2f us\n", (now_us() - t0) / N - plain);

	// what collmux asks of each device buffer of a call (cmx_mem_kind)
	void *dp;
	cudaMalloc(&dp, 1 << 20);
	unsigned type = 0;
	unsigned long long managed = 0;
	CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED};
	void *data[2] = {&type, &managed};
	t0 = now_us();
	for (int i = 0; i < N; i++)
		cuPointerGetAttributes(2, attrs, data, (CUdeviceptr)dp + 64);
	printf("cuPointerGetAttributes (memory type, managed) of a device pointer: %.2f us\n", (now_us() - t0) / N);

	int ndev = 0, can = 0;
	cudaGetDeviceCount(&ndev);
	if (ndev >= 2 && cudaDeviceCanAccessPeer(&can, 0, 1) == cudaSuccess && can) {
		unsigned *f[2];
		cudaStream_t ps[2];
		for (int g = 0; g < 2; g++) {
			cudaSetDevice(g);
			cudaDeviceEnablePeerAccess(1 - g, 0);
			cudaMalloc((void **)&f[g], 4);
			cudaMemset(f[g], 0, 4);
			cudaStreamCreateWithFlags(&ps[g], cudaStreamNonBlocking);
			cudaDeviceSynchronize();
		}
		const unsigned R = 100000;
		t0 = now_us();
		for (int g = 0; g < 2; g++) {
			cudaSetDevice(g);
			ping<<<1, 1, 0, ps[g]>>>(f[g], f[1 - g], R, g == 0);
		}
		for (int g = 0; g < 2; g++)
			cudaStreamSynchronize(ps[g]);
		printf("NVLink one-way flag latency, GPU 0 <-> 1 (half a ping-pong round): %.2f us\n", (now_us() - t0) / R / 2);
	}
	return 0;
}
