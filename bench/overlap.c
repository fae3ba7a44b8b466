/*
 * overlap: what a collective and a GEMM cost each other when they share
 * the GPU (issue 19; the method of the second paper behind collmux). On
 * each rank (one GPU each), for each collective and size:
 *   gemm alone      G bf16 GEMMs (M=N=K=8192, cuBLAS) on a side stream
 *   coll alone      the MPI collective on device buffers in a loop
 *   together        the G GEMMs queued, then the collective in a loop on
 *                   the host thread until rank 0's GEMMs are done
 * and reports the GEMMs' slowdown, the collective's (per call, against
 * alone) and the energy of the collective alone (NVML's total-energy
 * counter, J and J/GB of the message). The path is whatever collmux picks
 * under the environment the run gets (COLLMUX_RULES, COLLMUX_OVERLAP);
 * the first argument names it in the output. Rank 0 prints CSV:
 *   coll,path,bytes,rank,gemm_ms,gemm_together_ms,gemm_slowdown,
 *   coll_us,coll_together_us,coll_slowdown,calls_together,coll_J,J_per_GB
 *
 * usage: overlap PATH [max_bytes [coll,coll,...]]
 * build: mpicc -O2 -I$CUDA/include -o overlap bench/overlap.c -L$CUDA/lib64 -lcudart -ldl
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <string.h>

#include "../tests/gpu/gpu_common.h"

enum { G = 40, DIM = 8192 };
static int rank, size;

/* cuBLAS and NVML, loaded as collmux loads them */
static struct {
	int (*create)(void **);
	int (*set_stream)(void *, cudaStream_t);
	int (*gemm)(void *, int, int, int, int, int, const void *, const void *, int, int, const void *, int, int, const void *, void *,
		    int, int, int, int);
	int (*nvml_init)(void);
	int (*nvml_handle)(unsigned, void **);
	int (*energy)(void *, unsigned long long *);
} lib;
static void *blas, *nvdev;

static void load(void)
{
	void *b = dlopen("libcublas.so.13", RTLD_NOW);
	if (!b)
		b = dlopen("libcublas.so.12", RTLD_NOW);
	void *n = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	if (!b || !n) {
		fprintf(stderr, "overlap: needs cuBLAS and NVML\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	*(void **)&lib.create = dlsym(b, "cublasCreate_v2");
	*(void **)&lib.set_stream = dlsym(b, "cublasSetStream_v2");
	*(void **)&lib.gemm = dlsym(b, "cublasGemmEx");
	*(void **)&lib.nvml_init = dlsym(n, "nvmlInit_v2");
	*(void **)&lib.nvml_handle = dlsym(n, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&lib.energy = dlsym(n, "nvmlDeviceGetTotalEnergyConsumption");
	lib.create(&blas);
	int dev = 0;
	cudaGetDevice(&dev);
	/* NVML numbers devices as the driver does; CUDA_VISIBLE_DEVICES is unset on the machine */
	if (lib.nvml_init() != 0 || lib.nvml_handle((unsigned)dev, &nvdev) != 0)
		nvdev = NULL;
}

static double joules(void)
{
	unsigned long long mj = 0;
	return nvdev && lib.energy(nvdev, &mj) == 0 ? (double)mj / 1e3 : 0;
}

static cudaStream_t gs;
static void *A, *B, *C;
static cudaEvent_t g0, g1;

static void gemms(void)
{
	enum { OP_N = 0, R_16BF = 14, COMPUTE_32F = 68, GEMM_DEFAULT = -1 };
	const float one = 1, zero = 0;
	cudaEventRecord(g0, gs);
	for (int i = 0; i < G; i++)
		lib.gemm(blas, OP_N, OP_N, DIM, DIM, DIM, &one, A, R_16BF, DIM, B, R_16BF, DIM, &zero, C, R_16BF, DIM, COMPUTE_32F, GEMM_DEFAULT);
	cudaEventRecord(g1, gs);
}

static double gemm_ms(void)
{
	float ms = 0;
	cudaEventSynchronize(g1);
	cudaEventElapsedTime(&ms, g0, g1);
	return ms;
}

/* BCAST: the copy path's pure peer pull (no local copy); LOCAL and
 * LOCAL2D: a device-to-device copy within the GPU (cudaMemcpyAsync,
 * cudaMemcpy2DAsync) on a stream of its own, no MPI: where the copy
 * engines run beside the GEMMs and where they wait for them */
enum { ALLREDUCE, ALLGATHER, ALLTOALL, REDUCE_SCATTER, BCAST, LOCAL, LOCAL2D, LOCALBATCH, NCOLL };
static const char *names[NCOLL] = {"allreduce", "allgather", "alltoall", "reduce_scatter", "bcast", "local", "local2d", "localbatch"};
static cudaStream_t cs;

/* bytes: the whole receive buffer, as nccl-tests counts it */
static void coll(int c, float *s, float *r, size_t bytes)
{
	const int n = (int)(bytes / 4), per = n / size;
	switch (c) {
	case ALLREDUCE: MPI_Allreduce(s, r, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
	case ALLGATHER: MPI_Allgather(s, per, MPI_FLOAT, r, per, MPI_FLOAT, MPI_COMM_WORLD); break;
	case ALLTOALL: MPI_Alltoall(s, per, MPI_FLOAT, r, per, MPI_FLOAT, MPI_COMM_WORLD); break;
	case REDUCE_SCATTER: MPI_Reduce_scatter_block(s, r, per, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
	case BCAST: MPI_Bcast(r, n, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
	case LOCAL: cudaMemcpyAsync(r, s, bytes, cudaMemcpyDeviceToDevice, cs), cudaStreamSynchronize(cs); break;
	case LOCAL2D: cudaMemcpy2DAsync(r, 4096, s, 4096, 4096, bytes / 4096, cudaMemcpyDeviceToDevice, cs), cudaStreamSynchronize(cs); break;
	case LOCALBATCH: { /* the batch API's hint to overlap the copy with compute */
		struct cudaMemcpyAttributes at = {0};
		at.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
		at.flags = cudaMemcpyFlagPreferOverlapWithCompute;
		void *const d[1] = {r};
		const void *sr[1] = {s};
		size_t sz[1] = {bytes}, idx[1] = {0};
		if (cudaMemcpyBatchAsync(d, sr, sz, 1, &at, idx, 1, cs) != cudaSuccess)
			fprintf(stderr, "cudaMemcpyBatchAsync failed\n");
		cudaStreamSynchronize(cs);
		break;
	}
	}
}

/* name is an entry of the comma-separated list (with commas around it) */
static int listed(const char *list, const char *name)
{
	char key[64];
	snprintf(key, sizeof key, ",%s,", name);
	return strstr(list, key) != NULL;
}

int main(int argc, char **argv)
{
	gpu_mpi_start(&argc, &argv, &rank, &size);
	const char *path = argc > 1 ? argv[1] : "collmux";
	const size_t maxb = argc > 2 ? strtoull(argv[2], NULL, 0) : (size_t)256 << 20;
	load();
	CUDA_OK(cudaStreamCreateWithFlags(&gs, cudaStreamNonBlocking));
	CUDA_OK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
	lib.set_stream(blas, gs);
	const size_t mat = (size_t)DIM * DIM * 2;
	CUDA_OK(cudaMalloc(&A, mat));
	CUDA_OK(cudaMalloc(&B, mat));
	CUDA_OK(cudaMalloc(&C, mat));
	cudaMemset(A, 0x3c, mat), cudaMemset(B, 0x3c, mat);
	cudaEventCreate(&g0), cudaEventCreate(&g1);
	float *s, *r;
	CUDA_OK(cudaMalloc((void **)&s, maxb));
	CUDA_OK(cudaMalloc((void **)&r, maxb));
	cudaMemset(s, 0, maxb);
	gemms(), gemm_ms(); /* warm cuBLAS */
	if (rank == 0)
		printf("coll,path,bytes,rank,gemm_ms,gemm_together_ms,gemm_slowdown,coll_us,coll_together_us,coll_slowdown,calls_together,coll_J,J_per_GB\n");
	char only[256];
	snprintf(only, sizeof only, ",%s,", argc > 3 ? argv[3] : "allreduce,allgather,alltoall,reduce_scatter");
	for (int c = 0; c < NCOLL; c++)
		for (size_t bytes = 64 << 10; bytes <= maxb && listed(only, names[c]); bytes *= 8) {
			cudaDeviceSynchronize();
			MPI_Barrier(MPI_COMM_WORLD);
			gemms();
			double ga = gemm_ms();
			/* alone: enough calls for ~50 ms, the count agreed */
			coll(c, s, r, bytes), coll(c, s, r, bytes); /* set-up, warm */
			MPI_Barrier(MPI_COMM_WORLD);
			double t = MPI_Wtime();
			coll(c, s, r, bytes);
			t = MPI_Wtime() - t;
			MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
			int k = (int)(0.05 / (t > 1e-6 ? t : 1e-6));
			k = k < 10 ? 10 : k > 20000 ? 20000 : k;
			MPI_Barrier(MPI_COMM_WORLD);
			const double e0 = joules();
			t = MPI_Wtime();
			for (int i = 0; i < k; i++)
				coll(c, s, r, bytes);
			const double alone = (MPI_Wtime() - t) / k, ej = joules() - e0;
			/* together: rank 0 says when its GEMMs are done; only the
			 * collective calls are timed */
			MPI_Barrier(MPI_COMM_WORLD);
			gemms();
			double busy = 0;
			int calls = 0, more = 1;
			while (more) {
				const double t0 = MPI_Wtime();
				coll(c, s, r, bytes);
				busy += MPI_Wtime() - t0;
				calls++;
				more = cudaEventQuery(g1) == cudaErrorNotReady;
				MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
			}
			const double gt = gemm_ms(), together = busy / calls;
			gemms(); /* alone again: the GPU's clocks drift over a run */
			ga = (ga + gemm_ms()) / 2;
			double row[8] = {ga, gt, gt / ga - 1, alone * 1e6, together * 1e6, together / alone - 1, calls, ej / k};
			double all[8 * 8];
			MPI_Gather(row, 8, MPI_DOUBLE, all, 8, MPI_DOUBLE, 0, MPI_COMM_WORLD);
			for (int p = 0; rank == 0 && p < size && p < 8; p++) {
				const double *v = all + 8 * p;
				printf("%s,%s,%zu,%d,%.2f,%.2f,%.3f,%.1f,%.1f,%.3f,%.0f,%.4f,%.3f\n", names[c], path, bytes, p, v[0], v[1], v[2], v[3],
				       v[4], v[5], v[6], v[7], v[7] / ((double)bytes / 1e9));
			}
			fflush(stdout);
		}
	MPI_Finalize();
	return 0;
}
