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

#include "cmx.h"

/* The key's value in info: 1 yes, 0 no, -1 absent (or unreadable). */
static int hint(cmx_h info)
{
	char v[16] = {0};
	int flag = 0, len = (int)sizeof v;
	if (info == cmx_abi.info_null)
		return -1;
	if (cmx_px.Info_get_string ? cmx_px.Info_get_string(info, "collmux_overlap", &len, v, &flag) != 0
				   : !cmx_px.Info_get || cmx_px.Info_get(info, "collmux_overlap", (int)sizeof v - 1, v, &flag) != 0)
		return -1;
	if (!flag)
		return -1;
	return strcmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcmp(v, "yes") == 0;
}

/* Every rank of comm passes what its info says (want: 1, 0, or -1 for no
 * word); the mode changes when they all say the same. */
static void agree(cmx_h comm, int want)
{
	if (cmx_state.forward_only || cmx_cfg.disable || !cmx_mpi_setup())
		return;
	int rc = 0;
	cmx_comm *c = cmx_comm_get(comm, &rc);
	if (!c || c->inter)
		return;
	int mine[2] = {want, -want}, all[2];
	if (cmx_px.Allreduce(mine, all, 2, cmx_abi.int_, cmx_abi.op_min, comm) != 0)
		return;
	if (all[0] != -all[1]) {
		if (c->rank == 0)
			fprintf(stderr, "collmux: the ranks of a communicator of %d set collmux_overlap differently; its mode stays %s\n",
				c->size, c->overlap ? "overlap" : "alone");
		return;
	}
	if (all[0] >= 0)
		c->overlap = all[0];
}

CMX_EXPORT int MPI_Comm_set_info(cmx_h comm, cmx_h info)
{
	cmx_init();
	int rc = cmx_px.Comm_set_info(comm, info);
	if (rc == 0)
		agree(cmx_norm(comm), hint(cmx_norm(info)));
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
