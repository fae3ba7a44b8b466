/*
 * fakecuda.c: a stand-in for the CUDA driver (libcuda.so.1) and the few
 * runtime calls the test programs make, so that the CPU suite runs
 * collmux's device-memory logic (the staged path, requests, point-to-point
 * on device buffers) against real Open MPI and MPICH. On the GPU machine
 * the same programs run on real CUDA.
 *
 * "Device memory" is a shared-memory arena mapped twice: once with no
 * access at all, the addresses programs get from cudaMalloc/cuMemAlloc,
 * and once readable and writable, the view the copy functions use. So an
 * MPI that is handed a device pointer faults, as a real MPI without CUDA
 * support does, and a test passes only if collmux staged every device
 * buffer. Streams and events are synchronous: every copy is done when it
 * returns. There is no NCCL and no kernel here, so every device call takes
 * the staged path.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef int CUresult;
enum { OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3 };

#define ARENA ((size_t)1 << 32) /* address space only: pages exist once written */
static char *dev, *rw;           /* the two views */
static size_t top;               /* bump allocation; freed blocks are reused by size */
static int up;                   /* "cuInit" happened */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct blk {
	size_t off, n;
	int used;
	struct blk *next;
} blk;
static blk *blocks;

static int arena(void)
{
	if (dev)
		return 1;
	int fd = memfd_create("fakecuda", 0);
	if (fd < 0 || ftruncate(fd, (off_t)ARENA) != 0)
		return 0;
	void *d = mmap(NULL, ARENA, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	void *w = mmap(NULL, ARENA, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	close(fd);
	if (d == MAP_FAILED || w == MAP_FAILED)
		return 0;
	dev = d, rw = w;
	return 1;
}

static int is_dev(const void *p) { return dev && (const char *)p >= dev && (const char *)p < dev + ARENA; }

/* the address a copy touches: device pointers through the writable view */
static void *view(const void *p) { return is_dev(p) ? rw + ((const char *)p - dev) : (void *)p; }

CUresult cuInit(unsigned flags)
{
	(void)flags;
	pthread_mutex_lock(&mu);
	int ok = arena();
	up = up || ok;
	pthread_mutex_unlock(&mu);
	return ok ? OK : OUT_OF_MEMORY;
}

CUresult cuDriverGetVersion(int *v) { return *v = 13000, OK; }

CUresult cuCtxGetCurrent(void **ctx)
{
	if (!up)
		return NOT_INITIALIZED;
	*ctx = (void *)0x1;
	return OK;
}

CUresult cuCtxSetCurrent(void *ctx) { return (void)ctx, OK; }

CUresult cuMemAlloc_v2(uintptr_t *p, size_t n)
{
	n = (n + 255) & ~(size_t)255;
	if (n == 0)
		n = 256;
	pthread_mutex_lock(&mu);
	CUresult r = OUT_OF_MEMORY;
	if (arena()) {
		blk *b = blocks;
		while (b && (b->used || b->n != n))
			b = b->next;
		if (!b && top + n <= ARENA && (b = calloc(1, sizeof *b))) {
			b->off = top, b->n = n, top += n;
			b->next = blocks, blocks = b;
		}
		if (b) {
			b->used = 1;
			*p = (uintptr_t)(dev + b->off);
			r = OK;
		}
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuMemFree_v2(uintptr_t p)
{
	pthread_mutex_lock(&mu);
	for (blk *b = blocks; b; b = b->next)
		if (b->used && dev + b->off == (char *)p)
			b->used = 0;
	pthread_mutex_unlock(&mu);
	return OK;
}

/* Pinned host memory, counted so that tests can see collmux free it
 * (fakecuda_pinned_live, found by the test programs with dlsym), and
 * refused past FAKECUDA_PINNED_MAX allocations live, so that they can see
 * it run out. */
static long pinned_live;

CUresult cuMemAllocHost_v2(void **p, size_t n)
{
	const char *max = getenv("FAKECUDA_PINNED_MAX");
	*p = NULL;
	if ((max && __atomic_load_n(&pinned_live, __ATOMIC_RELAXED) >= atol(max)) || !(*p = malloc(n ? n : 1)))
		return OUT_OF_MEMORY;
	__atomic_fetch_add(&pinned_live, 1, __ATOMIC_RELAXED);
	return OK;
}

CUresult cuMemFreeHost(void *p)
{
	if (p)
		__atomic_fetch_sub(&pinned_live, 1, __ATOMIC_RELAXED);
	free(p);
	return OK;
}

long fakecuda_pinned_live(void) { return __atomic_load_n(&pinned_live, __ATOMIC_RELAXED); }

/* what collmux asks of a pointer: memory type (2: device), managed (no),
 * context */
CUresult cuPointerGetAttributes(unsigned n, int *attrs, void **data, uintptr_t p)
{
	for (unsigned i = 0; i < n; i++) {
		switch (attrs[i]) {
		case 1: /* CONTEXT */
			*(void **)data[i] = is_dev((void *)p) ? (void *)0x1 : NULL;
			break;
		case 2: /* MEMORY_TYPE */
			*(unsigned *)data[i] = is_dev((void *)p) ? 2 : 0;
			break;
		case 8: /* IS_MANAGED */
			*(char *)data[i] = 0;
			break;
		default:
			return INVALID_VALUE;
		}
	}
	return OK;
}

/* FAKECUDA_FAIL_TO_DEVICE=N: a copy from host to device memory of exactly
 * N bytes fails, as one to a device that faulted would, so that tests can
 * see how collmux reports the request whose data it was. */
CUresult cuMemcpyAsync(uintptr_t dst, uintptr_t src, size_t n, void *stream)
{
	(void)stream;
	const char *fail = getenv("FAKECUDA_FAIL_TO_DEVICE");
	if (fail && is_dev((void *)dst) && !is_dev((void *)src) && n == (size_t)atol(fail))
		return INVALID_VALUE;
	memmove(view((void *)dst), view((void *)src), n);
	return OK;
}

CUresult cuMemcpyDtoH_v2(void *dst, uintptr_t src, size_t n) { return cuMemcpyAsync((uintptr_t)dst, src, n, NULL); }

CUresult cuMemsetD8_v2(uintptr_t p, unsigned char v, size_t n) { return memset(view((void *)p), v, n), OK; }

static int token;
CUresult cuStreamCreate(void **s, unsigned flags) { return (void)flags, *s = &token, OK; }
CUresult cuStreamDestroy_v2(void *s) { return (void)s, OK; }
CUresult cuStreamSynchronize(void *s) { return (void)s, OK; }
CUresult cuStreamQuery(void *s) { return (void)s, OK; }
CUresult cuStreamWaitEvent(void *s, void *e, unsigned f) { return (void)s, (void)e, (void)f, OK; }
CUresult cuEventCreate(void **e, unsigned f) { return (void)f, *e = &token, OK; }
CUresult cuEventRecord(void *e, void *s) { return (void)e, (void)s, OK; }
CUresult cuEventQuery(void *e) { return (void)e, OK; }
CUresult cuEventDestroy_v2(void *e) { return (void)e, OK; }

/* ---- the runtime calls of the test programs ---- */

int cudaSetDevice(int d) { return (void)d, cuInit(0); }
int cudaGetDeviceCount(int *n) { return *n = 1, 0; }
int cudaGetDevice(int *d) { return *d = 0, 0; }
int cudaDeviceGetPCIBusId(char *bus, int len, int d) { return (void)d, snprintf(bus, (size_t)len, "0000:00:00.0"), 0; }
int cudaDeviceSynchronize(void) { return 0; }
int cudaMalloc(void **p, size_t n) { return cuInit(0) ? 2 : cuMemAlloc_v2((uintptr_t *)p, n); }
int cudaFree(void *p) { return cuMemFree_v2((uintptr_t)p); }
int cudaMemcpy(void *d, const void *s, size_t n, int kind) { return (void)kind, cuMemcpyAsync((uintptr_t)d, (uintptr_t)s, n, NULL); }
int cudaMemset(void *p, int v, size_t n) { return cuMemsetD8_v2((uintptr_t)p, (unsigned char)v, n); }
const char *cudaGetErrorString(int e) { return e ? "fakecuda error" : "no error"; }
int cudaStreamCreate(void **s) { return cuStreamCreate(s, 0); }
int cudaStreamCreateWithFlags(void **s, unsigned f) { return cuStreamCreate(s, f); }
int cudaStreamSynchronize(void *s) { return cuStreamSynchronize(s); }
