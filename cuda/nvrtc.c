/* nvrtc.c: NVRTC, loaded with dlopen, compiles the fused kernels at run time. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "cmx.h"

static struct {
	int (*CreateProgram)(void **, const char *, const char *, int, const char *const *, const char *const *);
	int (*CompileProgram)(void *, int, const char *const *);
	int (*GetCUBINSize)(void *, size_t *);
	int (*GetCUBIN)(void *, char *);
	int (*GetProgramLogSize)(void *, size_t *);
	int (*GetProgramLog)(void *, char *);
	int (*DestroyProgram)(void **);
} nv;

static void *open_nvrtc(void)
{
	const char *env = cmx_cfg.nvrtc_lib[0] ? cmx_cfg.nvrtc_lib : NULL;
	const char *names[] = {env, "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
			       "/usr/local/cuda/lib64/libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so.12",
			       "/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.13", NULL};
	for (int i = env ? 0 : 1; names[i]; i++) {
		void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (h)
			return h;
	}
	return NULL;
}

/* nvrtc.h's result for an option this NVRTC does not know */
#define NVRTC_ERROR_INVALID_OPTION 5

/* A new program of src, compiled with the first nopts of opts: NVRTC's
 * result, or -1 where no program was made (*prog NULL). */
static int compile(void **prog, const char *src, const char *const *opts, int nopts)
{
	*prog = NULL;
	if (nv.CreateProgram(prog, src, "collmux_fused.cu", 0, NULL, NULL) != 0) {
		*prog = NULL;
		return -1;
	}
	return nv.CompileProgram(*prog, nopts, opts);
}

int cmx_nvrtc_compile(const char *src, int arch, char **cubin, size_t *len, char **log)
{
	static void *h;
	*cubin = *log = NULL;
	if (!h && !(h = open_nvrtc()))
		return 0;
#define SYM(f) (*(void **)&nv.f = dlsym(h, "nvrtc" #f))
	SYM(CreateProgram), SYM(CompileProgram), SYM(GetCUBINSize), SYM(GetCUBIN);
	SYM(GetProgramLogSize), SYM(GetProgramLog), SYM(DestroyProgram);
#undef SYM
	if (!nv.CreateProgram || !nv.CompileProgram || !nv.GetCUBIN || !nv.GetCUBINSize || !nv.DestroyProgram)
		return 0;
	char archopt[64];
	snprintf(archopt, sizeof archopt, "--gpu-architecture=sm_%d", arch);
	/* --split-compile=0: the optimiser and ptxas run on every core (the
	 * other ranks of the node wait for this one, fused.Load), the same
	 * machine code to the byte. Side by side on one 16-core H200 node the
	 * cold compile took 80 s instead of 101 s (4 threads: 101 instead of
	 * 120); most of what is left is the resident collective kernel, one
	 * function, which no thread can share (73 s alone). Fresh machines
	 * vary: the library's own cold compiles took 92, 113 and 149 s
	 * (docs/results/gpu-2026-12-01-session18). An NVRTC older than the
	 * option refuses it: compiled again without. */
	const char *opts[] = {archopt, "--std=c++17", "-default-device", "--split-compile=0"};
	void *prog;
	int rc = compile(&prog, src, opts, 4);
	if (rc == NVRTC_ERROR_INVALID_OPTION) {
		nv.DestroyProgram(&prog);
		rc = compile(&prog, src, opts, 3);
	}
	if (!prog)
		return 0;
	int ok = rc == 0;
	size_t n = 0;
	if (nv.GetProgramLogSize && nv.GetProgramLogSize(prog, &n) == 0 && n > 1 && (*log = malloc(n)))
		nv.GetProgramLog(prog, *log);
	if (ok && nv.GetCUBINSize(prog, len) == 0 && (*cubin = malloc(*len)))
		ok = nv.GetCUBIN(prog, *cubin) == 0;
	else
		ok = 0;
	nv.DestroyProgram(&prog);
	return ok;
}
