/*
 * core.c: what every layer of the C core shares: the configuration Go
 * sets once, the process state, and reporting (cmx_fatal, cmx_log).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cmx.h"

cmx_state_t cmx_state;
cmx_config cmx_cfg;

void cmx_fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "collmux: fatal: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	abort();
}

void cmx_log(int level, const char *fmt, ...)
{
	if (cmx_cfg.log < level)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "collmux[%d]: ", (int)getpid());
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
}

