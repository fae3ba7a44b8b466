/*
 * nvml.c: the few NVML queries the library makes (GPUs and NVLinks, for the
 * GPU key tuning tables are matched by), through dlopen like CUDA and NCCL.
 * go-nvml is not used in the library: it leaves nvml* symbols undefined in
 * the shared object, which breaks programs that link libcollmux directly.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "cmx.h"

typedef struct {
	char bus_legacy[16];
	unsigned domain, bus, device, device_id, subsystem_id;
	char bus_id[32];
} nvml_pci; /* nvmlPciInfo_t */

static struct {
	int (*Init)(void);
	int (*Shutdown)(void);
	int (*DriverVersion)(char *, unsigned);
	int (*CudaDriverVersion)(int *);
	int (*Count)(unsigned *);
	int (*Handle)(unsigned, void **);
	int (*Name)(void *, char *, unsigned);
	int (*Pci)(void *, nvml_pci *);
	int (*LinkState)(void *, unsigned, int *);
	int (*LinkRemote)(void *, unsigned, nvml_pci *);
	int (*P2PStatus)(void *, void *, int, int *);
	int (*ByBus)(const char *, void **);
	int (*Energy)(void *, unsigned long long *);
} nv;

int cmx_nvml_open(void)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return 0;
#define SYM(f, name) (*(void **)&nv.f = dlsym(h, name))
	SYM(Init, "nvmlInit_v2"), SYM(Shutdown, "nvmlShutdown"), SYM(DriverVersion, "nvmlSystemGetDriverVersion");
	SYM(CudaDriverVersion, "nvmlSystemGetCudaDriverVersion"), SYM(Count, "nvmlDeviceGetCount_v2");
	SYM(Handle, "nvmlDeviceGetHandleByIndex_v2"), SYM(Name, "nvmlDeviceGetName"), SYM(Pci, "nvmlDeviceGetPciInfo_v3");
	SYM(LinkState, "nvmlDeviceGetNvLinkState"), SYM(LinkRemote, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
	SYM(P2PStatus, "nvmlDeviceGetP2PStatus");
	SYM(ByBus, "nvmlDeviceGetHandleByPciBusId_v2");
	SYM(Energy, "nvmlDeviceGetTotalEnergyConsumption");
#undef SYM
	return nv.Init && nv.DriverVersion && nv.Count && nv.Handle && nv.Name && nv.Pci && nv.Init() == 0;
}

void cmx_nvml_close(void)
{
	if (nv.Shutdown)
		nv.Shutdown();
}

int cmx_nvml_driver(char *buf, int len, int *cuda)
{
	*cuda = 0;
	if (nv.CudaDriverVersion)
		nv.CudaDriverVersion(cuda);
	return nv.DriverVersion(buf, (unsigned)len) == 0;
}

int cmx_nvml_count(void)
{
	unsigned n = 0;
	return nv.Count(&n) == 0 ? (int)n : -1;
}

int cmx_nvml_device(int i, char *name, int nlen, char *bus, int blen)
{
	void *d;
	nvml_pci p;
	if (nv.Handle((unsigned)i, &d) != 0 || nv.Name(d, name, (unsigned)nlen) != 0 || nv.Pci(d, &p) != 0)
		return 0;
	strncpy(bus, p.bus_id, (size_t)blen - 1);
	bus[blen - 1] = 0;
	return 1;
}

/* remote bus id of link `link` of device i: 1 when the link is active, 0
 * when it is not, -1 past the last link */
int cmx_nvml_link(int i, int link, char *bus, int blen)
{
	void *d;
	int state = 0;
	nvml_pci p;
	if (!nv.LinkState || !nv.LinkRemote || nv.Handle((unsigned)i, &d) != 0)
		return -1;
	if (nv.LinkState(d, (unsigned)link, &state) != 0)
		return link < 64 ? 0 : -1;
	if (state != 1 /* NVML_FEATURE_ENABLED */ || nv.LinkRemote(d, (unsigned)link, &p) != 0)
		return 0;
	strncpy(bus, p.bus_id, (size_t)blen - 1);
	bus[blen - 1] = 0;
	return 1;
}

/* 1 when NVML's P2P status says devices i and j talk over NVLink, 0 when
 * not, -1 on error */
int cmx_nvml_nvlink_peers(int i, int j)
{
	void *a, *b;
	int st = -1;
	if (!nv.P2PStatus || nv.Handle((unsigned)i, &a) != 0 || nv.Handle((unsigned)j, &b) != 0 ||
	    nv.P2PStatus(a, b, 2 /* NVML_P2P_CAPS_INDEX_NVLINK */, &st) != 0)
		return -1;
	return st == 0 /* NVML_P2P_STATUS_OK */;
}

/* The energy counter of the GPU this thread's CUDA context is on (found
 * once, by its PCI bus id), for the statistics. */
static void *energy_dev;
static pthread_once_t energy_once = PTHREAD_ONCE_INIT;

static void energy_open(void)
{
	int arch;
	char bus[32];
	if (cmx_cuda_fused_capable() && cmx_cuda_device(&arch, bus, sizeof bus) && cmx_nvml_open() && nv.ByBus && nv.Energy &&
	    nv.ByBus(bus, &energy_dev) != 0)
		energy_dev = NULL;
}

int cmx_nvml_energy(uint64_t *mj)
{
	unsigned long long v = 0;
	pthread_once(&energy_once, energy_open);
	if (!energy_dev || nv.Energy(energy_dev, &v) != 0)
		return 0;
	*mj = v;
	return 1;
}
