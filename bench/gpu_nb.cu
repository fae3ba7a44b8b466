/*
 * gpu_nb: the calls beyond blocking collectives on device buffers, through
 * MPI (so through collmux when it is preloaded), against what the same
 * program gets from NCCL and CUDA directly, in one run on 2 ranks (one
 * GPU each). Rank 0 prints CSV:
 *   test,path,bytes,value,unit
 * tests:
 *   pingpong     one-way latency (half a round trip) of MPI_Send/MPI_Recv
 *                between device buffers; path nccl: ncclSend/ncclRecv;
 *                path peercopy: cudaMemcpyAsync into the peer's buffer
 *                mapped by CUDA IPC (the floor of any copy between them)
 *   bandwidth    one-way bandwidth of a window of 8 MPI_Isend/MPI_Irecv
 *                (OSU's osu_bw shape), GB/s; same paths
 *   persistent   8 B all-reduce: MPI_Start+MPI_Wait of MPI_Allreduce_init,
 *                against the blocking MPI_Allreduce (path blocking), us
 *   overlap      MPI_Iallreduce of 16 MiB, a kernel of independent work on
 *                another stream, MPI_Wait: the times alone and together
 *                and the overlap efficiency (1: the collective hid fully)
 *   ineighbor_alltoall  16 MiB per neighbour on a line of 2 ranks, through
 *                collmux's default (NCCL) and everything staged, us
 *   halo         Isend/Irecv of 4 faces of a given size to the other rank,
 *                Waitall, us per exchange
 *
 * usage: gpu_nb [max_bytes]
 * build (CUDA C++, for the work kernel):
 *   nvcc -O2 -o gpu_nb bench/gpu_nb.cu $(mpicc --showme:compile) $(mpicc --showme:link) -lnccl
 */
#include <dlfcn.h>
#include <mpi.h>
#include <nccl.h>
#include <string.h>

#include "../tests/gpu/gpu_common.h"

static int rank, size, peer;
static ncclComm_t nccl;
static cudaStream_t stream;

static double now(void) { return MPI_Wtime(); }

static int reps(size_t bytes) { return bytes <= (1 << 16) ? 1000 : bytes <= (1 << 22) ? 100 : 20; }

static void emit(const char *test, const char *path, size_t bytes, double v, const char *unit)
{
	if (rank == 0)
		printf("%s,%s,%zu,%.3f,%s\n", test, path, bytes, v, unit);
}

/* one round trip: rank 0 sends, rank 1 sends back */
static void trip(int path, char *s, char *r, char *peerbuf, size_t bytes)
{
	if (path == 0) { /* MPI */
		if (rank == 0) {
			MPI_Send(s, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
			MPI_Recv(r, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(r, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(s, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
		}
	} else if (path == 1) { /* NCCL */
		for (int leg = 0; leg < 2; leg++) {
			if ((leg == 0) == (rank == 0))
				ncclSend(s, bytes, ncclUint8, peer, nccl, stream);
			else
				ncclRecv(r, bytes, ncclUint8, peer, nccl, stream);
			cudaStreamSynchronize(stream);
		}
	} else { /* a CUDA copy into the peer's mapped buffer, then a host message saying it is there */
		char token = 0;
		for (int leg = 0; leg < 2; leg++) {
			if ((leg == 0) == (rank == 0)) {
				cudaMemcpyAsync(peerbuf, s, bytes, cudaMemcpyDeviceToDevice, stream);
				cudaStreamSynchronize(stream);
				MPI_Send(&token, 1, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
			} else {
				MPI_Recv(&token, 1, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			}
		}
	}
}

static void window(int path, char *s, char *r, char *peerbuf, size_t bytes)
{
	enum { W = 8 };
	if (path == 0) {
		MPI_Request q[W];
		for (int k = 0; k < W; k++) {
			if (rank == 0)
				MPI_Isend(s, (int)bytes, MPI_BYTE, peer, 3, MPI_COMM_WORLD, &q[k]);
			else
				MPI_Irecv(r, (int)bytes, MPI_BYTE, peer, 3, MPI_COMM_WORLD, &q[k]);
		}
		MPI_Waitall(W, q, MPI_STATUSES_IGNORE);
	} else if (path == 1) {
		ncclGroupStart();
		for (int k = 0; k < W; k++) {
			if (rank == 0)
				ncclSend(s, bytes, ncclUint8, peer, nccl, stream);
			else
				ncclRecv(r, bytes, ncclUint8, peer, nccl, stream);
		}
		ncclGroupEnd();
		cudaStreamSynchronize(stream);
	} else if (rank == 0) {
		for (int k = 0; k < W; k++)
			cudaMemcpyAsync(peerbuf, s, bytes, cudaMemcpyDeviceToDevice, stream);
		cudaStreamSynchronize(stream);
	}
	char ack = 0; /* the receiver says it has everything */
	if (rank == 1)
		MPI_Send(&ack, 1, MPI_BYTE, peer, 4, MPI_COMM_WORLD);
	else
		MPI_Recv(&ack, 1, MPI_BYTE, peer, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static const char *pathname[3] = {"collmux", "nccl", "peercopy"};

/* work on its own stream that touches nothing of the collective's: every
 * SM busy for a while */
__global__ void spin_kernel(float *x, int iters)
{
	float v = x[threadIdx.x];
	for (int i = 0; i < iters; i++)
		v = v * 0.999f + 0.001f;
	x[threadIdx.x] = v;
}

/* 100 kernels of 132 blocks, about 3 us each */
static void spin(cudaStream_t st, float *x, int unused)
{
	(void)unused;
	for (int k = 0; k < 100; k++)
		spin_kernel<<<132, 256, 0, st>>>(x, 2000);
}

int main(int argc, char **argv)
{
	gpu_select();
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2) {
		if (rank == 0)
			fprintf(stderr, "gpu_nb: run on 2 ranks\n");
		MPI_Finalize();
		return 0;
	}
	peer = 1 - rank;
	size_t maxb = argc > 1 ? strtoull(argv[1], NULL, 10) : (64u << 20);
	ncclUniqueId id;
	if (rank == 0)
		ncclGetUniqueId(&id);
	MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
	CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
	ncclCommInitRank(&nccl, 2, id, rank);
	char *s, *r, *peerbuf = NULL;
	CUDA_OK(cudaMalloc((void **)&s, maxb * 8));
	CUDA_OK(cudaMalloc((void **)&r, maxb * 8));
	CUDA_OK(cudaMemset(s, 1, maxb * 8));
	cudaIpcMemHandle_t mine, theirs;
	CUDA_OK(cudaIpcGetMemHandle(&mine, r));
	MPI_Sendrecv(&mine, sizeof mine, MPI_BYTE, peer, 0, &theirs, sizeof theirs, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	CUDA_OK(cudaIpcOpenMemHandle((void **)&peerbuf, theirs, cudaIpcMemLazyEnablePeerAccess));
	if (rank == 0)
		printf("test,path,bytes,value,unit\n");

	for (size_t b = 8; b <= maxb; b *= 8) {
		for (int path = 0; path < 3; path++) {
			int n = reps(b);
			for (int i = 0; i < 10; i++)
				trip(path, s, r, peerbuf, b);
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = now();
			for (int i = 0; i < n; i++)
				trip(path, s, r, peerbuf, b);
			emit("pingpong", pathname[path], b, (now() - t0) / n / 2 * 1e6, "us");
		}
	}
	for (size_t b = 1 << 20; b <= maxb; b *= 4) {
		for (int path = 0; path < 3; path++) {
			int n = 10;
			window(path, s, r, peerbuf, b);
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = now();
			for (int i = 0; i < n; i++)
				window(path, s, r, peerbuf, b);
			emit("bandwidth", pathname[path], b, 8.0 * n * (double)b / (now() - t0) / 1e9, "GB/s");
		}
	}

	/* persistent 8 B all-reduce against the blocking call, taking turns */
	int (*ainit)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Info, MPI_Request *) =
		(int (*)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Info, MPI_Request *))dlsym(RTLD_DEFAULT, "MPI_Allreduce_init");
	if (ainit) {
		MPI_Request p;
		ainit(s, r, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &p);
		double tp = 0, tb = 0;
		for (int round = 0; round < 11; round++) {
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = now();
			for (int i = 0; i < 1000; i++) {
				MPI_Start(&p);
				MPI_Wait(&p, MPI_STATUS_IGNORE);
			}
			double t1 = now();
			for (int i = 0; i < 1000; i++)
				MPI_Allreduce(s, r, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
			double t2 = now();
			if (round) /* the first round warms both up */
				tp += t1 - t0, tb += t2 - t1;
		}
		MPI_Request_free(&p);
		emit("persistent", "collmux", 8, tp / 10000 * 1e6, "us");
		emit("persistent", "blocking", 8, tb / 10000 * 1e6, "us");
	}

	/* overlap: a 16 MiB all-reduce beside independent work (a train of
	 * short kernels, one block per SM each, as a GEMM's waves leave room
	 * between them), started by MPI_Iallreduce through collmux and, as the
	 * anchor, by ncclAllReduce on a stream of the program's own */
	{
		size_t b = 16u << 20;
		float *x;
		cudaStream_t work;
		CUDA_OK(cudaMalloc((void **)&x, 1 << 20));
		CUDA_OK(cudaStreamCreateWithFlags(&work, cudaStreamNonBlocking));
		for (int path = 0; path < 2; path++) {
			double tc = 0, tw = 0, tt = 0;
			for (int round = 0; round < 21; round++) {
				MPI_Request q;
				MPI_Barrier(MPI_COMM_WORLD);
				double t0 = now();
				if (path == 0) {
					MPI_Iallreduce(s, r, (int)(b / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
					MPI_Wait(&q, MPI_STATUS_IGNORE);
				} else {
					ncclAllReduce(s, r, b / 4, ncclFloat, ncclSum, nccl, stream);
					cudaStreamSynchronize(stream);
				}
				double t1 = now();
				spin(work, x, 0);
				cudaStreamSynchronize(work);
				double t2 = now();
				MPI_Barrier(MPI_COMM_WORLD);
				double t3 = now();
				if (path == 0) {
					MPI_Iallreduce(s, r, (int)(b / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
					spin(work, x, 0);
					MPI_Wait(&q, MPI_STATUS_IGNORE);
				} else {
					ncclAllReduce(s, r, b / 4, ncclFloat, ncclSum, nccl, stream);
					spin(work, x, 0);
					cudaStreamSynchronize(stream);
				}
				cudaStreamSynchronize(work);
				double t4 = now();
				if (round)
					tc += t1 - t0, tw += t2 - t1, tt += t4 - t3;
			}
			tc /= 20, tw /= 20, tt /= 20;
			double hidden = tc + tw - tt, eff = hidden / (tc < tw ? tc : tw);
			const char *p = path == 0 ? "collmux" : "nccl";
			char name[64];
			snprintf(name, sizeof name, "%s-alone", p), emit("overlap", name, b, tc * 1e6, "us");
			snprintf(name, sizeof name, "%s-work-alone", p), emit("overlap", name, b, tw * 1e6, "us");
			snprintf(name, sizeof name, "%s-together", p), emit("overlap", name, b, tt * 1e6, "us");
			snprintf(name, sizeof name, "%s-efficiency", p), emit("overlap", name, b, eff, "fraction");
		}
	}

	/* MPI_Ineighbor_alltoall on a non-periodic line of the 2 ranks (each
	 * has one neighbour, MPI_PROC_NULL on the other side), 16 MiB per
	 * neighbour: through collmux (NCCL), then everything staged
	 * (collmux_set_rules), each checked against the expected data */
	{
		int (*set_rules)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "collmux_set_rules");
		MPI_Comm line;
		int dims[1] = {2}, periods[1] = {0};
		MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &line);
		size_t b = 16u << 20;
		for (int pass = 0; pass < 2 && set_rules; pass++) {
			if (pass == 1)
				set_rules("neighbor_alltoall:cuda:*:staged");
			/* block 0 goes to the negative neighbour, block 1 to the positive */
			CUDA_OK(cudaMemset(s, 1 + rank, b));
			CUDA_OK(cudaMemset(s + b, 11 + rank, b));
			CUDA_OK(cudaMemset(r, 0, 2 * b));
			double t = 0;
			for (int round = 0; round < 6; round++) {
				MPI_Request q;
				MPI_Barrier(MPI_COMM_WORLD);
				double t0 = now();
				MPI_Ineighbor_alltoall(s, (int)b, MPI_BYTE, r, (int)b, MPI_BYTE, line, &q);
				MPI_Wait(&q, MPI_STATUS_IGNORE);
				if (round)
					t += now() - t0;
			}
			/* rank 0 gets rank 1's block 0 in its positive slot; rank 1 rank 0's block 1 in its negative one */
			unsigned char got = 0, want = rank == 0 ? 1 + 1 : 11 + 0;
			CUDA_OK(cudaMemcpy(&got, r + (rank == 0 ? b : 0) + b / 2, 1, cudaMemcpyDeviceToHost));
			int bad = got != want, anybad = 0;
			MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
			emit("ineighbor_alltoall", pass == 0 ? (anybad ? "collmux-WRONG" : "collmux") : (anybad ? "staged-WRONG" : "staged"), b, t / 5 * 1e6, "us");
		}
		if (set_rules)
			set_rules("");
		MPI_Comm_free(&line);
	}

	/* halo: 4 faces each way */
	for (size_t b = 1 << 12; b <= (16u << 20) && 4 * b <= maxb * 8; b *= 16) {
		double t = 0;
		for (int round = 0; round < 6; round++) {
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = now();
			for (int i = 0; i < 10; i++) {
				MPI_Request q[8];
				for (int f = 0; f < 4; f++) {
					MPI_Irecv(r + f * b, (int)b, MPI_BYTE, peer, 10 + f, MPI_COMM_WORLD, &q[f]);
					MPI_Isend(s + f * b, (int)b, MPI_BYTE, peer, 10 + f, MPI_COMM_WORLD, &q[4 + f]);
				}
				MPI_Waitall(8, q, MPI_STATUSES_IGNORE);
			}
			if (round)
				t += now() - t0;
		}
		emit("halo", "collmux", b, t / 50 * 1e6, "us");
	}

	cudaIpcCloseMemHandle(peerbuf);
	ncclCommDestroy(nccl);
	MPI_Finalize();
	return 0;
}
