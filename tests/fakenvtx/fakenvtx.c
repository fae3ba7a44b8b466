/*
 * fakenvtx.c: a stand-in for the NVTX injection library of Nsight Systems
 * (what NVTX_INJECTION64_PATH names), so that the CPU suite sees the
 * ranges collmux opens. Its InitializeInjectionNvtx2 does what a tool does
 * with an NVTX v3 client: it asks the client's export table for the
 * callbacks, the core module's function table, and writes its own
 * RangePushA and RangePop there. Each range is a line appended to
 * $FAKENVTX_OUT: "<pid> <tid> push <depth> <message>" or
 * "<pid> <tid> pop <depth>", depth being the thread's stack before the
 * call. Init fails (returns 0) under FAKENVTX_FAIL=1, as a tool may.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef void (*fn)(void);
typedef const void *(*export_table_fn)(uint32_t id);
typedef struct {
	size_t size;
	int (*get_module_table)(int module, fn ***table, unsigned *size);
} callbacks_t;
typedef struct {
	size_t size;
	uint32_t version, reserved;
	void (*set_version)(uint32_t);
} version_t;

static int out = -1;
static __thread int depth;

static void line(const char *what, const char *msg)
{
	char buf[256];
	int n = snprintf(buf, sizeof buf, "%d %d %s %d%s%s\n", (int)getpid(), (int)gettid(), what, depth, msg ? " " : "", msg ? msg : "");
	if (write(out, buf, (size_t)n) != n)
		abort();
}

static int push_a(const char *msg)
{
	line("push", msg);
	return depth++;
}

static int pop(void)
{
	line("pop", NULL);
	return depth > 0 ? --depth : -1;
}

int InitializeInjectionNvtx2(export_table_fn get)
{
	const char *path = getenv("FAKENVTX_OUT"), *fail = getenv("FAKENVTX_FAIL");
	if (!path || (fail && strcmp(fail, "1") == 0))
		return 0;
	const callbacks_t *cb = get(1);        /* NVTX_ETID_CALLBACKS */
	const version_t *v = get(3);           /* NVTX_ETID_VERSIONINFO */
	fn **core = NULL;
	unsigned n = 0;
	if (!cb || cb->size < sizeof *cb || !v || v->size < sizeof *v || v->version < 2 || get(2) != NULL)
		return 0;
	v->set_version(3);
	/* every module a tool may ask for is there; 7 is not a module */
	for (int m = 1; m <= 6; m++)
		if (!cb->get_module_table(m, &core, &n) || !core || n < 7)
			return 0;
	if (cb->get_module_table(7, &core, &n) || !cb->get_module_table(1, &core, &n) || n != 16 || core[0] || core[16])
		return 0;
	if ((out = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600)) < 0)
		return 0;
	*core[9] = (fn)push_a; /* NVTX_CBID_CORE_RangePushA */
	*core[11] = (fn)pop;   /* NVTX_CBID_CORE_RangePop */
	return 1;
}
