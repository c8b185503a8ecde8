/* What the simulated HIP runtime's files share: its handles, and (-DSIM_HSA) the calls
 * through which it submits to the simulated HSA runtime (hip_sim_hsa.c). */
#ifndef ROCSYNC_HIP_SIM_INTERNAL_H
#define ROCSYNC_HIP_SIM_INTERNAL_H

#include <stdint.h>
#include <time.h>

#ifdef SIM_HSA
#include "hsa_sim.h"
#endif

#define SIM_DEVICES 2

struct ihipStream_t {
  uint64_t magic;
  int device;
  uint64_t busy_until; /* ns, CLOCK_MONOTONIC */
  /* hipSimGate: the stream's work is done only once gate(gate_arg) says so. */
  int (*gate)(void *);
  void *gate_arg;
  struct ihipStream_t *next;
#ifdef SIM_HSA
  hsa_queue_t *queue;
  int queue_device; /* the HIP device whose agent the queue was created on */
#endif
};

struct ihipEvent_t {
  uint64_t magic;
  unsigned flags;
  int recorded;
  uint64_t done_at;
#ifdef SIM_HSA
  uint64_t signal; /* completion signal of the record's barrier packet */
#endif
  struct ihipEvent_t *next;
};

#define STREAM_MAGIC 0x53545245414d5f31ull
#define EVENT_MAGIC 0x4556454e545f5f31ull

static inline uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#ifdef SIM_HSA
/* Not exported: the library's symbols are the runtime's. */
#define SIM_INTERNAL __attribute__((visibility("hidden")))
/* Finds the GPU agents, ordered as HIP_VISIBLE_DEVICES says. */
SIM_INTERNAL void sim_hsa_init(void);
/* A kernel dispatch packet for `work_us` of work. Lock held. */
SIM_INTERNAL void submit_kernel(struct ihipStream_t *s, unsigned work_us);
/* A barrier waiting on `dep` (0: none); returns its completion signal. Lock held. */
SIM_INTERNAL uint64_t submit_barrier(struct ihipStream_t *s, uint64_t dep);
#endif

#endif
