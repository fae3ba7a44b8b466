/*
 * plantest: the fused backend's decisions that need no GPU (compiled in
 * from capi/fused_plan.c), one line of stdin each, one line of answer:
 *
 *   plan COLL BYTES RANKS ALGO   COLL allreduce, allgather, alltoall or
 *                                bcast; ALGO auto, oneshot or twoshot.
 *                                "PROTO BLOCKS" (PROTO ll, oneshot, twoshot,
 *                                llmove or move), or "none" when the workspace
 *                                cannot hold the call.
 *   pick OFFERS | OFFERS ...     each rank's retired workspaces, "ID:ME:SEQ"
 *                                words (hex ID). "ID SEQ OLD0 OLD1 ..." for
 *                                the workspace every rank offers, or "none".
 *   seq S                        the job number after S.
 *   bell S F                     job S against the last job finished, F:
 *                                "ROOM FINISHED" (cmx_fused_bell_room,
 *                                cmx_fused_finished), 0 or 1 each.
 *   place HOST:BUS:MPS ...       each rank's place (MPS 0 or 1): "ok", or why
 *                                the ranks cannot share workspaces.
 *   gemv M BATCH SMS TC F32      collmux_gemv_allreduce's fused kernel (TC,
 *                                F32: 0 or 1): "tc SEGS" or "loop 1", and
 *                                the most segments the workspace holds.
 *   tuned RANKS BATCH M | R:BLO-BHI:LO-HI:FORM ...
 *                                the form a tuning table's entries give a
 *                                call, or 0.
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

static int plan(const char *line)
{
	static const char *const colls[] = {"allreduce", "allgather", "alltoall", "bcast"};
	static const int coll_ids[] = {CMX_COLL_ALLREDUCE, CMX_COLL_ALLGATHER, CMX_COLL_ALLTOALL, CMX_COLL_BCAST};
	static const char *const algos[] = {"auto", "oneshot", "twoshot"};
	static const int algo_ids[] = {CMX_ALGO_AUTO, CMX_ALGO_ONESHOT, CMX_ALGO_TWOSHOT};
	char coll[32], algo[32];
	unsigned long long bytes;
	int ranks, c, a;
	if (sscanf(line, "%31s %llu %d %31s", coll, &bytes, &ranks, algo) != 4 || (c = lookup(coll, colls, 4)) < 0 ||
	    (a = lookup(algo, algos, 3)) < 0)
		return 0;
	uint32_t proto, nb;
	if (!cmx_fused_plan(coll_ids[c], bytes, ranks, algo_ids[a], &proto, &nb)) {
		puts("none");
		return 1;
	}
	const char *p = proto == JOB_LL ? "ll" : proto == JOB_TWOSHOT ? "twoshot" : "oneshot";
	if (coll_ids[c] != CMX_COLL_ALLREDUCE)
		p = proto == JOB_LL ? "llmove" : "move";
	printf("%s %u\n", p, nb);
	return 1;
}

static int pick(char *line)
{
	static cmx_ws_offer offers[CMX_MAX_RANKS * MAX_WORKSPACES];
	memset(offers, 0, sizeof offers);
	int ranks = 0, old[CMX_MAX_RANKS];
	for (char *rest = line, *row; (row = strsep(&rest, "|")); ranks++) {
		if (ranks == CMX_MAX_RANKS)
			return 0;
		int k = 0;
		for (char *save, *w = strtok_r(row, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save)) {
			cmx_ws_offer *o = &offers[ranks * MAX_WORKSPACES + k++];
			unsigned long long id;
			if (k > MAX_WORKSPACES || sscanf(w, "%llx:%d:%u", &id, &o->me, &o->seq) != 3)
				return 0;
			o->id = id;
		}
	}
	uint32_t seq;
	const uint64_t id = cmx_fused_pick(offers, ranks, old, &seq);
	if (!id) {
		puts("none");
		return 1;
	}
	printf("%llx %u", (unsigned long long)id, seq);
	for (int r = 0; r < ranks; r++)
		printf(" %d", old[r]);
	putchar('\n');
	return 1;
}

static int seq(const char *line)
{
	unsigned s;
	if (sscanf(line, "%u", &s) != 1)
		return 0;
	printf("%u\n", cmx_fused_next_seq(s));
	return 1;
}

static int bell(const char *line)
{
	unsigned s, f;
	if (sscanf(line, "%u %u", &s, &f) != 2)
		return 0;
	printf("%d %d\n", cmx_fused_bell_room(s, f), cmx_fused_finished(s, f));
	return 1;
}

static int place(char *line)
{
	static cmx_place at[CMX_MAX_RANKS];
	memset(at, 0, sizeof at);
	int n = 0;
	for (char *save, *w = strtok_r(line, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save), n++)
		if (n == CMX_MAX_RANKS || sscanf(w, "%63[^:]:%31[^:]:%d", at[n].host, at[n].bus, &at[n].mps) != 3)
			return 0;
	const char *why = cmx_fused_placement(at, sizeof *at, n);
	puts(why ? why : "ok");
	return 1;
}

static int gemv(const char *line)
{
	int m, batch, sms, tc, f32, segs;
	if (sscanf(line, "%d %d %d %d %d", &m, &batch, &sms, &tc, &f32) != 5)
		return 0;
	const uint64_t most = cmx_gemv_segs_most(f32, batch, m);
	const int k = cmx_gemv_plan(tc, f32, batch, m, sms, most, &segs);
	printf("%s %d %llu\n", k ? "tc" : "loop", segs, (unsigned long long)most);
	return 1;
}

static int tuned(char *line)
{
	static cmx_ops_pick t[CMX_OPS_TUNED];
	int ranks, batch, m, n = 0;
	char *rest = strchr(line, '|');
	if (!rest || sscanf(line, "%d %d %d", &ranks, &batch, &m) != 3)
		return 0;
	for (char *save, *w = strtok_r(rest + 1, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save), n++) {
		unsigned long long lo, hi;
		if (n == CMX_OPS_TUNED ||
		    sscanf(w, "%d:%d-%d:%llu-%llu:%d", &t[n].ranks, &t[n].batch_lo, &t[n].batch_hi, &lo, &hi, &t[n].form) != 6)
			return 0;
		t[n].lo = lo, t[n].hi = hi;
	}
	printf("%d\n", cmx_ops_tuned_form(t, n, ranks, batch, m));
	return 1;
}

int main(void)
{
	char line[4096];
	while (fgets(line, sizeof line, stdin)) {
		int ok = 0;
		if (strncmp(line, "plan ", 5) == 0)
			ok = plan(line + 5);
		else if (strncmp(line, "pick", 4) == 0)
			ok = pick(line + 4);
		else if (strncmp(line, "seq ", 4) == 0)
			ok = seq(line + 4);
		else if (strncmp(line, "bell ", 5) == 0)
			ok = bell(line + 5);
		else if (strncmp(line, "place ", 6) == 0)
			ok = place(line + 6);
		else if (strncmp(line, "gemv ", 5) == 0)
			ok = gemv(line + 5);
		else if (strncmp(line, "tuned ", 6) == 0)
			ok = tuned(line + 6);
		if (!ok) {
			fprintf(stderr, "plantest: bad line: %s", line);
			return 2;
		}
	}
	return 0;
}
