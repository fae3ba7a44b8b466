/*
 * cuda_runtime.h of tests/fakecuda: the part of the CUDA runtime API the
 * test programs use, provided by libcuda.so.1 of the same folder (see
 * fakecuda.c). Test programs built with -DCOLLTEST_CUDA against it run
 * on a machine without a GPU.
 */
#ifndef FAKECUDA_RUNTIME_H
#define FAKECUDA_RUNTIME_H
#include <stddef.h>

typedef int cudaError_t;
typedef void *cudaStream_t;
enum { cudaSuccess = 0 };
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice, cudaMemcpyDefault };

cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaFree(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind);
cudaError_t cudaMemset(void *p, int v, size_t n);
cudaError_t cudaSetDevice(int dev);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaGetDevice(int *dev);
cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int dev);
cudaError_t cudaDeviceSynchronize(void);
const char *cudaGetErrorString(cudaError_t e);
enum { cudaStreamNonBlocking = 1 };
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
#endif
