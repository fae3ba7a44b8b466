/*
 * chartest: reductions on MPI_CHAR, which the standard does not let any
 * reduction take but MPIs do (OSU's micro-benchmarks reduce it by
 * default), and on the 8- and 16-bit integers: allreduce, reduce and
 * reduce_scatter_block with sum, prod, min and max. Inputs keep clear of
 * two bugs of the MPIs here, where collmux's GPU paths compute as C does:
 * sums and products stay in range (Open MPI 4.1.4 saturates 8- and 16-bit
 * sums of 16 or more elements instead of wrapping them), and unsigned
 * values to compare stay below the sign bit (MPICH 4.0.2 compares 8- and
 * 16-bit unsigned integers as signed); the signed types and MPI_CHAR are
 * compared over every bit pattern. Rank 0 prints every result, so that a run on
 * device buffers under collmux and one on host buffers without it compare
 * byte for byte. MPI_WCHAR, which the MPIs here do not reduce, prints the
 * error class the MPI returns.
 *
 * usage: chartest [TYPE]: with a type name, one allreduce (sum) of that
 * type alone, for a routing decision to be read.
 *
 * With -DCOLLTEST_CUDA the buffers the calls get are device memory
 * (cudaMalloc), filled and read back with cudaMemcpy.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef COLLTEST_CUDA
#include "../gpu/gpu_common.h"
static void *buf(size_t n)
{
	void *p = NULL;
	CUDA_OK(cudaMalloc(&p, n));
	return p;
}
static void put(void *d, const void *h, size_t n) { CUDA_OK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice)); }
static void take(void *h, const void *d, size_t n) { CUDA_OK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost)); }
static void unbuf(void *p) { cudaFree(p); }
#else
static void *buf(size_t n) { return malloc(n); }
static void put(void *d, const void *h, size_t n) { memcpy(d, h, n); }
static void take(void *h, const void *d, size_t n) { memcpy(h, d, n); }
static void unbuf(void *p) { free(p); }
#endif

#include "testlib.h"

static const struct {
	const char *name;
	MPI_Datatype type;
	int bytes, unsign;
} types[] = {
	{"MPI_CHAR", MPI_CHAR, 1, 0},
	{"MPI_SIGNED_CHAR", MPI_SIGNED_CHAR, 1, 0},
	{"MPI_UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, 1, 1},
	{"MPI_INT8_T", MPI_INT8_T, 1, 0},
	{"MPI_UINT8_T", MPI_UINT8_T, 1, 1},
	{"MPI_SHORT", MPI_SHORT, 2, 0},
	{"MPI_UNSIGNED_SHORT", MPI_UNSIGNED_SHORT, 2, 1},
	{"MPI_INT16_T", MPI_INT16_T, 2, 0},
	{"MPI_UINT16_T", MPI_UINT16_T, 2, 1},
	{"MPI_WCHAR", MPI_WCHAR, 4, 0},
};
enum { NTYPES = sizeof types / sizeof types[0] };
static const struct {
	const char *name;
	MPI_Op op;
} ops[] = {{"sum", MPI_SUM}, {"prod", MPI_PROD}, {"min", MPI_MIN}, {"max", MPI_MAX}};

/* rank r's input of n elements of types[t] (little-endian), for op o:
 * 0..30 to sum and 1..2 to multiply (at most 4 ranks stay in range), any
 * bit pattern to compare (below the sign bit where unsigned) */
static void input(unsigned char *h, size_t n, int t, int o, int r)
{
	const int bytes = types[t].bytes;
	memset(h, 0, n * (size_t)bytes);
	for (size_t i = 0; i < n; i++)
		for (int b = 0; b < bytes; b++)
			if (o >= 2)
				h[i * bytes + b] = (unsigned char)(r * 101 + i * 37 + b * 59 + (i % 3 ? 0x80 : 0)) &
						   (types[t].unsign && b == bytes - 1 ? 0x7f : 0xff);
			else if (b == 0)
				h[i * bytes] = (unsigned char)(o == 0 ? (r * 7 + i * 3) % 31 : 1 + (r + i) % 2);
}

/* rank 0 prints n bytes (and every rank's when gathered), in hex */
static void print(const char *what, const unsigned char *h, size_t n, int rc)
{
	if (rank != 0)
		return;
	if (rc != MPI_SUCCESS) {
		int cls = 0;
		MPI_Error_class(rc, &cls);
		printf("%s: error class %d\n", what, cls);
		return;
	}
	printf("%s:", what);
	for (size_t i = 0; i < n; i++)
		printf("%s%02x", i % 32 ? "" : " ", h[i]);
	printf("\n");
}

/* one reduction of count elements of types[t] with ops[o] */
static void reduction(int t, int o, int count, const char *coll)
{
	const size_t n = (size_t)count * types[t].bytes, all = n * (size_t)size;
	unsigned char *h = calloc(all, 1);
	void *in = buf(all), *out = buf(all);
	input(h, (size_t)count * (size_t)size, t, o, rank);
	put(in, h, all);
	memset(h, 0, all);
	put(out, h, all);
	int rc;
	if (strcmp(coll, "allreduce") == 0)
		rc = MPI_Allreduce(in, out, count, types[t].type, ops[o].op, MPI_COMM_WORLD);
	else if (strcmp(coll, "reduce") == 0)
		rc = MPI_Reduce(in, out, count, types[t].type, ops[o].op, 0, MPI_COMM_WORLD);
	else /* every rank's block, gathered to rank 0 */
		rc = MPI_Reduce_scatter_block(in, out, count, types[t].type, ops[o].op, MPI_COMM_WORLD);
	take(h, out, n);
	if (strcmp(coll, "reduce_scatter_block") == 0 && rc == MPI_SUCCESS) {
		unsigned char *g = calloc(all, 1);
		PMPI_Gather(h, (int)n, MPI_BYTE, g, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
		free(h);
		h = g;
	}
	char what[96];
	snprintf(what, sizeof what, "%s %s %s n=%d", coll, types[t].name, ops[o].name, count);
	print(what, h, strcmp(coll, "reduce_scatter_block") == 0 ? all : n, rc);
	unbuf(in);
	unbuf(out);
	free(h);
}

int main(int argc, char **argv)
{
#ifdef COLLTEST_CUDA
	gpu_select();
#endif
	test_init(&argc, &argv, 0, 1); /* errors return: a reduction the MPI refuses (MPI_WCHAR) returns its error */
	const char *colls[] = {"allreduce", "reduce", "reduce_scatter_block"};
	const int counts[] = {1, 7, 16, 1000};
	for (int t = 0; t < NTYPES; t++) {
		if (argc > 1 && strcmp(argv[1], types[t].name) != 0)
			continue;
		for (int c = 0; c < 3; c++)
			for (int o = 0; o < 4; o++)
				for (int k = 0; k < 4; k++)
					if (argc == 1 || (c == 0 && o == 0 && k == 2))
						reduction(t, o, counts[k], colls[c]);
	}
	if (rank == 0)
		printf("chartest: %d ranks\n", size);
	MPI_Finalize();
	return 0;
}
