/*
 * cuda.c: the CUDA driver API, loaded with dlopen so that the library
 * builds and runs without CUDA. Only what collmux needs: telling host from
 * device memory, contexts, streams, copies and pinned staging memory.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "cmx.h"

typedef int CUresult;
typedef void *CUcontext;
typedef void *CUstream;
typedef uintptr_t CUdeviceptr;

/* CUDA_MEMCPY2D */
typedef struct {
	size_t src_x, src_y;
	int src_type;
	const void *src_host;
	CUdeviceptr src;
	void *src_array;
	size_t src_pitch;
	size_t dst_x, dst_y;
	int dst_type;
	void *dst_host;
	CUdeviceptr dst;
	void *dst_array;
	size_t dst_pitch;
	size_t width, height;
} cu_copy2d;

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
	CUresult (*StreamQuery)(CUstream);
	CUresult (*StreamIsCapturing)(CUstream, int *);
	CUresult (*StreamWaitEvent)(CUstream, void *, unsigned);
	CUresult (*EventCreate)(void **, unsigned);
	CUresult (*EventRecord)(void *, CUstream);
	CUresult (*EventDestroy)(void *);
	CUresult (*EventQuery)(void *);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemFree)(CUdeviceptr);
	CUresult (*MemAllocHost)(void **, size_t);
	CUresult (*MemFreeHost)(void *);
	CUresult (*MemGetInfo)(size_t *, size_t *);
	/* for the fused kernels */
	CUresult (*CtxGetDevice)(int *);
	CUresult (*DeviceGetAttribute)(int *, int, int);
	CUresult (*DeviceGetPCIBusId)(char *, int, int);
	CUresult (*DriverGetVersion)(int *);
	CUresult (*ModuleLoadData)(void **, const void *);
	CUresult (*ModuleGetFunction)(void **, void *, const char *);
	CUresult (*LaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, void **);
	CUresult (*LaunchKernelEx)(const void *, void *, void **, void **);
	CUresult (*IpcGetMemHandle)(void *, CUdeviceptr);
	CUresult (*IpcOpenMemHandle)(CUdeviceptr *, cmx_ipc_handle, unsigned);
	CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
	CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, void *);
	CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult (*MemHostAlloc)(void **, size_t, unsigned);
	CUresult (*MemHostGetDevicePointer)(CUdeviceptr *, void *, unsigned);
	/* for the copy engines */
	CUresult (*IpcCloseMemHandle)(CUdeviceptr);
	CUresult (*StreamCreateWithPriority)(CUstream *, unsigned, int);
	CUresult (*CtxGetStreamPriorityRange)(int *, int *);
	/* for the fused operations' pitched copies */
	CUresult (*Memcpy2DAsync)(const cu_copy2d *, CUstream);
	CUresult (*MemsetD2D8Async)(CUdeviceptr, size_t, unsigned char, size_t, size_t, CUstream);
} cu;

int cmx_cuda_present;
volatile int cmx_cuda_up;
static __thread int last_error; /* the last failing CUresult on this thread */

int cmx_cuda_last_error(void) { return last_error; }

static int ok(CUresult r)
{
	if (r != 0)
		last_error = r;
	return r == 0;
}

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
	SYM(StreamQuery, "cuStreamQuery");
	SYM(StreamIsCapturing, "cuStreamIsCapturing");
	SYM(StreamWaitEvent, "cuStreamWaitEvent");
	SYM(EventCreate, "cuEventCreate");
	SYM(EventRecord, "cuEventRecord");
	SYM(EventDestroy, "cuEventDestroy_v2");
	SYM(EventQuery, "cuEventQuery");
	SYM(MemAlloc, "cuMemAlloc_v2");
	SYM(MemFree, "cuMemFree_v2");
	SYM(MemAllocHost, "cuMemAllocHost_v2");
	SYM(MemFreeHost, "cuMemFreeHost");
	SYM(MemGetInfo, "cuMemGetInfo_v2");
	SYM(CtxGetDevice, "cuCtxGetDevice");
	SYM(DeviceGetAttribute, "cuDeviceGetAttribute");
	SYM(DeviceGetPCIBusId, "cuDeviceGetPCIBusId");
	SYM(DriverGetVersion, "cuDriverGetVersion");
	SYM(ModuleLoadData, "cuModuleLoadData");
	SYM(ModuleGetFunction, "cuModuleGetFunction");
	SYM(LaunchKernel, "cuLaunchKernel");
	SYM(LaunchKernelEx, "cuLaunchKernelEx");
	SYM(IpcGetMemHandle, "cuIpcGetMemHandle");
	SYM(IpcOpenMemHandle, "cuIpcOpenMemHandle_v2");
	SYM(MemsetD8, "cuMemsetD8_v2");
	SYM(MemsetD8Async, "cuMemsetD8Async");
	SYM(MemcpyDtoH, "cuMemcpyDtoH_v2");
	SYM(MemHostAlloc, "cuMemHostAlloc");
	SYM(MemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2");
	SYM(IpcCloseMemHandle, "cuIpcCloseMemHandle");
	SYM(StreamCreateWithPriority, "cuStreamCreateWithPriority");
	SYM(CtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange");
	SYM(Memcpy2DAsync, "cuMemcpy2DAsync_v2");
	SYM(MemsetD2D8Async, "cuMemsetD2D8Async");
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
	/* probed here too, not only by the callers' fast paths: a path that
	 * skips them (an unserved _c function the MPI lacks, narrowed to its
	 * int twin) would otherwise take the process's first device buffer for
	 * host memory and hand it to the MPI (mpi4py 4's test_io, session 26) */
	if (!p || (!cmx_cuda_up && !cmx_cuda_probe()))
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

int cmx_cuda_ctx_or(const void *p, void *ctx) { return cmx_cuda_ctx_for(p) || (ctx && cu.CtxSetCurrent(ctx) == 0); }

void *cmx_cuda_ctx_current(void)
{
	CUcontext cur = NULL;
	return cu.CtxGetCurrent(&cur) == 0 ? cur : NULL;
}

int cmx_cuda_ctx_holds(const void *p)
{
	CUcontext cur = NULL, ctx = NULL;
	int attr = CU_POINTER_ATTRIBUTE_CONTEXT;
	void *data = &ctx;
	return cu.CtxGetCurrent(&cur) == 0 && cur && cu.PointerGetAttributes(1, &attr, &data, (CUdeviceptr)p) == 0 && ctx == cur;
}

int cmx_cuda_copy(void *dst, const void *src, size_t n, void *stream)
{
	return n == 0 || ok(cu.MemcpyAsync((CUdeviceptr)dst, (CUdeviceptr)src, n, stream));
}

int cmx_cuda_copy_runs(void *dev, const char *from, size_t len, const cmx_run *runs, int n)
{
	int ok = 1;
	if (!runs)
		ok = cmx_cuda_copy(dev, from, len, NULL);
	for (int i = 0; runs && ok && i < n; i++)
		ok = cmx_cuda_copy((char *)dev + runs[i].off, from + runs[i].off, runs[i].len, NULL);
	return ok && cmx_cuda_sync(NULL);
}

int cmx_cuda_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows, void *stream)
{
	if (rows <= 1 || (dpitch == width && spitch == width))
		return cmx_cuda_copy(dst, src, width * rows, stream);
	const cu_copy2d d = {.src_type = CU_MEMORYTYPE_DEVICE, .src = (CUdeviceptr)src, .src_pitch = spitch,
			     .dst_type = CU_MEMORYTYPE_DEVICE, .dst = (CUdeviceptr)dst, .dst_pitch = dpitch,
			     .width = width, .height = rows};
	return width == 0 || (cu.Memcpy2DAsync && ok(cu.Memcpy2DAsync(&d, stream)));
}

int cmx_cuda_sync(void *stream) { return ok(cu.StreamSynchronize(stream)); }

/* A blocking stream (flags 0) waits for work the program queued on the
 * legacy default stream, as an MPI call must see buffers the program wrote
 * there. A non-blocking one (CU_STREAM_NON_BLOCKING) neither waits for it
 * nor holds it up: the device backends', which order themselves after it
 * with an event (NCCL) or a query (the resident fused kernel). */
void *cmx_cuda_stream_new(int nonblocking)
{
	CUstream s = NULL;
	return cu.StreamCreate(&s, nonblocking ? 1u : 0u) == 0 ? s : NULL;
}

enum { CUDA_ERROR_NOT_READY = 600 };
#define CU_STREAM_LEGACY ((CUstream)0x1)

int cmx_cuda_query(void *stream)
{
	CUresult r = cu.StreamQuery(stream);
	return r == 0 ? 1 : r == CUDA_ERROR_NOT_READY ? 0 : (ok(r), -1);
}

/* Waits for what the program queued on the legacy default stream (one
 * query when nothing is, the common case). */
int cmx_cuda_legacy_idle(void)
{
	int q = cmx_cuda_query(CU_STREAM_LEGACY);
	return q > 0 || (q == 0 && cmx_cuda_sync(CU_STREAM_LEGACY));
}

/* The work queued next on stream waits, on the device, for what the
 * program queued on the legacy default stream so far, while the legacy
 * stream does not wait for it in turn (stream is non-blocking). *event is
 * created at the first call and kept by the caller. */
int cmx_cuda_after_legacy(void *stream, void **event) { return cmx_cuda_record(event, CU_STREAM_LEGACY) && cmx_cuda_wait(stream, *event); }

int cmx_cuda_record(void **event, void *stream)
{
	enum { CU_EVENT_DISABLE_TIMING = 2 };
	if (!*event && !ok(cu.EventCreate(event, CU_EVENT_DISABLE_TIMING)))
		return 0;
	return ok(cu.EventRecord(*event, stream));
}

int cmx_cuda_wait(void *stream, void *event) { return ok(cu.StreamWaitEvent(stream, event, 0)); }

int cmx_cuda_capturing(void *stream)
{
	int status = 0; /* CU_STREAM_CAPTURE_STATUS_NONE */
	return cu.StreamIsCapturing && cu.StreamIsCapturing(stream, &status) == 0 && status != 0;
}

int cmx_cuda_sm_count(void)
{
	enum { CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16 };
	int dev, n = 0;
	if (!cu.CtxGetDevice || cu.CtxGetDevice(&dev) != 0 || cu.DeviceGetAttribute(&n, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != 0 || n < 1)
		return 1;
	return n;
}

/* An event recorded on stream now, for a nonblocking call to poll. */
void *cmx_cuda_event_after(void *stream)
{
	enum { CU_EVENT_DISABLE_TIMING = 2 };
	void *e = NULL;
	if (!cu.EventQuery || !ok(cu.EventCreate(&e, CU_EVENT_DISABLE_TIMING)))
		return NULL;
	if (!ok(cu.EventRecord(e, stream))) {
		cu.EventDestroy(e);
		return NULL;
	}
	return e;
}

int cmx_cuda_event_done(void *event)
{
	CUresult r = cu.EventQuery(event);
	return r == 0 ? 1 : r == CUDA_ERROR_NOT_READY ? 0 : (ok(r), -1);
}

void cmx_cuda_event_free(void *event)
{
	if (event)
		cu.EventDestroy(event);
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

/* ---- what the fused kernels need ---- */

int cmx_cuda_fused_capable(void)
{
	return cmx_cuda_present && cu.CtxGetDevice && cu.DeviceGetAttribute && cu.DeviceGetPCIBusId && cu.DriverGetVersion &&
	       cu.ModuleLoadData && cu.ModuleGetFunction && cu.LaunchKernel && cu.IpcGetMemHandle && cu.IpcOpenMemHandle &&
	       cu.MemsetD8 && cu.MemcpyDtoH && cu.MemHostAlloc && cu.MemHostGetDevicePointer && cu.StreamQuery;
}

/* what the copy engines' path needs besides the basics */
int cmx_cuda_ipc_capable(void)
{
	return cmx_cuda_present && cu.CtxGetDevice && cu.DeviceGetAttribute && cu.DeviceGetPCIBusId && cu.IpcGetMemHandle &&
	       cu.IpcOpenMemHandle && cu.IpcCloseMemHandle;
}

/* compute capability (major*10+minor) and PCI bus id of the current device */
int cmx_cuda_device(int *arch, char *busid, int len)
{
	int dev, major = 0, minor = 0;
	if (cu.CtxGetDevice(&dev) != 0 || cu.DeviceGetAttribute(&major, 75, dev) != 0 || cu.DeviceGetAttribute(&minor, 76, dev) != 0)
		return 0; /* 75/76: CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR/MINOR */
	*arch = major * 10 + minor;
	return cu.DeviceGetPCIBusId(busid, len, dev) == 0;
}

/* whether the current device's contexts are shared through MPS; 0 where
 * the driver cannot say (CU_DEVICE_ATTRIBUTE_MPS_ENABLED is CUDA 12.x's) */
int cmx_cuda_mps(void)
{
	int dev, on = 0;
	return cu.CtxGetDevice && cu.DeviceGetAttribute && cu.CtxGetDevice(&dev) == 0 && cu.DeviceGetAttribute(&on, 133, dev) == 0 && on == 1;
}

int cmx_cuda_driver_version(void)
{
	int v = 0;
	cu.DriverGetVersion(&v);
	return v;
}

void *cmx_cuda_function(const void *image, const char *name, void **module)
{
	void *f = NULL;
	if (!*module && cu.ModuleLoadData(module, image) != 0)
		return NULL;
	return cu.ModuleGetFunction(&f, *module, name) == 0 ? f : NULL;
}

int cmx_cuda_launch(void *f, unsigned grid, unsigned block, void *stream, void **args)
{
	return ok(cu.LaunchKernel(f, grid, 1, 1, block, 1, 1, 0, stream, args, NULL));
}

/* CUlaunchAttribute and CUlaunchConfig, cuLaunchKernelEx's (CUDA 12.0 on) */
typedef struct {
	int id;
	union {
		_Alignas(8) char raw[64];
		int on;
	} value;
} cu_attr;
typedef struct {
	unsigned grid[3], block[3], shared;
	CUstream stream;
	cu_attr *attrs;
	unsigned nattrs;
} cu_launch_config;
_Static_assert(sizeof(cu_attr) == 72 && offsetof(cu_attr, value) == 8, "CUlaunchAttribute's layout");
_Static_assert(sizeof(cu_launch_config) == 56 && offsetof(cu_launch_config, stream) == 32 && offsetof(cu_launch_config, attrs) == 40 &&
		       offsetof(cu_launch_config, nattrs) == 48,
	       "CUlaunchConfig's layout");

/* 1 once the driver has refused an early launch: it is not asked again */
static int early_refused;

int cmx_cuda_launch_early(void *f, unsigned grid, unsigned block, void *stream, void **args)
{
	if (cu.LaunchKernelEx && !__atomic_load_n(&early_refused, __ATOMIC_RELAXED)) {
		cu_attr a = {.id = 6 /* CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION */, .value.on = 1};
		const cu_launch_config c = {{grid, 1, 1}, {block, 1, 1}, 0, stream, &a, 1};
		const CUresult r = cu.LaunchKernelEx(&c, f, args, NULL);
		if (r == 0)
			return 1;
		if (!__atomic_exchange_n(&early_refused, 1, __ATOMIC_RELAXED))
			cmx_log(1, "CUDA driver: no programmatic dependent launch (error %d): kernels wait for the one before them", r);
	}
	return cmx_cuda_launch(f, grid, block, stream, args);
}

int cmx_cuda_ipc_handle(void *dptr, cmx_ipc_handle *h) { return cu.IpcGetMemHandle(h, (CUdeviceptr)dptr) == 0; }

void *cmx_cuda_ipc_open(cmx_ipc_handle h)
{
	CUdeviceptr p = 0;
	return ok(cu.IpcOpenMemHandle(&p, h, 1 /* CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS */)) ? (void *)p : NULL;
}

void cmx_cuda_ipc_close(void *p)
{
	if (p && cu.IpcCloseMemHandle)
		cu.IpcCloseMemHandle((CUdeviceptr)p);
}

/* The allocation p lies in, as a peer maps it: its id (unique in this
 * process for its lifetime: an address freed and allocated again gets a
 * new one), p's offset in it, and its IPC handle. 0 where the allocation
 * cannot be shared (stream-ordered pools, virtual memory management). */
int cmx_cuda_export(const void *p, uint64_t *id, uint64_t *off, cmx_ipc_handle *h)
{
	enum { BUFFER_ID = 7, IS_LEGACY_CUDA_IPC_CAPABLE = 10, RANGE_START_ADDR = 11 };
	unsigned long long bid = 0;
	int ipc = 0;
	CUdeviceptr base = 0;
	int attrs[3] = {BUFFER_ID, IS_LEGACY_CUDA_IPC_CAPABLE, RANGE_START_ADDR};
	void *data[3] = {&bid, &ipc, &base};
	if (!ok(cu.PointerGetAttributes(3, attrs, data, (CUdeviceptr)p)) || !ipc || !base || !bid)
		return 0;
	*id = bid, *off = (uintptr_t)p - base;
	return ok(cu.IpcGetMemHandle(h, base));
}

/* A non-blocking stream of the greatest priority: the block scheduler
 * serves its kernels before those of default-priority streams. */
void *cmx_cuda_stream_high(void)
{
	int least = 0, most = 0;
	CUstream s = NULL;
	if (!cu.StreamCreateWithPriority || !cu.CtxGetStreamPriorityRange || !ok(cu.CtxGetStreamPriorityRange(&least, &most)))
		return cmx_cuda_stream_new(1);
	return ok(cu.StreamCreateWithPriority(&s, 1, most)) ? s : NULL;
}

size_t cmx_cuda_mem_free(void)
{
	size_t free = SIZE_MAX, total = 0;
	return cu.MemGetInfo && cu.MemGetInfo(&free, &total) == 0 ? free : SIZE_MAX;
}

int cmx_cuda_memset(void *dptr, int v, size_t n) { return cu.MemsetD8((CUdeviceptr)dptr, (unsigned char)v, n) == 0; }

int cmx_cuda_memset_async(void *dptr, int v, size_t n, void *stream)
{
	return cu.MemsetD8Async && ok(cu.MemsetD8Async((CUdeviceptr)dptr, (unsigned char)v, n, stream));
}

int cmx_cuda_memset2d_async(void *dptr, size_t pitch, int v, size_t width, size_t rows, void *stream)
{
	if (rows <= 1 || pitch == width)
		return cmx_cuda_memset_async(dptr, v, width * rows, stream);
	return width == 0 || (cu.MemsetD2D8Async && ok(cu.MemsetD2D8Async((CUdeviceptr)dptr, pitch, (unsigned char)v, width, rows, stream)));
}

int cmx_cuda_dtoh(void *dst, const void *src, size_t n) { return cu.MemcpyDtoH(dst, (CUdeviceptr)src, n) == 0; }

/* host memory the device reads and writes directly (the fused kernel's doorbell) */
void *cmx_cuda_mapped(size_t n, void **dptr)
{
	void *h = NULL;
	CUdeviceptr d = 0;
	if (cu.MemHostAlloc(&h, n, 0x2 /* CU_MEMHOSTALLOC_DEVICEMAP */) != 0)
		return NULL;
	if (cu.MemHostGetDevicePointer(&d, h, 0) != 0)
		return NULL;
	memset(h, 0, n);
	*dptr = (void *)d;
	return h;
}
