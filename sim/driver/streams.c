/* Streams and events. Work sent to a stream runs at once, or becomes a
   node of the stream's capture (capture.c); waits and queries are refused
   where capture forbids them. */
#include "double.h"
#include "queue.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* -- streams --------------------------------------------------------------- */

/* NULL and CU_STREAM_LEGACY are the legacy stream. */
CUstream dbl_stream_of(CUstream s) {
  return s == CU_STREAM_LEGACY ? NULL : s;
}

/* Whether work may be sent to s: a stream of the current context. */
CUresult dbl_stream_usable(CUstream s) {
  if (!s) return dbl_legacy_blocked(1);
  if (s->h.dev != dbl_cur_dev()) return CUDA_ERROR_INVALID_HANDLE;
  if (s->cap && s->cap->invalid) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  return CUDA_SUCCESS;
}

/* Waiting on or querying a stream: refused for a capturing one, whose
   capture is invalidated; an unsafe call for any other. */
static CUresult no_sync(CUstream s) {
  CUresult r = s ? CUDA_SUCCESS : dbl_legacy_blocked(1);
  if (r) return r;
  if (!s || !s->cap) return dbl_unsafe_call();
  s->cap->invalid = 1;
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* Runs o on s now (strict mode: when it is waited for) or, while s
   captures, records it as a node after s's tips. Takes o->args either
   way. */
CUresult dbl_submit(CUstream s, op *o) {
  CUresult r = dbl_stream_usable(s);
  dbl_capture_check = s && s->cap;
  if (!r) r = dbl_run_op(o, 1);
  dbl_capture_check = 0;
  o->where = dbl_lua_line();
  if (!r && s && s->cap) {
    if (!(r = dbl_capture_op(s, o))) return CUDA_SUCCESS;
  } else if (!r && o->type == CU_GRAPH_NODE_TYPE_HOST && dbl_work_done()) {
    /* after work that still runs (CUDA_DOUBLE_BUSY, a hang): when it ends */
    r = dbl_host_later(o->fn, o->data, dbl_work_done());
  } else if (!r && dbl_strict) {
    r = dbl_enqueue(s, o);
    dbl_keep_busy();
    return r;
  } else if (!r) {
    dbl_work_begin();
    r = dbl_run_op(o, 0);
    dbl_keep_busy();
  }
  free(o->args);
  return r;
}

void dbl_free_stream(CUstream s) {
  dbl_queue_drop(s->q);
  free(s->tips.v);
  dbl_free_obj(s);
}

void dbl_free_event(CUevent e) {
  dbl_forget_event(e);
  free(e->tips.v);
  dbl_free_obj(e);
}

static CUresult create(CUstream *phStream, unsigned int Flags, int prio);

CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags) {
  ENTRY(cuStreamCreate);
  CUresult r = dbl_enter();
  return r ? r : create(phStream, Flags, 0);
}

/* Priorities from 0 (the lowest, the default) to -5, as on the H200; the
   software driver runs every stream's work as it comes. */
CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *least, int *greatest) {
  ENTRY(cuCtxGetStreamPriorityRange);
  CUresult r = dbl_enter();
  if (r) return r;
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *phStream,
                                            unsigned int flags,
                                            int priority) {
  ENTRY(cuStreamCreateWithPriority);
  CUresult r = dbl_enter();
  if (r) return r;
  return create(phStream, flags, priority < -5 ? -5 : priority > 0 ? 0
                                                     : priority);
}

static CUresult create(CUstream *phStream, unsigned int Flags, int prio) {
  if (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
    return CUDA_ERROR_INVALID_VALUE;
  CUstream s = dbl_new_obj(sizeof *s, O_STREAM);
  if (!s || dbl_set_push(&s->tips, NULL, 1) ||
      (dbl_strict && !(s->q = dbl_queue_new(s->h.dev,
                                            !(Flags & CU_STREAM_NON_BLOCKING))))) {
    if (s) free(s->tips.v), dbl_free_obj(s);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  s->tips.n = 0;
  s->flags = Flags;
  s->priority = prio;
  *phStream = s;
  return CUDA_SUCCESS;
}

/* A joined stream that is destroyed leaves its work in the capture, never
   to be joined; the origin takes its capture with it. Its work still to
   run goes on, as on a GPU (strict mode: the device's waits run it). */
CUresult CUDAAPI cuStreamDestroy(CUstream hStream) {
  ENTRY(cuStreamDestroy);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!hStream) return CUDA_ERROR_INVALID_HANDLE;
  if ((r = dbl_settle())) return r; /* its work goes on to its end, as on a GPU */
  capture *c = hStream->cap;
  if (c && c->origin == hStream) {
    if (c->owned) dbl_free_graph(c->g);
    dbl_end_capture(c);
  } else if (c && dbl_set_union(&c->orphans, &hStream->tips)) {
    c->invalid = 1; /* out of memory: the capture cannot be trusted */
  }
  dbl_free_stream(hStream);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) {
  ENTRY(cuStreamSynchronize);
  CUresult r = dbl_enter();
  if (!r) r = no_sync(dbl_stream_of(hStream));
  if (!r && dbl_strict && !dbl_hung) r = dbl_wait_stream(dbl_stream_of(hStream));
  else if (!r) dbl_flush_output();
  if (!r && dbl_hung) dbl_wait_forever(held_);
  if (!r) dbl_wait_busy(held_);
  return r;
}

/* Work is done when it is sent (strict mode: a query runs it, as the
   wait polling it would), so a stream is never busy (but on a device left
   running for ever). */
CUresult CUDAAPI cuStreamQuery(CUstream hStream) {
  ENTRY(cuStreamQuery);
  CUresult r = dbl_enter();
  if (!r) r = no_sync(dbl_stream_of(hStream));
  if (!r && dbl_strict && !dbl_hung) r = dbl_wait_stream(dbl_stream_of(hStream));
  if (!r && (dbl_hung || dbl_busy())) return CUDA_ERROR_NOT_READY;
  return r;
}

/* Orders hStream after hEvent's work. In a capture that is how streams fork
   and join: a stream that waits on an event recorded in a capture joins it
   with the event's tips; a capturing stream adds them to its own. A
   capturing stream may not wait on work outside its capture, and an event
   whose capture is over can no longer be waited on. */
CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent,
                                   unsigned int Flags) {
  ENTRY(cuStreamWaitEvent);
  CUresult r = dbl_enter();
  if (r) return r;
  CUstream s = dbl_stream_of(hStream);
  if (!hEvent) return CUDA_ERROR_INVALID_HANDLE;
  if (Flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = dbl_stream_usable(s))) return r;
  capture *mine = s ? s->cap : NULL;
  if (!hEvent->cap_id) { /* never recorded, or recorded outside capture */
    if (!mine && dbl_strict) return dbl_enqueue_wait(s, hEvent);
    if (!mine || !hEvent->recorded) return CUDA_SUCCESS;
    mine->invalid = 1;
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  capture *ec = dbl_find_capture(hEvent->cap_id);
  if (!ec || !s) {
    if (mine) mine->invalid = 1;
    if (ec) ec->invalid = 1; /* the legacy stream cannot join a capture */
    return ec ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_ERROR_INVALID_VALUE;
  }
  if (!mine) {
    if (ec->invalid) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (dbl_set_assign(&s->tips, &hEvent->tips))
      return CUDA_ERROR_OUT_OF_MEMORY;
    s->cap = ec;
    return CUDA_SUCCESS;
  }
  if (ec != mine) {
    mine->invalid = ec->invalid = 1;
    return CUDA_ERROR_STREAM_CAPTURE_MERGE;
  }
  return dbl_set_union(&s->tips, &hEvent->tips) ? CUDA_ERROR_OUT_OF_MEMORY
                                             : CUDA_SUCCESS;
}

/* -- events ---------------------------------------------------------------- */

CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags) {
  ENTRY(cuEventCreate);
  CUresult r = dbl_enter();
  if (r) return r;
  unsigned ipc = CU_EVENT_INTERPROCESS, untimed = CU_EVENT_DISABLE_TIMING;
  if (!phEvent || (Flags & ~(CU_EVENT_BLOCKING_SYNC | untimed | ipc))
      || ((Flags & ipc) && !(Flags & untimed))) /* IPC events are untimed */
    return CUDA_ERROR_INVALID_VALUE;
  CUevent e = dbl_new_obj(sizeof *e, O_EVENT);
  if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
  e->flags = Flags;
  *phEvent = e;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy(CUevent hEvent) {
  ENTRY(cuEventDestroy);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!hEvent) return CUDA_ERROR_INVALID_HANDLE;
  dbl_free_event(hEvent); /* a record still to run records nothing */
  return CUDA_SUCCESS;
}

/* In a capture, keeps the stream's tips for streams that will wait on it;
   otherwise takes the time. */
CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) {
  ENTRY(cuEventRecord);
  CUresult r = dbl_enter();
  if (r) return r;
  CUstream s = dbl_stream_of(hStream);
  if (!hEvent) return CUDA_ERROR_INVALID_HANDLE;
  if ((r = dbl_stream_usable(s))) return r;
  if (s && s->cap) {
    if (dbl_set_assign(&hEvent->tips, &s->tips))
      return CUDA_ERROR_OUT_OF_MEMORY;
    hEvent->cap_id = s->cap->id;
    hEvent->recorded = 0;
    return CUDA_SUCCESS;
  }
  if (dbl_strict) { /* it records when its stream's work reaches it */
    hEvent->recorded = 1;
    hEvent->done = 0;
    hEvent->cap_id = 0;
    return dbl_enqueue_record(s, hEvent);
  }
  dbl_event_now(hEvent);
  return CUDA_SUCCESS;
}

void dbl_event_now(CUevent e) {
  dbl_event_done(e);
  e->recorded = 1;
  e->cap_id = 0;
  dbl_event_ran(e);
}

void dbl_event_done(CUevent e) {
  clock_gettime(CLOCK_MONOTONIC, &e->t);
  e->done = 1;
#ifdef CUDA_SIM
  e->executed = dbl_sim_executed();
#endif
}

#ifdef CUDA_SIM
CUresult CUDAAPI cuSimEventInstructions(CUevent hEvent,
                                        unsigned long long *count) {
  ENTRY(cuSimEventInstructions);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!hEvent) return CUDA_ERROR_INVALID_HANDLE;
  if (!count || !hEvent->recorded) return CUDA_ERROR_INVALID_VALUE;
  if (!hEvent->done) return CUDA_ERROR_NOT_READY;
  *count = hEvent->executed;
  return CUDA_SUCCESS;
}
#endif

/* Waiting on or querying an event: an unsafe call, and one that conflicts
   with the capture in which the event was last recorded (which is then
   invalidated); once that capture is broken or over, the event is invalid. */
static CUresult event_done(CUevent e) {
  CUresult r = dbl_enter();
  if (r) return r;
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  if (!e->cap_id) return dbl_unsafe_call();
  capture *c = dbl_find_capture(e->cap_id);
  if (!c || c->invalid) return CUDA_ERROR_INVALID_VALUE;
  c->invalid = 1;
  return CUDA_ERROR_CAPTURED_EVENT;
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent) {
  ENTRY(cuEventSynchronize);
  CUresult r = event_done(hEvent);
  if (!r && dbl_strict && !dbl_hung) r = dbl_wait_event(hEvent);
  else if (!r) dbl_flush_output();
  if (dbl_hung) dbl_wait_forever(held_);
  dbl_wait_busy(held_);
  return r;
}

/* Strict mode: a query runs the work before the record, as the wait
   polling it would. */
CUresult CUDAAPI cuEventQuery(CUevent hEvent) {
  ENTRY(cuEventQuery);
  CUresult r = event_done(hEvent);
  if (!r && dbl_strict && !dbl_hung) r = dbl_wait_event(hEvent);
  if (!r && (dbl_hung || dbl_busy())) return CUDA_ERROR_NOT_READY;
  return r;
}

CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart,
                                    CUevent hEnd) {
  ENTRY(cuEventElapsedTime);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!hStart || !hEnd) return CUDA_ERROR_INVALID_HANDLE;
  if (hStart->cap_id || hEnd->cap_id) return CUDA_ERROR_INVALID_VALUE;
  if (!pMilliseconds || !hStart->recorded || !hEnd->recorded
      || ((hStart->flags | hEnd->flags) & CU_EVENT_DISABLE_TIMING))
    return CUDA_ERROR_INVALID_HANDLE;
  if (!hStart->done || !hEnd->done) return CUDA_ERROR_NOT_READY;
  double ms = (double)(hEnd->t.tv_sec - hStart->t.tv_sec) * 1e3
              + (double)(hEnd->t.tv_nsec - hStart->t.tv_nsec) / 1e6;
  *pMilliseconds = (float)ms;
  return CUDA_SUCCESS;
}
