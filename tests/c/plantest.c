/*
 * plantest: the fused backend's plan (capi/fused_plan.c, compiled into
 * this program) for each line "COLL BYTES RANKS ALGO" on stdin, where COLL
 * is allreduce, allgather, alltoall or bcast and ALGO auto, oneshot or
 * twoshot. Prints one line each: "PROTO BLOCKS" (PROTO ll, oneshot,
 * twoshot or move) or "none" when the workspace cannot hold the call.
 */
#include <stdio.h>
#include <string.h>

#include "cmx.h"
#include "fused.h"

static int lookup(const char *s, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

int main(void)
{
	static const char *const colls[] = {"allreduce", "allgather", "alltoall", "bcast"};
	static const int coll_ids[] = {CMX_COLL_ALLREDUCE, CMX_COLL_ALLGATHER, CMX_COLL_ALLTOALL, CMX_COLL_BCAST};
	static const char *const algos[] = {"auto", "oneshot", "twoshot"};
	static const int algo_ids[] = {CMX_ALGO_AUTO, CMX_ALGO_ONESHOT, CMX_ALGO_TWOSHOT};
	char coll[32], algo[32];
	unsigned long long bytes;
	int ranks;
	while (scanf("%31s %llu %d %31s", coll, &bytes, &ranks, algo) == 4) {
		int c = lookup(coll, colls, 4), a = lookup(algo, algos, 3);
		if (c < 0 || a < 0) {
			fprintf(stderr, "plantest: bad line: %s %llu %d %s\n", coll, bytes, ranks, algo);
			return 2;
		}
		uint32_t proto, nb;
		if (!cmx_fused_plan(coll_ids[c], bytes, ranks, algo_ids[a], &proto, &nb)) {
			puts("none");
			continue;
		}
		const char *p = coll_ids[c] != CMX_COLL_ALLREDUCE ? "move" : proto == JOB_LL ? "ll" : proto == JOB_TWOSHOT ? "twoshot" : "oneshot";
		printf("%s %u\n", p, nb);
	}
	return 0;
}
