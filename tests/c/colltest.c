/*
 * colltest: every intercepted collective, checked against a reference that
 * each rank computes on its own (inputs are a known function of rank and
 * index), and summarised as one digest line per case so that a run with
 * collmux and one without can be compared byte for byte.
 *
 * Build with any mpicc; run under mpirun with 1-4 ranks. Exit status is
 * non-zero when any check fails on any rank.
 */
#define _GNU_SOURCE
#include <complex.h>
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

/* With -DCOLLTEST_CUDA every test buffer has a device mirror (cudaMalloc):
 * CALL copies all buffers to their mirrors, makes the MPI call with the
 * mirrors (D maps a host pointer into its mirror), and copies them back,
 * so the same checks and digests hold for device buffers. */
#ifdef COLLTEST_CUDA
#include "mirror.h"
#define CALL(x) (mirror_copy(1), (x), mirror_copy(0))
#define MALLOC(n) mirror_alloc(n)
#define CALLOC(k, n) mirror_alloc((size_t)(k) * (n))
#define FREE(p) mirror_free(p)
#define CHURN_ITERS 12 /* each new communicator sets up NCCL */
#else
#define D(p) (p)
#define CALL(x) (x)
#define MALLOC(n) malloc(n)
#define CALLOC(k, n) calloc((k), (n))
#define FREE(p) free(p)
#define CHURN_ITERS 300
#endif

/* ---- element types ---- */
enum { I8, U8, I16, U16, I32, U32, I64, U64, F32, F64, BOOL, NKIND };
static const char *kname[NKIND] = {"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float", "double", "bool"};
static MPI_Datatype ktype(int k)
{
	MPI_Datatype t[NKIND] = {MPI_INT8_T, MPI_UINT8_T, MPI_INT16_T, MPI_UINT16_T, MPI_INT, MPI_UNSIGNED, MPI_INT64_T, MPI_UINT64_T, MPI_FLOAT, MPI_DOUBLE, MPI_C_BOOL};
	return t[k];
}
static size_t ksize(int k)
{
	size_t s[NKIND] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 1};
	return s[k];
}
static int ksigned(int k) { return k == I8 || k == I16 || k == I32 || k == I64 || k == F32 || k == F64; }

static void set(int k, void *b, long i, long v)
{
	switch (k) {
	case I8: ((int8_t *)b)[i] = (int8_t)v; break;
	case U8: ((uint8_t *)b)[i] = (uint8_t)v; break;
	case I16: ((int16_t *)b)[i] = (int16_t)v; break;
	case U16: ((uint16_t *)b)[i] = (uint16_t)v; break;
	case I32: ((int32_t *)b)[i] = (int32_t)v; break;
	case U32: ((uint32_t *)b)[i] = (uint32_t)v; break;
	case I64: ((int64_t *)b)[i] = v; break;
	case U64: ((uint64_t *)b)[i] = (uint64_t)v; break;
	case F32: ((float *)b)[i] = (float)v; break;
	case F64: ((double *)b)[i] = (double)v; break;
	case BOOL: ((_Bool *)b)[i] = v != 0; break;
	}
}
static long get(int k, const void *b, long i)
{
	switch (k) {
	case I8: return ((const int8_t *)b)[i];
	case U8: return ((const uint8_t *)b)[i];
	case I16: return ((const int16_t *)b)[i];
	case U16: return ((const uint16_t *)b)[i];
	case I32: return ((const int32_t *)b)[i];
	case U32: return ((const uint32_t *)b)[i];
	case I64: return ((const int64_t *)b)[i];
	case U64: return (long)((const uint64_t *)b)[i];
	case F32: return (long)((const float *)b)[i];
	case F64: return (long)((const double *)b)[i];
	case BOOL: return ((const _Bool *)b)[i];
	}
	return 0;
}

/* ---- ops ---- */
enum { SUM, PROD, MIN, MAX, LAND, LOR, LXOR, BAND, BOR, BXOR, NOP };
static const char *oname[NOP] = {"sum", "prod", "min", "max", "land", "lor", "lxor", "band", "bor", "bxor"};
static MPI_Op otype(int o)
{
	MPI_Op t[NOP] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_LAND, MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};
	return t[o];
}
/* MPI-4.1 §6.9.2: which ops apply to which types */
static int valid(int o, int k)
{
	int fl = k == F32 || k == F64, b = k == BOOL;
	if (o <= MAX)
		return !b;
	if (o <= LXOR)
		return !fl;
	return !fl && !b;
}
/* input of rank r at index i: small enough that no op overflows any type */
static long input(int o, int k, int r, long i)
{
	if (k == BOOL || (o >= LAND && o <= LXOR))
		return ((r + i) % 3 == 0) ? 0 : (k == BOOL ? 1 : 2);
	if (o == PROD)
		return 1 + (r + i) % 2;
	if (o >= BAND)
		return (r * 5 + i) & 0x3f;
	long v = (r * 7 + i * 3) % 13;
	return ksigned(k) ? v - 6 : v;
}
static long apply(int o, long a, long b)
{
	switch (o) {
	case SUM: return a + b;
	case PROD: return a * b;
	case MIN: return a < b ? a : b;
	case MAX: return a > b ? a : b;
	case LAND: return a && b;
	case LOR: return a || b;
	case LXOR: return !a != !b;
	case BAND: return a & b;
	case BOR: return a | b;
	case BXOR: return a ^ b;
	}
	return 0;
}
/* reduction over ranks lo..hi-1 of the inputs at index i */
static long reduce_ref(int o, int k, int lo, int hi, long i)
{
	long acc = input(o, k, lo, i);
	for (int r = lo + 1; r < hi; r++)
		acc = apply(o, acc, input(o, k, r, i));
	return acc;
}

/* ---- reporting ---- */
/* Every rank's digest goes, in world rank order, through world rank 0 (with
 * PMPI, so reporting never counts as a tested call): the output of a run is
 * deterministic. Every test communicator spans all ranks. */
static void report(const char *name, const void *b, size_t n, MPI_Comm comm)
{
	(void)comm;
	report_line(name, 44, digest(b, n));
}

/* ---- reductions: allreduce, reduce, scan, exscan, reduce_scatter(_block) ---- */
static void test_reductions(MPI_Comm comm, const char *cname)
{
	int r, s;
	MPI_Comm_rank(comm, &r);
	MPI_Comm_size(comm, &s);
	const long counts[] = {0, 1, 7, 1000};
	char name[128];
	for (int k = 0; k < NKIND; k++)
		for (int o = 0; o < NOP; o++) {
			if (!valid(o, k))
				continue;
			for (unsigned ci = 0; ci < sizeof counts / sizeof *counts; ci++)
				for (int inplace = 0; inplace < 2; inplace++) {
					long n = counts[ci];
					size_t es = ksize(k);
					char *in = MALLOC(es * (size_t)(n * s + 1)), *out = MALLOC(es * (size_t)(n * s + 1));
					/* allreduce */
					for (long i = 0; i < n; i++)
						set(k, inplace ? out : in, i, input(o, k, r, i));
					CALL(MPI_Allreduce(D(inplace ? MPI_IN_PLACE : in), D(out), (int)n, ktype(k), otype(o), comm));
					for (long i = 0; i < n; i++)
						CHECK(get(k, out, i) == reduce_ref(o, k, 0, s, i), "%s allreduce %s %s n=%ld ip=%d i=%ld got %ld want %ld", cname, kname[k], oname[o], n, inplace, i, get(k, out, i), reduce_ref(o, k, 0, s, i));
					snprintf(name, sizeof name, "%s.allreduce.%s.%s.%ld%s", cname, kname[k], oname[o], n, inplace ? ".ip" : "");
					report(name, out, es * (size_t)n, comm);
					/* the other reductions on a representative subset */
					if (ci != 2 || !(k == I32 || k == F64 || k == U8 || k == BOOL))
						goto next;
					/* reduce to the last rank */
					int root = s - 1;
					for (long i = 0; i < n; i++)
						set(k, (inplace && r == root) ? out : in, i, input(o, k, r, i));
					CALL(MPI_Reduce(D((inplace && r == root) ? MPI_IN_PLACE : in), D(out), (int)n, ktype(k), otype(o), root, comm));
					if (r == root)
						for (long i = 0; i < n; i++)
							CHECK(get(k, out, i) == reduce_ref(o, k, 0, s, i), "%s reduce %s %s i=%ld", cname, kname[k], oname[o], i);
					/* scan and exscan */
					for (long i = 0; i < n; i++)
						set(k, inplace ? out : in, i, input(o, k, r, i));
					CALL(MPI_Scan(D(inplace ? MPI_IN_PLACE : in), D(out), (int)n, ktype(k), otype(o), comm));
					for (long i = 0; i < n; i++)
						CHECK(get(k, out, i) == reduce_ref(o, k, 0, r + 1, i), "%s scan %s %s i=%ld", cname, kname[k], oname[o], i);
					for (long i = 0; i < n; i++)
						set(k, inplace ? out : in, i, input(o, k, r, i));
					CALL(MPI_Exscan(D(inplace ? MPI_IN_PLACE : in), D(out), (int)n, ktype(k), otype(o), comm));
					if (r > 0)
						for (long i = 0; i < n; i++)
							CHECK(get(k, out, i) == reduce_ref(o, k, 0, r, i), "%s exscan %s %s i=%ld", cname, kname[k], oname[o], i);
					/* reduce_scatter_block: n elements per rank */
					for (long i = 0; i < n * s; i++)
						set(k, inplace ? out : in, i, input(o, k, r, i));
					CALL(MPI_Reduce_scatter_block(D(inplace ? MPI_IN_PLACE : in), D(out), (int)n, ktype(k), otype(o), comm));
					for (long i = 0; i < n; i++)
						CHECK(get(k, out, i) == reduce_ref(o, k, 0, s, r * n + i), "%s reduce_scatter_block %s %s i=%ld", cname, kname[k], oname[o], i);
					snprintf(name, sizeof name, "%s.rsb.%s.%s%s", cname, kname[k], oname[o], inplace ? ".ip" : "");
					report(name, out, es * (size_t)n, comm);
					/* reduce_scatter with uneven counts: rank j gets j+1 elements */
					{
						int *rc = MALLOC(sizeof(int) * (size_t)s), tot = 0, off = 0;
						for (int j = 0; j < s; j++) {
							rc[j] = j + 1;
							if (j < r)
								off += rc[j];
							tot += rc[j];
						}
						for (long i = 0; i < tot; i++)
							set(k, inplace ? out : in, i, input(o, k, r, i));
						CALL(MPI_Reduce_scatter(D(inplace ? MPI_IN_PLACE : in), D(out), rc, ktype(k), otype(o), comm));
						for (long i = 0; i < rc[r]; i++)
							CHECK(get(k, out, i) == reduce_ref(o, k, 0, s, off + i), "%s reduce_scatter %s %s i=%ld", cname, kname[k], oname[o], i);
						FREE(rc);
					}
				next:
					FREE(in);
					FREE(out);
				}
		}
}

/* MAXLOC / MINLOC on MPI_DOUBLE_INT */
static void test_loc(MPI_Comm comm)
{
	struct di {
		double v;
		int i;
	} *in = CALLOC(5, sizeof(struct di)), *out = CALLOC(5, sizeof(struct di)); /* zeroed: padding is part of the digest */
	for (int j = 0; j < 5; j++) {
		in[j].v = (double)((rank * 3 + j) % 4); /* ties resolve to the lowest index */
		in[j].i = rank;
	}
	CALL(MPI_Allreduce(D(in), D(out), 5, MPI_DOUBLE_INT, MPI_MAXLOC, comm));
	for (int j = 0; j < 5; j++) {
		double best = -1;
		int who = -1;
		for (int r = 0; r < size; r++)
			if ((double)((r * 3 + j) % 4) > best)
				best = (double)((r * 3 + j) % 4), who = r;
		CHECK(out[j].v == best && out[j].i == who, "maxloc j=%d got (%g,%d) want (%g,%d)", j, out[j].v, out[j].i, best, who);
	}
	report("world.allreduce.double_int.maxloc", out, 5 * sizeof *out, comm);
	CALL(MPI_Allreduce(D(in), D(out), 5, MPI_DOUBLE_INT, MPI_MINLOC, comm));
	report("world.allreduce.double_int.minloc", out, 5 * sizeof *out, comm);
	FREE(in), FREE(out);
}

/* Predefined ops on complex numbers, which device paths sum as parts and
 * leave the rest of to MPI (a product; a maximum, which MPI refuses, and a
 * derived type: errtest.c): the MPI's results, whatever memory holds the
 * buffers. */
static void test_other_types(MPI_Comm comm)
{
	enum { N = 5 };
	double _Complex *in = CALLOC(N, sizeof(double _Complex)), *out = CALLOC(N, sizeof(double _Complex));
	float _Complex *fin = CALLOC(N, sizeof(float _Complex)), *fout = CALLOC(N, sizeof(float _Complex));
	for (int j = 0; j < N; j++) /* small Gaussian integers: every sum and product exact */
		in[j] = (double)(1 + (rank + j) % 2) + (double)((rank * 3 + j) % 2) * 1.0i, fin[j] = (float _Complex)in[j];
	const MPI_Op ops[] = {MPI_SUM, MPI_PROD}; /* MPI_MAX, which MPI refuses: errtest.c */
	const char *names[] = {"sum", "prod"};
	char name[96];
	for (int o = 0; o < 2; o++) {
		memset(out, 0, N * sizeof *out);
		CALL(MPI_Allreduce(D(in), D(out), N, MPI_C_DOUBLE_COMPLEX, ops[o], comm));
		for (int j = 0; j < N; j++) {
			double _Complex want = o ? 1 : 0;
			for (int r = 0; r < size; r++) {
				const double _Complex x = (double)(1 + (r + j) % 2) + (double)((r * 3 + j) % 2) * 1.0i;
				want = o ? want * x : want + x;
			}
			CHECK(out[j] == want, "allreduce double complex %s j=%d", names[o], j);
		}
		snprintf(name, sizeof name, "world.allreduce.double_complex.%s", names[o]);
		report(name, out, N * sizeof *out, comm);
		memset(fout, 0, N * sizeof *fout);
		CALL(MPI_Reduce(D(fin), D(fout), N, MPI_C_FLOAT_COMPLEX, ops[o], size - 1, comm));
		snprintf(name, sizeof name, "world.reduce.float_complex.%s", names[o]);
		report(name, fout, N * sizeof *fout, comm);
	}
	/* the sums device paths run as sums of parts: in place, scan,
	 * reduce_scatter_block, local; reduce_scatter's count array keeps it
	 * complex (nonblocking: colltest makes blocking calls only) */
	double _Complex *big = CALLOC(2 * (size_t)size, sizeof(double _Complex)), *blk = CALLOC(2, sizeof(double _Complex));
	int *rcnt = MALLOC(sizeof(int) * (size_t)size);
	for (int j = 0; j < 2 * size; j++)
		big[j] = (double)(rank + j) - (double)j * 0.5i;
	for (int j = 0; j < size; j++)
		rcnt[j] = 2;
	memcpy(out, in, N * sizeof *out);
	CALL(MPI_Allreduce(MPI_IN_PLACE, D(out), N, MPI_C_DOUBLE_COMPLEX, MPI_SUM, comm));
	report("world.allreduce.double_complex.sum.ip", out, N * sizeof *out, comm);
	CALL(MPI_Scan(D(fin), D(fout), N, MPI_C_FLOAT_COMPLEX, MPI_SUM, comm));
	report("world.scan.float_complex.sum", fout, N * sizeof *fout, comm);
	CALL(MPI_Reduce_scatter_block(D(big), D(blk), 2, MPI_C_DOUBLE_COMPLEX, MPI_SUM, comm));
	report("world.rsb.double_complex.sum", blk, 2 * sizeof *blk, comm);
	CALL(MPI_Reduce_scatter(D(big), D(blk), rcnt, MPI_C_DOUBLE_COMPLEX, MPI_SUM, comm));
	report("world.rs.double_complex.sum", blk, 2 * sizeof *blk, comm);
	memcpy(out, in, N * sizeof *out);
	CALL(MPI_Reduce_local(D(in), D(out), N, MPI_C_DOUBLE_COMPLEX, MPI_SUM));
	CALL(MPI_Reduce_local(D(in), D(out), N, MPI_C_DOUBLE_COMPLEX, MPI_PROD));
	for (int j = 0; j < N; j++)
		CHECK(out[j] == 2 * in[j] * in[j], "reduce_local double complex sum, prod j=%d", j);
	report("world.reduce_local.double_complex.sum.prod", out, N * sizeof *out, comm);
	FREE(big), FREE(blk), FREE(rcnt);
	/* a predefined type collmux does not know: MPI's sum of host copies */
	long double _Complex *lin = CALLOC(N, sizeof(long double _Complex)), *lout = CALLOC(N, sizeof(long double _Complex));
	for (int j = 0; j < N; j++)
		lin[j] = (long double)(rank + j) + (long double)j * 1.0i;
	CALL(MPI_Allreduce(D(lin), D(lout), N, MPI_C_LONG_DOUBLE_COMPLEX, MPI_SUM, comm));
	for (int j = 0; j < N; j++)
		CHECK(creall(lout[j]) == (long double)(size * (size - 1) / 2 + size * j) && cimagl(lout[j]) == (long double)(size * j),
		      "allreduce long double complex sum j=%d", j);
	FREE(lin), FREE(lout);
	FREE(in), FREE(out), FREE(fin), FREE(fout);
}

/* A user-defined, non-commutative op: 2x2 integer matrix product mod 1009.
 * MPI must apply it in rank order. */
static void matmul(void *inv, void *inoutv, int *len, MPI_Datatype *dt)
{
	(void)dt;
	long *a = inv, *b = inoutv;
	for (int k = 0; k < *len; k++, a += 4, b += 4) {
		long c[4] = {(a[0] * b[0] + a[1] * b[2]) % 1009, (a[0] * b[1] + a[1] * b[3]) % 1009,
			     (a[2] * b[0] + a[3] * b[2]) % 1009, (a[2] * b[1] + a[3] * b[3]) % 1009};
		memcpy(b, c, sizeof c);
	}
}
static void mat_of(int r, long m[4]) { m[0] = r + 1, m[1] = 2, m[2] = r, m[3] = 1; }

static void test_user_op(MPI_Comm comm)
{
	MPI_Datatype mat;
	MPI_Op op;
	MPI_Type_contiguous(4, MPI_LONG, &mat);
	MPI_Type_commit(&mat);
	MPI_Op_create(matmul, 0, &op);
	long *in = CALLOC(4, sizeof(long)), *out = CALLOC(4, sizeof(long)), want[4], m[4];
	mat_of(rank, in);
	CALL(MPI_Allreduce(D(in), D(out), 1, mat, op, comm));
	mat_of(0, want);
	for (int r = 1; r < size; r++) {
		int one = 1;
		mat_of(r, m);
		matmul(want, m, &one, NULL); /* m = want * m */
		memcpy(want, m, sizeof m);
	}
	CHECK(memcmp(out, want, sizeof want) == 0, "user op allreduce got [%ld %ld %ld %ld] want [%ld %ld %ld %ld]", out[0], out[1], out[2], out[3], want[0], want[1], want[2], want[3]);
	report("world.allreduce.user_noncommutative", out, sizeof want, comm);
	CALL(MPI_Scan(D(in), D(out), 1, mat, op, comm));
	report("world.scan.user_noncommutative", out, sizeof want, comm);
	CALL(MPI_Reduce(D(in), D(out), 1, mat, op, 0, comm));
	if (rank == 0)
		CHECK(memcmp(out, want, sizeof want) == 0, "user op reduce");
	FREE(in), FREE(out);
	MPI_Op_free(&op);
	MPI_Type_free(&mat);
}

/* ---- data movement: bcast, (all)gather(v), scatter(v), alltoall(v) ---- */
static int val(int r, int i) { return r * 1000 + i; }

static void test_movement(MPI_Comm comm, const char *cname)
{
	int r, s;
	MPI_Comm_rank(comm, &r);
	MPI_Comm_size(comm, &s);
	char name[128];
	const int counts[] = {0, 1, 5, 300};
	MPI_Datatype strided; /* every other int: a non-contiguous derived type */
	for (unsigned ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
		int n = counts[ci], root = s > 1 ? 1 : 0;
		int *sb = CALLOC((size_t)(2 * n * s + 2), sizeof(int)), *rb = CALLOC((size_t)(2 * n * s + 2), sizeof(int));
		int *cnt = MALLOC(sizeof(int) * (size_t)s), *dsp = MALLOC(sizeof(int) * (size_t)s);
		MPI_Type_vector(n > 0 ? n : 1, 1, 2, MPI_INT, &strided);
		MPI_Type_commit(&strided);
		for (int ip = 0; ip < 2; ip++) {
			/* bcast */
			for (int i = 0; i < n; i++)
				rb[i] = r == root ? val(root, i) : -1;
			CALL(MPI_Bcast(D(rb), n, MPI_INT, root, comm));
			for (int i = 0; i < n; i++)
				CHECK(rb[i] == val(root, i), "%s bcast n=%d i=%d", cname, n, i);
			/* allgather */
			for (int i = 0; i < n * s; i++)
				rb[i] = -1;
			for (int i = 0; i < n; i++)
				(ip ? rb + r * n : sb)[i] = val(r, i);
			CALL(MPI_Allgather(D(ip ? MPI_IN_PLACE : sb), n, MPI_INT, D(rb), n, MPI_INT, comm));
			for (int j = 0; j < s; j++)
				for (int i = 0; i < n; i++)
					CHECK(rb[j * n + i] == val(j, i), "%s allgather n=%d ip=%d j=%d i=%d got %d", cname, n, ip, j, i, rb[j * n + i]);
			snprintf(name, sizeof name, "%s.allgather.%d%s", cname, n, ip ? ".ip" : "");
			report(name, rb, sizeof(int) * (size_t)(n * s), comm);
			/* allgatherv: rank j contributes (n + j) % (n + 1) elements, placed in reverse order */
			int tot = 0;
			for (int j = s - 1; j >= 0; j--) {
				cnt[j] = (n + j) % (n + 1);
				dsp[j] = tot;
				tot += cnt[j];
			}
			for (int i = 0; i < tot; i++)
				rb[i] = -1;
			for (int i = 0; i < cnt[r]; i++)
				(ip ? rb + dsp[r] : sb)[i] = val(r, i);
			CALL(MPI_Allgatherv(D(ip ? MPI_IN_PLACE : sb), cnt[r], MPI_INT, D(rb), cnt, dsp, MPI_INT, comm));
			for (int j = 0; j < s; j++)
				for (int i = 0; i < cnt[j]; i++)
					CHECK(rb[dsp[j] + i] == val(j, i), "%s allgatherv n=%d ip=%d j=%d i=%d", cname, n, ip, j, i);
			snprintf(name, sizeof name, "%s.allgatherv.%d%s", cname, n, ip ? ".ip" : "");
			report(name, rb, sizeof(int) * (size_t)tot, comm);
			/* gather and gatherv to root */
			for (int i = 0; i < n * s; i++)
				rb[i] = -1;
			for (int i = 0; i < n; i++)
				((ip && r == root) ? rb + r * n : sb)[i] = val(r, i);
			CALL(MPI_Gather(D((ip && r == root) ? MPI_IN_PLACE : sb), n, MPI_INT, D(rb), n, MPI_INT, root, comm));
			if (r == root)
				for (int j = 0; j < s; j++)
					for (int i = 0; i < n; i++)
						CHECK(rb[j * n + i] == val(j, i), "%s gather n=%d ip=%d j=%d i=%d", cname, n, ip, j, i);
			for (int i = 0; i < tot; i++)
				rb[i] = -1;
			for (int i = 0; i < cnt[r]; i++)
				((ip && r == root) ? rb + dsp[r] : sb)[i] = val(r, i);
			CALL(MPI_Gatherv(D((ip && r == root) ? MPI_IN_PLACE : sb), cnt[r], MPI_INT, D(rb), cnt, dsp, MPI_INT, root, comm));
			if (r == root)
				for (int j = 0; j < s; j++)
					for (int i = 0; i < cnt[j]; i++)
						CHECK(rb[dsp[j] + i] == val(j, i), "%s gatherv n=%d ip=%d j=%d i=%d", cname, n, ip, j, i);
			snprintf(name, sizeof name, "%s.gatherv.%d%s", cname, n, ip ? ".ip" : "");
			report(name, rb, r == root ? sizeof(int) * (size_t)tot : 0, comm);
			/* scatter and scatterv from root */
			for (int j = 0; j < s; j++)
				for (int i = 0; i < n; i++)
					sb[j * n + i] = r == root ? val(j, i) : -1;
			for (int i = 0; i < n; i++)
				rb[i] = -1;
			CALL(MPI_Scatter(D(sb), n, MPI_INT, D((ip && r == root) ? MPI_IN_PLACE : rb), n, MPI_INT, root, comm));
			if (!(ip && r == root))
				for (int i = 0; i < n; i++)
					CHECK(rb[i] == val(r, i), "%s scatter n=%d ip=%d i=%d got %d", cname, n, ip, i, rb[i]);
			for (int j = 0; j < s; j++)
				for (int i = 0; i < cnt[j]; i++)
					sb[dsp[j] + i] = r == root ? val(j, i) : -1;
			for (int i = 0; i < cnt[r]; i++)
				rb[i] = -1;
			CALL(MPI_Scatterv(D(sb), cnt, dsp, MPI_INT, D((ip && r == root) ? MPI_IN_PLACE : rb), cnt[r], MPI_INT, root, comm));
			if (!(ip && r == root))
				for (int i = 0; i < cnt[r]; i++)
					CHECK(rb[i] == val(r, i), "%s scatterv n=%d ip=%d i=%d", cname, n, ip, i);
			/* alltoall: block j of rank r carries val(r, j*n+i) */
			for (int j = 0; j < s; j++)
				for (int i = 0; i < n; i++)
					(ip ? rb : sb)[j * n + i] = val(r, j * n + i);
			CALL(MPI_Alltoall(D(ip ? MPI_IN_PLACE : sb), n, MPI_INT, D(rb), n, MPI_INT, comm));
			for (int j = 0; j < s; j++)
				for (int i = 0; i < n; i++)
					CHECK(rb[j * n + i] == val(j, r * n + i), "%s alltoall n=%d ip=%d j=%d i=%d", cname, n, ip, j, i);
			snprintf(name, sizeof name, "%s.alltoall.%d%s", cname, n, ip ? ".ip" : "");
			report(name, rb, sizeof(int) * (size_t)(n * s), comm);
			/* alltoallv: rank r sends (r + j) % (n + 1) elements to rank j */
			{
				int *sc = MALLOC(sizeof(int) * (size_t)s), *sd = MALLOC(sizeof(int) * (size_t)s);
				int *rc = MALLOC(sizeof(int) * (size_t)s), *rd = MALLOC(sizeof(int) * (size_t)s);
				int so = 0, ro = 0;
				for (int j = 0; j < s; j++) {
					sc[j] = (r + j) % (n + 1), sd[j] = so, so += sc[j];
					rc[j] = (j + r) % (n + 1), rd[j] = ro, ro += rc[j];
				}
				/* in place, the send layout must equal the receive layout */
				for (int j = 0; j < s; j++)
					for (int i = 0; i < (ip ? rc[j] : sc[j]); i++)
						(ip ? rb + rd[j] : sb + sd[j])[i] = val(r, j * 100 + i);
				CALL(MPI_Alltoallv(D(ip ? MPI_IN_PLACE : sb), sc, sd, MPI_INT, D(rb), rc, rd, MPI_INT, comm));
				for (int j = 0; j < s; j++)
					for (int i = 0; i < rc[j]; i++)
						CHECK(rb[rd[j] + i] == val(j, r * 100 + i), "%s alltoallv n=%d ip=%d j=%d i=%d", cname, n, ip, j, i);
				snprintf(name, sizeof name, "%s.alltoallv.%d%s", cname, n, ip ? ".ip" : "");
				report(name, rb, sizeof(int) * (size_t)ro, comm);
				FREE(sc), FREE(sd), FREE(rc), FREE(rd);
			}
		}
		/* non-contiguous: send every other int, receive contiguous */
		if (n == 0)
			goto done;
		for (int i = 0; i < 2 * n; i++)
			sb[i] = (i % 2) ? -7 : val(r, i / 2);
		CALL(MPI_Allgather(D(sb), 1, strided, D(rb), n, MPI_INT, comm));
		for (int j = 0; j < s; j++)
			for (int i = 0; i < n; i++)
				CHECK(rb[j * n + i] == val(j, i), "%s allgather strided n=%d j=%d i=%d", cname, n, j, i);
		snprintf(name, sizeof name, "%s.allgather.strided.%d", cname, n);
		report(name, rb, sizeof(int) * (size_t)(n * s), comm);
		for (int i = 0; i < 2 * n; i++)
			sb[i] = r == root ? ((i % 2) ? -7 : val(root, i / 2)) : -1;
		CALL(MPI_Bcast(D(sb), 1, strided, root, comm));
		for (int i = 0; i < n; i++)
			CHECK(sb[2 * i] == val(root, i) && (r == root || sb[2 * i + 1] == -1), "%s bcast strided n=%d i=%d", cname, n, i);
	done:
		MPI_Type_free(&strided);
		FREE(sb), FREE(rb), FREE(cnt), FREE(dsp);
	}
	MPI_Barrier(comm);
}

/* A type of n ints at p's absolute address, for buffers of MPI_BOTTOM. */
static MPI_Datatype at_address(void *p, int n)
{
	MPI_Aint addr;
	MPI_Datatype t;
	MPI_Get_address(p, &addr);
	MPI_Type_create_struct(1, &n, &addr, (MPI_Datatype[]){MPI_INT}, &t);
	MPI_Type_commit(&t);
	return t;
}

/* Buffers given as MPI_BOTTOM, the data where the datatypes' absolute
 * addresses put it (mpi4py's *Bottom tests): all-to-all-w, bcast, and a
 * point-to-point ring. */
static void test_bottom(MPI_Comm comm)
{
	enum { K = 2 };
	int *sb = CALLOC(K * (size_t)size, sizeof(int)), *rb = CALLOC(K * (size_t)size, sizeof(int));
	int *cnt = malloc(sizeof(int) * (size_t)size), *dsp = malloc(sizeof(int) * (size_t)size);
	MPI_Datatype *st = malloc(sizeof(MPI_Datatype) * (size_t)size), *rt = malloc(sizeof(MPI_Datatype) * (size_t)size);
	for (int j = 0; j < size; j++) {
		cnt[j] = 1, dsp[j] = 0;
		st[j] = at_address(D(&sb[K * j]), K), rt[j] = at_address(D(&rb[K * j]), K);
	}
	for (int j = 0; j < K * size; j++)
		sb[j] = val(rank, j), rb[j] = -1;
	CALL(MPI_Alltoallw(MPI_BOTTOM, cnt, dsp, st, MPI_BOTTOM, cnt, dsp, rt, comm));
	for (int j = 0; j < size; j++)
		for (int i = 0; i < K; i++)
			CHECK(rb[K * j + i] == val(j, K * rank + i), "alltoallw MPI_BOTTOM: block %d element %d: %d", j, i, rb[K * j + i]);
	report("world.alltoallw.bottom", rb, sizeof(int) * K * (size_t)size, comm);
	for (int j = 0; j < K * size; j++)
		rb[j] = rank == size - 1 ? val(9, j) : -1;
	MPI_Datatype all = at_address(D(rb), K * size);
	CALL(MPI_Bcast(MPI_BOTTOM, 1, all, size - 1, comm));
	for (int j = 0; j < K * size; j++)
		CHECK(rb[j] == val(9, j), "bcast MPI_BOTTOM: element %d: %d", j, rb[j]);
	const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
	for (int j = 0; j < K * size; j++)
		sb[j] = val(rank, j), rb[j] = -1;
	CALL(MPI_Sendrecv(MPI_BOTTOM, 1, st[0], next, 7, MPI_BOTTOM, 1, rt[0], prev, 7, comm, MPI_STATUS_IGNORE));
	for (int i = 0; i < K; i++)
		CHECK(rb[i] == val(prev, i), "sendrecv MPI_BOTTOM: element %d: %d", i, rb[i]);
	report("world.sendrecv.bottom", rb, sizeof(int) * K * (size_t)size, comm);
	for (int j = 0; j < size; j++)
		MPI_Type_free(&st[j]), MPI_Type_free(&rt[j]);
	MPI_Type_free(&all);
	free(cnt), free(dsp), free(st), free(rt);
	FREE(sb), FREE(rb);
}

/* Where ranks' buffers differ in what MPI lets them pass: MPI_IN_PLACE as
 * the receive buffer of a reduce and a gather off the root, where it is
 * not significant; and calls that move nothing, where rank 0 passes NULL
 * (an empty tensor's pointer) and the others their buffers. Every rank
 * must still take the same path. */
static void test_leaf_buffers(MPI_Comm comm)
{
	enum { K = 3 };
	const int root = size - 1;
	int *sb = CALLOC(K, sizeof(int)), *rb = CALLOC(K * (size_t)size, sizeof(int));
	for (int i = 0; i < K; i++)
		sb[i] = val(rank, i);
	for (int i = 0; i < K * size; i++)
		rb[i] = -1;
	CALL(MPI_Reduce(D(sb), rank == root ? D(rb) : MPI_IN_PLACE, K, MPI_INT, MPI_SUM, root, comm));
	for (int i = 0; rank == root && i < K; i++)
		CHECK(rb[i] == size * (size - 1) / 2 * 1000 + size * i, "reduce, leaves' receive buffer MPI_IN_PLACE: element %d: %d", i, rb[i]);
	CALL(MPI_Gather(D(sb), K, MPI_INT, rank == root ? D(rb) : MPI_IN_PLACE, K, MPI_INT, root, comm));
	for (int i = 0; rank == root && i < K * size; i++)
		CHECK(rb[i] == val(i / K, i % K), "gather, leaves' receive buffer MPI_IN_PLACE: element %d: %d", i, rb[i]);
	report("world.gather.leaf-inplace", rb, sizeof(int) * K * (size_t)size, comm);
	void *s0 = rank == 0 ? NULL : D(sb), *r0 = rank == 0 ? NULL : D(rb);
	CALL(MPI_Allreduce(s0, r0, 0, MPI_INT, MPI_SUM, comm));
	CALL(MPI_Bcast(r0, 0, MPI_INT, root, comm));
	CALL(MPI_Allgather(s0, 0, MPI_INT, r0, 0, MPI_INT, comm));
	CHECK(rb[0] == (rank == root ? val(0, 0) : -1), "calls of no bytes changed the buffer: %d", rb[0]);
	FREE(sb), FREE(rb);
}

/* Communicators made and freed in a loop: collmux's per-communicator state
 * must go with them (collmux_comm_states, when collmux is loaded). */
static void test_comm_churn(void)
{
	int (*states)(void) = NULL;
	*(void **)&states = dlsym(RTLD_DEFAULT, "collmux_comm_states");
	int before = states ? states() : 0;
	int *xy = CALLOC(2, sizeof(int));
	for (int it = 0; it < CHURN_ITERS; it++) {
		MPI_Comm c;
		if (it % 2)
			MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &c);
		else
			MPI_Comm_dup(MPI_COMM_WORLD, &c);
		xy[0] = rank + it, xy[1] = 0;
		CALL(MPI_Allreduce(D(&xy[0]), D(&xy[1]), 1, MPI_INT, MPI_SUM, c));
		int want = 0;
		for (int r = 0; r < size; r++)
			if (it % 2 == 0 || r % 2 == rank % 2)
				want += r + it;
		CHECK(xy[1] == want, "churn it=%d got %d want %d", it, xy[1], want);
		MPI_Comm_free(&c);
	}
	FREE(xy);
	if (states)
		CHECK(states() == before, "collmux per-communicator states leaked: %d before, %d after", before, states());
}

int main(int argc, char **argv)
{
#ifdef COLLTEST_CUDA
	gpu_select(); /* one GPU per rank of a node, before MPI and NCCL start */
#endif
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);

	test_reductions(MPI_COMM_WORLD, "world");
	test_loc(MPI_COMM_WORLD);
	test_other_types(MPI_COMM_WORLD);
	test_user_op(MPI_COMM_WORLD);
	test_movement(MPI_COMM_WORLD, "world");
	test_bottom(MPI_COMM_WORLD);
	test_leaf_buffers(MPI_COMM_WORLD);

	/* a sub-communicator in reverse rank order */
	MPI_Comm rev;
	MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &rev);
	test_movement(rev, "rev");
	test_reductions(rev, "rev");
	MPI_Comm_free(&rev);

	test_comm_churn();

#if MPI_VERSION >= 4
	{ /* large-count twins */
		MPI_Count n = 3;
		long *in = CALLOC(3, sizeof(long)), *out = CALLOC(3, sizeof(long));
		for (int i = 0; i < 3; i++)
			in[i] = rank + i;
		CALL(MPI_Allreduce_c(D(in), D(out), n, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
		for (int i = 0; i < 3; i++)
			CHECK(out[i] == (long)size * (size - 1) / 2 + (long)i * size, "allreduce_c i=%d", i);
		MPI_Count *c = MALLOC(sizeof(MPI_Count) * (size_t)size);
		MPI_Aint *d = MALLOC(sizeof(MPI_Aint) * (size_t)size);
		long *sb = MALLOC(sizeof(long) * (size_t)size), *rb = MALLOC(sizeof(long) * (size_t)size);
		for (int j = 0; j < size; j++)
			c[j] = 1, d[j] = j, sb[j] = rank * 10 + j;
		CALL(MPI_Alltoallv_c(D(sb), c, d, MPI_LONG, D(rb), c, d, MPI_LONG, MPI_COMM_WORLD));
		for (int j = 0; j < size; j++)
			CHECK(rb[j] == j * 10 + rank, "alltoallv_c j=%d", j);
		FREE(c), FREE(d), FREE(sb), FREE(rb), FREE(in), FREE(out);
	}
#endif

	int total = 0;
	PMPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("colltest: %d ranks, %d failures\n", size, total);
	MPI_Finalize();
	return total != 0;
}
