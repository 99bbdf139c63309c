/* What reads graphs: profiles (profile*.c), Graphviz output (dot.c) and
   memory reports (memory.c). They change no graph. */
#ifndef CUGRAPH_INSPECT_H
#define CUGRAPH_INSPECT_H

#include "graph/graph.h"

void dot_open(lua_State *L);
void profile_open(lua_State *L);
/* profile_report.c: the lines array of g:profile's nodes array at idx
   {source, line, us, nodes}, the most time first, pushed; and the replay
   whose n runs' starts and times (ms) are given, as a Chrome trace at
   path: run i is of node node_of[i] (0-based; NULL: node i). */
void cg_profile_lines(lua_State *L, int nodes);
/* The nodes array of records r, in capture order with their depths, each
   timed from us[k * n + i] (µs of record i in replay k of reps) and runs
   (its runs then), unless it never ran: the median, least and most, and
   runs; a conditional node has children (its body's nodes, which follow
   it) instead. Pushed. */
void cg_profile_recnodes(lua_State *L, cg_recs *r, lua_Integer reps,
                         const double *us, const double *runs);
/* The profile files' helpers: zeroed room the collector frees, left on
   the stack; t[k] = v for the table on top; the median of v[0], v[stride],
   ... (n of them; tmp: room for n). */
void *cg_profile_temp(lua_State *L, size_t n, size_t size);
/* g:profile's result, pushed: replays, us (plain: ms a replay) and, when
   timed, profiled_us and overhead (with); method unless NULL; the nodes
   array at nodes, and when timed its lines and the trace path unless
   NULL; the metatable that prints it as a report. */
void cg_profile_result(lua_State *L, lua_Integer reps, double plain,
                       double with, int timed, const char *method,
                       int nodes, const char *trace);
/* Registers metatable name for a profile's scratch, closed by close
   (__close and __gc). */
void cg_profile_scratch(lua_State *L, const char *name, lua_CFunction close);
void cg_setnum(lua_State *L, const char *k, double v);
double cg_median(const double *v, size_t n, size_t stride, double *tmp);
void cg_profile_trace(lua_State *L, int nodes, size_t n, const size_t *node_of,
                      const double *start, const double *dur, const char *path,
                      unsigned id);
/* profile_kernels.c: the profile of graph gr (at 1) with conditional
   nodes, from CUPTI's kernel records over reps replays on st (the stream
   object at sidx), plain its ms a replay: 1 with the result pushed, or 0
   with why it cannot be had pushed. */
int cg_profile_activity(lua_State *L, cg_graph *gr, int sidx, CUstream st,
                        lua_Integer reps, double plain, const char *trace);
void profile_kernels_open(lua_State *L);
/* profile_stamps.c: the profile of graph gr (at 1) by stamps, from its
   closure captured again with a stamp after each node, replayed on st;
   returns as above. */
int cg_profile_stamps(lua_State *L, cg_graph *gr, CUstream st,
                      lua_Integer reps, double plain, const char *trace);
void profile_stamps_open(lua_State *L);
/* profile_report.c: the metatable of g:profile's results, whose
   __tostring is the report print(p) shows. */
void profile_report_open(lua_State *L);
/* "kernel", "memcpy", ...: a node type as g:dot and g:profile name it */
const char *cg_node_type_name(CUgraphNodeType t);
void memory_open(lua_State *L); /* g:memory, cuda.memory().graphs */


#endif
