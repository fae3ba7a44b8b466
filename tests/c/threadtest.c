/*
 * threadtest: MPI_THREAD_MULTIPLE with concurrent collectives, each thread
 * on its own communicator.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

#define NTHREAD 3
#define ITERS 60

static int rank, size, failures[NTHREAD];
static MPI_Comm comms[NTHREAD];

static void *worker(void *arg)
{
	int t = (int)(long)arg;
	for (int it = 0; it < ITERS; it++) {
		long in[4], out[4];
		for (int i = 0; i < 4; i++)
			in[i] = rank * 100 + t * 10 + i + it;
		MPI_Allreduce(in, out, 4, MPI_LONG, MPI_SUM, comms[t]);
		for (int i = 0; i < 4; i++) {
			long want = 100L * size * (size - 1) / 2 + (long)size * (t * 10 + i + it);
			if (out[i] != want)
				failures[t]++;
		}
		int b = rank == it % size ? it : -1;
		MPI_Bcast(&b, 1, MPI_INT, it % size, comms[t]);
		if (b != it)
			failures[t]++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int provided;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (provided < MPI_THREAD_MULTIPLE) {
		if (rank == 0)
			printf("threadtest: skipped: MPI_THREAD_MULTIPLE not provided\n");
		MPI_Finalize();
		return 0;
	}
	for (int t = 0; t < NTHREAD; t++)
		MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
	pthread_t th[NTHREAD];
	for (int t = 0; t < NTHREAD; t++)
		pthread_create(&th[t], NULL, worker, (void *)(long)t);
	int mine = 0, total = 0;
	for (int t = 0; t < NTHREAD; t++) {
		pthread_join(th[t], NULL);
		mine += failures[t];
		MPI_Comm_free(&comms[t]);
	}
	MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("threadtest: %d ranks, %d threads, %d failures\n", size, NTHREAD, total);
	MPI_Finalize();
	return total != 0;
}
