/*
 * goexports.h: the Go functions of package main (the //export lines of capi) that
 * the C of other packages calls. cgo writes their declarations into capi's
 * _cgo_export.h, which only capi's own C can include; capi/api.c includes
 * both, so a declaration here that differs from Go's fails to compile.
 */
#ifndef CMX_GOEXPORTS_H
#define CMX_GOEXPORTS_H

/* Runs fn(arg) on a thread of the Go runtime and waits (aside.c): the C
 * calls Go only through the cmx_go_* functions below, which do this. */
void cmx_aside(void (*fn)(void *), void *arg);
void cmx_aside_serve(void); /* that thread's loop (started in capi/main.go) */

void collmux_go_init(cmx_config *cfg, int abiC, cmx_routes *table);
int collmux_go_stage_rules(char *s, uint32_t *hash);
void collmux_go_commit_rules(int commit, cmx_config *cfg, cmx_routes *table);
cmx_routes *collmux_go_routes_for(int ranks, int nodes, int rpn, int nvl);
int collmux_go_fused_module(int arch, int driver, char *lib, char **image, size_t *size);
int collmux_go_fused_rejected(void);
void collmux_go_explain(int coll, int mem, uint64_t bytes, int used, int rule, int wanted);
void collmux_go_report(uint64_t *counters, int32_t *rules, int ranks, uint64_t *per_rank, int cells);
void collmux_go_started(int ranks);
void collmux_go_trace(cmx_trace_ev *ev, uint64_t n, uint64_t dropped, int rank, int ranks, char *host, int64_t epoch_real, uint64_t epoch);
int collmux_go_node_nvlink(void);

/* the same, each made aside */
void cmx_go_init(cmx_config *cfg, int abiC, cmx_routes *table);
int cmx_go_stage_rules(char *s, uint32_t *hash);
void cmx_go_commit_rules(int commit, cmx_config *cfg, cmx_routes *table);
cmx_routes *cmx_go_routes_for(int ranks, int nodes, int rpn, int nvl);
int cmx_go_fused_module(int arch, int driver, char *lib, char **image, size_t *size);
int cmx_go_fused_rejected(void);
void cmx_go_explain(int coll, int mem, uint64_t bytes, int used, int rule, int wanted);
void cmx_go_report(uint64_t *counters, int32_t *rules, int ranks, uint64_t *per_rank, int cells);
void cmx_go_started(int ranks);
void cmx_go_trace(cmx_trace_ev *ev, uint64_t n, uint64_t dropped, int rank, int ranks, char *host, int64_t epoch_real, uint64_t epoch);
int cmx_go_node_nvlink(void);

#endif
