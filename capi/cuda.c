/*
 * cuda.c: the CUDA driver API, loaded with dlopen so that the library
 * builds and runs without CUDA. Only what collmux needs: telling host from
 * device memory, contexts, streams, copies and pinned staging memory.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "cmx.h"

typedef int CUresult;
typedef void *CUcontext;
typedef void *CUstream;
typedef uintptr_t CUdeviceptr;

/* cuda.h values (stable since CUDA 4) */
enum { CU_POINTER_ATTRIBUTE_CONTEXT = 1, CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2, CU_POINTER_ATTRIBUTE_IS_MANAGED = 8 };
enum { CU_MEMORYTYPE_HOST = 1, CU_MEMORYTYPE_DEVICE = 2, CU_MEMORYTYPE_UNIFIED = 4 };

static struct {
	CUresult (*CtxGetCurrent)(CUcontext *);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*PointerGetAttributes)(unsigned, int *, void **, CUdeviceptr);
	CUresult (*MemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	CUresult (*StreamCreate)(CUstream *, unsigned);
	CUresult (*StreamDestroy)(CUstream);
	CUresult (*StreamSynchronize)(CUstream);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemFree)(CUdeviceptr);
	CUresult (*MemAllocHost)(void **, size_t);
	CUresult (*MemFreeHost)(void *);
} cu;

int cmx_cuda_present;
volatile int cmx_cuda_up;

int cmx_cuda_load(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return 0;
#define SYM(f, name) (*(void **)&cu.f = dlsym(h, name))
	SYM(CtxGetCurrent, "cuCtxGetCurrent");
	SYM(CtxSetCurrent, "cuCtxSetCurrent");
	SYM(PointerGetAttributes, "cuPointerGetAttributes");
	SYM(MemcpyAsync, "cuMemcpyAsync");
	SYM(StreamCreate, "cuStreamCreate");
	SYM(StreamDestroy, "cuStreamDestroy_v2");
	SYM(StreamSynchronize, "cuStreamSynchronize");
	SYM(MemAlloc, "cuMemAlloc_v2");
	SYM(MemFree, "cuMemFree_v2");
	SYM(MemAllocHost, "cuMemAllocHost_v2");
	SYM(MemFreeHost, "cuMemFreeHost");
#undef SYM
	cmx_cuda_present = cu.CtxGetCurrent && cu.PointerGetAttributes && cu.MemcpyAsync && cu.StreamCreate &&
			   cu.StreamSynchronize && cu.MemAlloc && cu.MemAllocHost;
	cmx_log(1, "CUDA driver %s", cmx_cuda_present ? "loaded" : "incomplete: device buffers unsupported");
	return cmx_cuda_present;
}

/* cuCtxGetCurrent fails with CUDA_ERROR_NOT_INITIALIZED until the process
 * calls cuInit (directly or through the runtime); once it succeeds the
 * answer cannot change, so it is latched and never asked again. */
int cmx_cuda_probe(void)
{
	CUcontext ctx;
	if (!cmx_cuda_present || cu.CtxGetCurrent(&ctx) != 0)
		return 0;
	__atomic_store_n(&cmx_cuda_up, 1, __ATOMIC_RELEASE);
	return 1;
}

int cmx_mem_kind(const void *p)
{
	if (!p || !cmx_cuda_up)
		return CMX_MEM_HOST;
	unsigned type = 0;
	uint64_t managed = 0; /* the driver writes a bool-sized value */
	int attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED};
	void *data[2] = {&type, &managed};
	if (cu.PointerGetAttributes(2, attrs, data, (CUdeviceptr)p) != 0)
		return CMX_MEM_HOST; /* older drivers: not a CUDA allocation */
	if (type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED)
		return (managed & 0xff) ? CMX_MEM_MANAGED : CMX_MEM_DEVICE;
	return CMX_MEM_HOST;
}

int cmx_cuda_ctx_for(const void *p)
{
	CUcontext cur = NULL, want = NULL;
	if (cu.CtxGetCurrent(&cur) == 0 && cur)
		return 1;
	int attr = CU_POINTER_ATTRIBUTE_CONTEXT;
	void *data = &want;
	if (cu.PointerGetAttributes(1, &attr, &data, (CUdeviceptr)p) != 0 || !want)
		return 0;
	return cu.CtxSetCurrent(want) == 0;
}

int cmx_cuda_copy(void *dst, const void *src, size_t n, void *stream)
{
	return n == 0 || cu.MemcpyAsync((CUdeviceptr)dst, (CUdeviceptr)src, n, stream) == 0;
}

int cmx_cuda_sync(void *stream) { return cu.StreamSynchronize(stream) == 0; }

/* Flags 0 (not CU_STREAM_NON_BLOCKING): collmux's stream waits for work the
 * program queued on the legacy default stream, as an MPI call must see
 * buffers the program wrote there. */
void *cmx_cuda_stream_new(void)
{
	CUstream s = NULL;
	return cu.StreamCreate(&s, 0) == 0 ? s : NULL;
}

void cmx_cuda_stream_free(void *s)
{
	if (s && cu.StreamDestroy)
		cu.StreamDestroy(s);
}

void *cmx_cuda_malloc(size_t n)
{
	CUdeviceptr p = 0;
	return cu.MemAlloc(&p, n ? n : 1) == 0 ? (void *)p : NULL;
}

void cmx_cuda_free(void *p)
{
	if (p)
		cu.MemFree((CUdeviceptr)p);
}

void *cmx_cuda_host_alloc(size_t n)
{
	void *p = NULL;
	return cu.MemAllocHost(&p, n ? n : 1) == 0 ? p : NULL;
}

void cmx_cuda_host_free(void *p)
{
	if (p && cu.MemFreeHost)
		cu.MemFreeHost(p);
}
