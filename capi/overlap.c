//go:build collmux_lib

/*
 * overlap.c: the collmux_overlap info key. A program says that a
 * communicator's collectives run beside its computation by setting
 * collmux_overlap=true on it (MPI_Comm_set_info, MPI_Comm_dup_with_info;
 * mpi4py: comm.Set_info(MPI.Info.Create({"collmux_overlap": "true"}))).
 * The router then takes the routes of overlap=yes (dispatch.Overlap).
 * Both calls are collective, so the ranks agree on the new mode there: a
 * mode that differed between ranks would send them down different paths.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cmx.h"

enum { FAILED = -2, ABSENT = -1 };

/* The key's value in info: 1 yes, 0 no, ABSENT (or unreadable). */
static int hint(cmx_h info)
{
	char v[16] = {0};
	int flag = 0, len = (int)sizeof v;
	if (info == cmx_abi.info_null)
		return ABSENT;
	if (cmx_px.Info_get_string ? cmx_px.Info_get_string(info, "collmux_overlap", &len, v, &flag) != 0
				   : !cmx_px.Info_get || cmx_px.Info_get(info, "collmux_overlap", (int)sizeof v - 1, v, &flag) != 0)
		return ABSENT;
	if (!flag)
		return ABSENT;
	return strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcasecmp(v, "yes") == 0 || strcasecmp(v, "on") == 0;
}

/* Every rank of comm passes what its info says (want: 1, 0, ABSENT, or
 * FAILED where the MPI call failed on it); the mode changes when they all
 * say the same. Every rank takes part whatever it has to say, from facts
 * all share (COLLMUX_DISABLE and the rules are the same everywhere,
 * init.c checks), or the others would wait for it. */
static void agree(cmx_h comm, int want)
{
	int inter = 0, rc = 0;
	if (cmx_cfg.disable || !cmx_mpi_setup() || comm == cmx_abi.comm_null || cmx_px.Comm_test_inter(comm, &inter) != 0 || inter)
		return;
	int mine[2] = {want, -want}, all[2];
	if (cmx_px.Allreduce(mine, all, 2, cmx_abi.int_, cmx_abi.op_min, comm) != 0 || all[0] == FAILED)
		return;
	cmx_comm *c = cmx_comm_get(comm, &rc);
	if (all[0] != -all[1]) {
		if (c && c->rank == 0)
			fprintf(stderr, "collmux: the ranks of a communicator of %d set collmux_overlap differently; its mode stays %s\n",
				c->size, c->overlap ? "overlap" : "alone");
		return;
	}
	if (c && all[0] >= 0)
		c->overlap = all[0];
}

CMX_EXPORT int MPI_Comm_set_info(cmx_h comm, cmx_h info)
{
	cmx_init();
	int rc = cmx_px.Comm_set_info(comm, info);
	agree(cmx_norm(comm), rc == 0 ? hint(cmx_norm(info)) : FAILED);
	return rc;
}

/* The new communicator takes the key from info, or else COLLMUX_OVERLAP:
 * the old one's hints do not carry over (MPI 4.1 §7.4.4). */
CMX_EXPORT int MPI_Comm_dup_with_info(cmx_h comm, cmx_h info, void *newcomm)
{
	cmx_init();
	int rc = cmx_px.Comm_dup_with_info(comm, info, newcomm);
	if (rc == 0 && cmx_req_get(newcomm) != cmx_abi.comm_null) {
		int h = hint(cmx_norm(info));
		agree(cmx_req_get(newcomm), h < 0 ? cmx_cfg.overlap : h);
	}
	return rc;
}
