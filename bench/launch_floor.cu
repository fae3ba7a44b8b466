// launch_floor: the least a blocking GPU collective can cost on this
// machine: one kernel launch and waiting for it, with nothing in the
// kernel. Built and run by scripts/gpu-test.sh; the figures go with the
// benchmark results, since no launch-per-call design can beat them.
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
	return 0;
}
