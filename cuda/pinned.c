/* pinned.c: a pool of pinned host memory for copies that live until a
 * request completes (the staged path's nonblocking calls fill it, the
 * requests' completion returns to it). */
#include <pthread.h>
#include <stddef.h>

#include "cmx.h"

/* Kept for reuse, since cuMemAllocHost and cuMemFreeHost take tens of
 * milliseconds for large blocks and pageable copies run at a fraction of
 * pinned speed. Sizes come in classes of a quarter of a power of two (a
 * 64 MiB message plus the staged path's few bytes takes 80 MiB, not 128),
 * and at most POOL_MAX bytes wait in the pool: enough for a window of 8
 * nonblocking 64 MiB sends each way (OSU's osu_bw shape), which with a
 * smaller pool paid an allocation and a free per message. */
#define POOL_MAX ((size_t)1 << 30)
static void *pool[64 * 4];
static size_t pool_bytes;
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;

/* The class of n bytes (an index into pool) and its size: 4 KiB at
 * least, then 5, 6, 7 or 8 quarters of the power of two below n. */
static int pool_class(size_t n, size_t *bytes)
{
	int k = 12;
	while (k < 62 && ((size_t)1 << k) < n) /* beyond: too large for any class */
		k++;
	if (k == 12) {
		*bytes = (size_t)1 << 12;
		return 0;
	}
	const size_t quarter = (size_t)1 << (k - 3);
	const size_t s = (n - ((size_t)1 << (k - 1)) + quarter - 1) / quarter; /* 1..4 */
	*bytes = ((size_t)1 << (k - 1)) + s * quarter;
	return (k - 1) * 4 + (int)(s - 1);
}

void *cmx_pinned_get(size_t n)
{
	size_t bytes;
	const int k = pool_class(n, &bytes);
	if (bytes < n)
		return NULL;
	pthread_mutex_lock(&pool_mu);
	void *p = pool[k];
	if (p) {
		pool[k] = *(void **)p;
		pool_bytes -= bytes;
	}
	pthread_mutex_unlock(&pool_mu);
	return p ? p : cmx_cuda_host_alloc(bytes);
}

void cmx_pinned_put(void *p, size_t n)
{
	if (!p)
		return;
	size_t bytes;
	const int k = pool_class(n, &bytes);
	pthread_mutex_lock(&pool_mu);
	int keep = pool_bytes + bytes <= POOL_MAX;
	if (keep) {
		*(void **)p = pool[k];
		pool[k] = p;
		pool_bytes += bytes;
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
