/* api.c: the functions declared in include/collmux.h. */
#include "cmx.h"

#define COLLMUX_VERSION "0.1.0"

CMX_EXPORT const char *collmux_version(void) { return COLLMUX_VERSION; }

CMX_EXPORT const char *collmux_mpi_abi(void)
{
	static const char *names[] = {"unknown", "mpi-abi", "openmpi", "mpich"};
	return __atomic_load_n(&cmx_state.ready, __ATOMIC_ACQUIRE) ? names[cmx_abi.abi] : names[0];
}

CMX_EXPORT int collmux_comm_states(void) { return __atomic_load_n(&cmx_live_comms, __ATOMIC_RELAXED); }
