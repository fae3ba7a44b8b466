/*
 * persist_lat: an 8-byte all-reduce on device buffers, three ways, taking
 * turns in 11 rounds of 1000 calls (the first round warms up):
 *   blocking     MPI_Allreduce
 *   persistent   MPI_Start + MPI_Wait of one MPI_Allreduce_init
 *   nonblocking  MPI_Iallreduce + MPI_Wait
 * On one rank there is no peer to wait for, so the times are collmux's own
 * work on the host plus one job of the device path: what a planned
 * persistent start (route, plan and job fixed at init, each start only the
 * doorbell) could save is the persistent time minus the blocking one
 * (issue 15's persistent target). Rank 0 prints CSV: form,ranks,us
 *   usage: persist_lat [calls per round]   (libcollmux.so preloaded; COLLMUX_RULES picks the path)
 */
#include <dlfcn.h>
#include <mpi.h>

#include "../tests/gpu/gpu_common.h"

int main(int argc, char **argv)
{
	int rank, size;
	gpu_mpi_start(&argc, &argv, &rank, &size);
	/* MPI-4's persistent collectives: the MPI's or collmux's (Open MPI 4.1 has none) */
	int (*ainit)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Info, MPI_Request *) =
		(int (*)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Info, MPI_Request *))dlsym(RTLD_DEFAULT,
														 "MPI_Allreduce_init");
	if (!ainit) {
		if (rank == 0)
			fprintf(stderr, "persist_lat: no MPI_Allreduce_init (preload libcollmux.so)\n");
		MPI_Finalize();
		return 1;
	}
	float *s, *r;
	CUDA_OK(cudaMalloc((void **)&s, 64));
	CUDA_OK(cudaMalloc((void **)&r, 64));
	CUDA_OK(cudaMemset(s, 0, 64));
	MPI_Request p;
	ainit(s, r, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &p);
	const int calls = argc > 1 ? atoi(argv[1]) : 1000;
	double t[3] = {0, 0, 0};
	for (int round = 0; round < 11; round++) {
		for (int form = 0; form < 3; form++) {
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = MPI_Wtime();
			for (int i = 0; i < calls; i++) {
				MPI_Request q;
				if (form == 0) {
					MPI_Allreduce(s, r, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
				} else if (form == 1) {
					MPI_Start(&p);
					MPI_Wait(&p, MPI_STATUS_IGNORE);
				} else {
					MPI_Iallreduce(s, r, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
					MPI_Wait(&q, MPI_STATUS_IGNORE);
				}
			}
			if (round) /* the first round warms every form up */
				t[form] += MPI_Wtime() - t0;
			else if (rank == 0)
				fprintf(stderr, "persist_lat: form %d warmed up\n", form);
		}
	}
	MPI_Request_free(&p);
	if (rank == 0) {
		const char *forms[3] = {"blocking", "persistent", "nonblocking"};
		printf("form,ranks,us\n");
		for (int form = 0; form < 3; form++)
			printf("%s,%d,%.3f\n", forms[form], size, t[form] / (10.0 * calls) * 1e6);
	}
	MPI_Finalize();
	return 0;
}
