/* pinned.c: a pool of pinned host memory for copies that live until a
 * request completes (the staged path's nonblocking calls fill it, the
 * requests' completion returns to it). */
#include <pthread.h>
#include <stddef.h>

#include "cmx.h"

/* Kept for reuse in power-of-two classes, since cuMemAllocHost is slow
 * and pageable copies run at a fraction of pinned speed. At most POOL_MAX
 * bytes wait in the pool. */
#define POOL_MAX ((size_t)256 << 20)
static void *pool[64];
static size_t pool_bytes;
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;

static int pool_class(size_t n)
{
	int k = 12; /* 4 KiB at least */
	while (((size_t)1 << k) < n)
		k++;
	return k;
}

void *cmx_pinned_get(size_t n)
{
	const int k = pool_class(n);
	pthread_mutex_lock(&pool_mu);
	void *p = pool[k];
	if (p) {
		pool[k] = *(void **)p;
		pool_bytes -= (size_t)1 << k;
	}
	pthread_mutex_unlock(&pool_mu);
	return p ? p : cmx_cuda_host_alloc((size_t)1 << k);
}

void cmx_pinned_put(void *p, size_t n)
{
	if (!p)
		return;
	const int k = pool_class(n);
	pthread_mutex_lock(&pool_mu);
	int keep = pool_bytes + ((size_t)1 << k) <= POOL_MAX;
	if (keep) {
		*(void **)p = pool[k];
		pool[k] = p;
		pool_bytes += (size_t)1 << k;
	}
	pthread_mutex_unlock(&pool_mu);
	if (!keep)
		cmx_cuda_host_free(p);
}

void cmx_pinned_release(void)
{
	pthread_mutex_lock(&pool_mu);
	for (int k = 0; k < (int)(sizeof pool / sizeof pool[0]); k++)
		while (pool[k]) {
			void *p = pool[k];
			pool[k] = *(void **)p;
			cmx_cuda_host_free(p);
		}
	pool_bytes = 0;
	pthread_mutex_unlock(&pool_mu);
}
