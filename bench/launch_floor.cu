// launch_floor: the least a blocking GPU collective can cost on this
// machine: one kernel launch and waiting for it, with nothing in the
// kernel; and, for collmux's resident fused kernel, one round trip through
// a doorbell in host memory to a kernel that is already running; and what
// ordering a call after the legacy default stream adds. Built and
// run by scripts/gpu-test.sh; the figures go with the benchmark results.
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
// fused kernel does, with no work in between
__global__ void resident(volatile unsigned *bell, volatile unsigned *done, unsigned n)
{
	for (unsigned i = 1; i <= n; i++) {
		while (*bell != i)
			;
		__threadfence_system();
		*done = i;
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
	resident<<<1, 32, 0, nb>>>(db, dd, N + 1000);
	for (unsigned i = 1; i <= 1000; i++) {
		*(volatile unsigned *)hb = i;
		while (*(volatile unsigned *)hd != i)
			;
	}
	t0 = now_us();
	for (unsigned i = 1001; i <= (unsigned)N + 1000; i++) {
		*(volatile unsigned *)hb = i;
		while (*(volatile unsigned *)hd != i)
			;
	}
	printf("doorbell round trip to a resident kernel: %.2f us\n", (now_us() - t0) / N);
	cudaStreamSynchronize(nb);
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
	return 0;
}
