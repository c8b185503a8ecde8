/* A simulated HIP runtime: exports the real HIP ABI for the functions rocsync hooks (and
 * what scenarios need), with the runtime's behaviour on a machine whose GPUs are simulated.
 *
 * - Handles are heap objects: a destroyed handle's memory is reused by the allocator, as
 *   with the real runtime, and calls on handles that are not live fail with
 *   hipErrorInvalidHandle.
 * - Each device has a clock of queued work: a stream is busy until its last piece of work
 *   ends; an event completes when the work recorded before it ends; waits and
 *   synchronizes block (sleep) for real until then.
 * - The current device is per thread; streams belong to the device current at creation.
 *
 * hipSimLaunch (not a HIP API) queues simulated kernel work on a stream.
 *
 * Built with -DSIM_HSA, it also submits what CLR submits through the HSA runtime (the
 * simulated libhsa-runtime64): a kernel dispatch per launch, a barrier per event record
 * (its completion signal is the event's), and a barrier waiting on that signal per stream
 * wait (barrier-AND, or AMD's barrier-value with $HIP_SIM_BARRIER_VALUE); one AQL queue
 * per stream on its device's GPU agent (hip_sim_hsa.c). */
#define _GNU_SOURCE
#include "hip_sim.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hip_sim_internal.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct ihipStream_t *streams;
static struct ihipEvent_t *events;
/* The null stream of each device, and the per-thread default stream. */
static struct ihipStream_t null_stream[SIM_DEVICES];
static __thread struct ihipStream_t per_thread_stream = {.magic = STREAM_MAGIC};
static __thread int current_device;

/* malloc, not calloc: glibc's calloc bypasses the thread cache, so freed handles would
 * rarely come back; applications' handles are reused. */
static void *zalloc(size_t n) {
  void *p = malloc(n);
  if (p) memset(p, 0, n);
  return p;
}

static void sleep_until(uint64_t t) {
  uint64_t n = now_ns();
  if (t > n) {
    struct timespec ts = {(time_t)((t - n) / 1000000000ull), (long)((t - n) % 1000000000ull)};
    nanosleep(&ts, NULL);
  }
}

/* Looks a stream handle up; returns NULL for a handle that is not live. Lock held. */
static struct ihipStream_t *find_stream(hipStream_t s) {
  if (s == NULL) return &null_stream[current_device];
  if (s == hipStreamPerThread) {
    per_thread_stream.device = current_device;
    return &per_thread_stream;
  }
  for (struct ihipStream_t *it = streams; it; it = it->next)
    if (it == s) return it;
  return NULL;
}

static struct ihipEvent_t *find_event(hipEvent_t e) {
  for (struct ihipEvent_t *it = events; it; it = it->next)
    if (it == e) return it;
  return NULL;
}

hipError_t hipInit(unsigned int flags) { return flags == 0 ? hipSuccess : hipErrorInvalidValue; }

hipError_t hipGetDeviceCount(int *count) {
  if (!count) return hipErrorInvalidValue;
  *count = SIM_DEVICES;
  return hipSuccess;
}

hipError_t hipSetDevice(int device) {
  if (device < 0 || device >= SIM_DEVICES) return hipErrorInvalidDevice;
  current_device = device;
  return hipSuccess;
}

hipError_t hipGetDevice(int *device) {
  if (!device) return hipErrorInvalidValue;
  *device = current_device;
  return hipSuccess;
}

static hipError_t stream_create(hipStream_t *out) {
  if (!out) return hipErrorInvalidValue;
  struct ihipStream_t *s = zalloc(sizeof *s);
  if (!s) return hipErrorInvalidValue;
  s->magic = STREAM_MAGIC;
  s->device = current_device;
  pthread_mutex_lock(&lock);
  s->next = streams;
  streams = s;
  pthread_mutex_unlock(&lock);
  *out = s;
  return hipSuccess;
}

hipError_t hipStreamCreate(hipStream_t *stream) { return stream_create(stream); }
hipError_t hipStreamCreateWithFlags(hipStream_t *stream, unsigned int flags) {
  return flags > 1 ? hipErrorInvalidValue : stream_create(stream);
}
hipError_t hipStreamCreateWithPriority(hipStream_t *stream, unsigned int flags, int priority) {
  (void)priority;
  return flags > 1 ? hipErrorInvalidValue : stream_create(stream);
}

hipError_t hipStreamDestroy(hipStream_t stream) {
  pthread_mutex_lock(&lock);
  for (struct ihipStream_t **it = &streams; *it; it = &(*it)->next) {
    if (*it == stream) {
      struct ihipStream_t *s = *it;
      *it = s->next;
      pthread_mutex_unlock(&lock);
      sleep_until(s->busy_until); /* destroy waits for the stream's work, as HIP does */
      s->magic = 0;
      free(s);
      return hipSuccess;
    }
  }
  pthread_mutex_unlock(&lock);
  return hipErrorInvalidHandle;
}

hipError_t hipSimLaunch(hipStream_t stream, unsigned int work_us) {
  pthread_mutex_lock(&lock);
  struct ihipStream_t *s = find_stream(stream);
  if (!s) {
    pthread_mutex_unlock(&lock);
    return hipErrorInvalidHandle;
  }
  uint64_t start = s->busy_until > now_ns() ? s->busy_until : now_ns();
  s->busy_until = start + (uint64_t)work_us * 1000ull;
#ifdef SIM_HSA
  submit_kernel(s, work_us);
#endif
  pthread_mutex_unlock(&lock);
  return hipSuccess;
}

/* Work that completes when another process says so (a simulated collective): the
 * stream's synchronisation blocks until gate(arg) is non-zero. */
hipError_t hipSimGate(hipStream_t stream, int (*gate)(void *), void *arg) {
  pthread_mutex_lock(&lock);
  struct ihipStream_t *s = find_stream(stream);
  if (s) {
    s->gate = gate;
    s->gate_arg = arg;
  }
  pthread_mutex_unlock(&lock);
  return s ? hipSuccess : hipErrorInvalidHandle;
}

static hipError_t stream_sync(hipStream_t stream) {
  pthread_mutex_lock(&lock);
  struct ihipStream_t *s = find_stream(stream);
  uint64_t until = s ? s->busy_until : 0;
  int (*gate)(void *) = s ? s->gate : NULL;
  void *arg = s ? s->gate_arg : NULL;
  pthread_mutex_unlock(&lock);
  if (!s) return hipErrorInvalidHandle;
  sleep_until(until);
  while (gate && !gate(arg)) sleep_until(now_ns() + 1000000ull);
  return hipSuccess;
}

hipError_t hipStreamSynchronize(hipStream_t stream) { return stream_sync(stream); }
/* With HIP_SIM_SPT_CALLS_PLAIN set, the _spt variant calls the exported plain function
 * (through the PLT), as a runtime or an interposer calling its own API does: a tracer
 * must see two nested calls. */
hipError_t hipStreamSynchronize_spt(hipStream_t stream) {
  static int nests_cached = -1;
  int nests = __atomic_load_n(&nests_cached, __ATOMIC_RELAXED);
  if (nests < 0) {
    nests = getenv("HIP_SIM_SPT_CALLS_PLAIN") != NULL;
    __atomic_store_n(&nests_cached, nests, __ATOMIC_RELAXED);
  }
  if (nests) return hipStreamSynchronize(stream == NULL ? hipStreamPerThread : stream);
  return stream_sync(stream == NULL ? hipStreamPerThread : stream);
}

hipError_t hipDeviceSynchronize(void) {
  uint64_t until = 0;
  pthread_mutex_lock(&lock);
  for (struct ihipStream_t *it = streams; it; it = it->next)
    if (it->device == current_device && it->busy_until > until) until = it->busy_until;
  if (null_stream[current_device].busy_until > until) until = null_stream[current_device].busy_until;
  pthread_mutex_unlock(&lock);
  sleep_until(until);
  return hipSuccess;
}

static hipError_t event_create(hipEvent_t *out, unsigned flags) {
  if (!out) return hipErrorInvalidValue;
  struct ihipEvent_t *e = zalloc(sizeof *e);
  if (!e) return hipErrorInvalidValue;
  e->magic = EVENT_MAGIC;
  e->flags = flags;
  pthread_mutex_lock(&lock);
  e->next = events;
  events = e;
  pthread_mutex_unlock(&lock);
  *out = e;
  return hipSuccess;
}

hipError_t hipEventCreate(hipEvent_t *event) { return event_create(event, 0); }
hipError_t hipEventCreateWithFlags(hipEvent_t *event, unsigned int flags) {
  return event_create(event, flags);
}

hipError_t hipEventDestroy(hipEvent_t event) {
  pthread_mutex_lock(&lock);
  for (struct ihipEvent_t **it = &events; *it; it = &(*it)->next) {
    if (*it == event) {
      struct ihipEvent_t *e = *it;
      *it = e->next;
      pthread_mutex_unlock(&lock);
      e->magic = 0;
      free(e);
      return hipSuccess;
    }
  }
  pthread_mutex_unlock(&lock);
  return hipErrorInvalidHandle;
}

static hipError_t event_record(hipEvent_t event, hipStream_t stream) {
  pthread_mutex_lock(&lock);
  struct ihipEvent_t *e = find_event(event);
  struct ihipStream_t *s = find_stream(stream);
  hipError_t rc = hipErrorInvalidHandle;
  if (e && s) {
    uint64_t n = now_ns();
    e->recorded = 1;
    e->done_at = s->busy_until > n ? s->busy_until : n;
#ifdef SIM_HSA
    e->signal = submit_barrier(s, 0);
#endif
    rc = hipSuccess;
  }
  pthread_mutex_unlock(&lock);
  return rc;
}

hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream) { return event_record(event, stream); }
hipError_t hipEventRecord_spt(hipEvent_t event, hipStream_t stream) {
  return event_record(event, stream == NULL ? hipStreamPerThread : stream);
}
hipError_t hipEventRecordWithFlags(hipEvent_t event, hipStream_t stream, unsigned int flags) {
  return flags > 1 ? hipErrorInvalidValue : event_record(event, stream);
}

static hipError_t stream_wait_event(hipStream_t stream, hipEvent_t event, unsigned int flags) {
  if (event == NULL) return hipErrorInvalidHandle;
  if (flags != 0) return hipErrorInvalidValue;
  pthread_mutex_lock(&lock);
  struct ihipEvent_t *e = find_event(event);
  struct ihipStream_t *s = find_stream(stream);
  hipError_t rc = hipErrorInvalidHandle;
  if (e && s) {
    /* The stream's later work starts after the event's work: no host blocking. */
    if (e->recorded && e->done_at > s->busy_until) s->busy_until = e->done_at;
#ifdef SIM_HSA
    if (e->recorded) submit_barrier(s, e->signal);
#endif
    rc = hipSuccess;
  }
  pthread_mutex_unlock(&lock);
  return rc;
}

hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags) {
  return stream_wait_event(stream, event, flags);
}
hipError_t hipStreamWaitEvent_spt(hipStream_t stream, hipEvent_t event, unsigned int flags) {
  return stream_wait_event(stream == NULL ? hipStreamPerThread : stream, event, flags);
}

hipError_t hipEventSynchronize(hipEvent_t event) {
  pthread_mutex_lock(&lock);
  struct ihipEvent_t *e = find_event(event);
  uint64_t until = e && e->recorded ? e->done_at : 0;
  pthread_mutex_unlock(&lock);
  if (!e) return hipErrorInvalidHandle;
  sleep_until(until);
  return hipSuccess;
}

hipError_t hipEventQuery(hipEvent_t event) {
  pthread_mutex_lock(&lock);
  struct ihipEvent_t *e = find_event(event);
  hipError_t rc = !e ? hipErrorInvalidHandle
                     : (e->recorded && e->done_at > now_ns() ? hipErrorNotReady : hipSuccess);
  pthread_mutex_unlock(&lock);
  return rc;
}

hipError_t hipEventElapsedTime(float *ms, hipEvent_t start, hipEvent_t stop) {
  if (!ms) return hipErrorInvalidValue;
  pthread_mutex_lock(&lock);
  struct ihipEvent_t *a = find_event(start), *b = find_event(stop);
  hipError_t rc = hipErrorInvalidHandle;
  if (a && b) {
    if (!a->recorded || !b->recorded || a->done_at > now_ns() || b->done_at > now_ns()) {
      rc = hipErrorNotReady;
    } else {
      *ms = (float)((double)((int64_t)b->done_at - (int64_t)a->done_at) / 1e6);
      rc = hipSuccess;
    }
  }
  pthread_mutex_unlock(&lock);
  return rc;
}

__attribute__((constructor)) static void sim_init(void) {
#ifdef SIM_HSA
  sim_hsa_init();
#endif
  for (int d = 0; d < SIM_DEVICES; d++) {
    null_stream[d].magic = STREAM_MAGIC;
    null_stream[d].device = d;
  }
}

/* A launch queues 10 µs of work per block; the function and arguments are not run. */
hipError_t hipLaunchKernel(const void *function_address, dim3 numBlocks, dim3 dimBlocks,
                           void **args, size_t sharedMemBytes, hipStream_t stream) {
  (void)dimBlocks, (void)args, (void)sharedMemBytes;
  if (!function_address) return hipErrorInvalidValue;
  return hipSimLaunch(stream, 10u * numBlocks.x * numBlocks.y * numBlocks.z);
}

/* Copies at once (host memory both sides), then queues 1 µs per KiB on the stream. */
hipError_t hipMemcpyAsync(void *dst, const void *src, size_t sizeBytes, hipMemcpyKind kind,
                          hipStream_t stream) {
  if ((!dst || !src) && sizeBytes) return hipErrorInvalidValue;
  if ((unsigned)kind > hipMemcpyDefault) return hipErrorInvalidValue;
  if (sizeBytes) memmove(dst, src, sizeBytes);
  return hipSimLaunch(stream, (unsigned int)(sizeBytes >> 10) + 1);
}
