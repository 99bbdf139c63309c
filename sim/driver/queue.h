/* The simulator's strict mode (queue.c): work deferred on the queues of
   streams until a wait runs it, and the race check over it (races.c);
   what the files that send work, wait for it or free what it uses share.
   The test double runs work at once (dbl_strict unset). */
#ifndef DOUBLE_QUEUE_H
#define DOUBLE_QUEUE_H
#include "double.h"

#pragma GCC visibility push(hidden)

/* Whether work waits for a wait (the simulator, unless CUDA_SIM_STRICT=0;
   never the test double). */
extern int dbl_strict;
/* A string kept for the process's life (NULL: out of memory). */
const char *dbl_intern(const char *s);
const char *dbl_lua_line(void);          /* this thread's (cuSimSetLuaLine) */
queue *dbl_queue_new(int dev, int blocking);
void dbl_queue_free(queue *q);           /* its work still to run goes */
void dbl_queue_drop(queue *q);           /* its stream goes; the work stays */
void dbl_queues_end(int dev);            /* the last context of dev goes */
/* Sending: the op (whose args the queue takes either way), a graph's
   launch, an event's record, a wait on an event. */
CUresult dbl_enqueue(CUstream s, op *o);
CUresult dbl_enqueue_graph(CUstream s, CUgraphExec x);
CUresult dbl_enqueue_record(CUstream s, CUevent e);
CUresult dbl_enqueue_wait(CUstream s, CUevent e);
void dbl_forget_event(CUevent e);
/* e recorded now, by the task running (a graph's event record node), or
   at once: waits on it follow that task. */
void dbl_event_ran(CUevent e);
/* Waits that run the work they wait for; the host knows it done. A check
   that failed meanwhile ends the wait with CUDA_ERROR_NOT_PERMITTED and its
   report told to the thread (cuSimTakeReport). */
CUresult dbl_wait_stream(CUstream s);
CUresult dbl_wait_event(CUevent e);
CUresult dbl_wait_device(void);
/* Runs all pending work, before a free or a change of what it uses (as
   the driver's implicit synchronization): the sticky error, if the work
   faulted; a failed check is kept for the next wait. */
CUresult dbl_settle(void);
/* Tells text to this thread's next cuSimTakeReport. */
void dbl_tell(const char *text);
/* The Lua line of the graph launch running on this thread, or NULL. */
const char *dbl_running_where(void);
/* The accesses of the op running (copies and fills, and kernels through
   sim_launch.touch with a runner as its ud): checked for races. */
void dbl_track_op(const op *o);
struct dbl_pctx;
typedef struct dbl_runner {
  void *task, *queue;
  const op *o;
  struct dbl_pctx *pdl; /* the programmatic check's view of it, or NULL */
} dbl_runner;
int dbl_runner_now(dbl_runner *r, const op *o); /* 0: nothing followed */
void dbl_track_kernel(void *runner, uint64_t base, uint64_t lo, uint64_t hi,
                      int write);
void dbl_forget_block(uint64_t base); /* its memory is freed */
/* Task t's (of queue q) access of [lo, hi) by its op o, in the block at
   base: checked against the block's last accesses by other queues, and
   kept (races.c). What it reads of them (queue.c): the queue's id, the
   task's place in it, the place in queue qid of the last task there it
   follows, and the Lua line to name for its op. */
void dbl_race_check(const task *t, const queue *q, const op *o, uint64_t base,
                    uint64_t lo, uint64_t hi, int write);
unsigned dbl_queue_id(const queue *q);
uint64_t dbl_task_seq(const task *t);
uint64_t dbl_task_follows(const task *t, unsigned qid);
const char *dbl_task_where(const task *t, const op *o);
/* Writes what kernels' printf and assert left (stdout and stderr): at
   synchronization, as a GPU flushes its printf buffer (kernels.c). */
void dbl_flush_output(void);
/* Records a failed check for the next wait, unless one is already
   recorded (it then ends with CUDA_ERROR_NOT_PERMITTED and the report). */
void dbl_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#pragma GCC visibility pop

#endif
