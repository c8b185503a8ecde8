/* A simulated HSA runtime (ROCr) with the real ABI for queues, signals and agents: one
 * CPU and two GPU agents; each queue is a real AQL ring in memory with a doorbell signal
 * (kind DOORBELL, queue_ptr set, as ROCr's amd_signal_t) and a packet-processor thread
 * that executes packets in order, honours barrier-AND/OR and AMD barrier-value
 * dependencies, completes agent dispatches at once and decrements completion signals. */
#define _GNU_SOURCE
#include "hsa_sim.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* amd_signal_t's leading fields: kind at 0, value at 8, queue_ptr at 48. */
struct signal {
  int64_t kind; /* 1 user, -1 doorbell */
  volatile int64_t value;
  uint64_t pad[4];
  void *queue_ptr;
  uint64_t pad2;
};

/* amd_queue_t's leading fields: hsa_queue_t at 0, write index at 56, read index at 128. */
struct queue {
  hsa_queue_t q;
  uint8_t pad0[56 - sizeof(hsa_queue_t)];
  volatile uint64_t write_index;
  uint8_t pad1[128 - 64];
  volatile uint64_t read_index;
  struct signal doorbell;
  pthread_t thread;
  volatile int stop;
};

struct agent { int type; const char *name; };
static struct agent agents[3] = {{HSA_DEVICE_TYPE_CPU, "sim-cpu"}, {HSA_DEVICE_TYPE_GPU, "sim-gpu0"},
                                 {HSA_DEVICE_TYPE_GPU, "sim-gpu1"}};
static uint64_t next_queue_id;

hsa_status_t hsa_init(void) { return HSA_STATUS_SUCCESS; }
hsa_status_t hsa_shut_down(void) { return HSA_STATUS_SUCCESS; }

hsa_status_t hsa_iterate_agents(hsa_status_t (*cb)(hsa_agent_t, void *), void *data) {
  for (int i = 0; i < 3; i++) {
    hsa_status_t s = cb((hsa_agent_t){(uint64_t)(uintptr_t)&agents[i]}, data);
    if (s == HSA_STATUS_INFO_BREAK) return HSA_STATUS_SUCCESS;
    if (s != HSA_STATUS_SUCCESS) return s;
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_agent_get_info(hsa_agent_t agent, int attribute, void *value) {
  struct agent *a = (struct agent *)(uintptr_t)agent.handle;
  if (!a || !value) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (attribute == HSA_AGENT_INFO_DEVICE) { *(uint32_t *)value = (uint32_t)a->type; return 0; }
  if (attribute == HSA_AGENT_INFO_NAME) { strncpy(value, a->name, 64); return 0; }
  return HSA_STATUS_ERROR_INVALID_ARGUMENT;
}

hsa_status_t hsa_signal_create(hsa_signal_value_t initial, uint32_t n, const hsa_agent_t *c,
                               hsa_signal_t *signal) {
  (void)n; (void)c;
  if (!signal) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  struct signal *s = calloc(1, sizeof *s);
  s->kind = 1;
  s->value = initial;
  signal->handle = (uint64_t)(uintptr_t)s;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_signal_destroy(hsa_signal_t signal) {
  free((void *)(uintptr_t)signal.handle);
  return HSA_STATUS_SUCCESS;
}

hsa_signal_value_t hsa_signal_load_relaxed(hsa_signal_t signal) {
  return __atomic_load_n(&((struct signal *)(uintptr_t)signal.handle)->value, __ATOMIC_ACQUIRE);
}

void hsa_signal_store_relaxed(hsa_signal_t signal, hsa_signal_value_t value) {
  __atomic_store_n(&((struct signal *)(uintptr_t)signal.handle)->value, value, __ATOMIC_RELEASE);
}

void hsa_signal_store_screlease(hsa_signal_t signal, hsa_signal_value_t value) {
  hsa_signal_store_relaxed(signal, value);
}

static int holds(int64_t v, int cond, int64_t c) {
  switch (cond) {
    case HSA_SIGNAL_CONDITION_EQ: return v == c;
    case HSA_SIGNAL_CONDITION_NE: return v != c;
    case HSA_SIGNAL_CONDITION_LT: return v < c;
    default: return v >= c;
  }
}

hsa_signal_value_t hsa_signal_wait_scacquire(hsa_signal_t signal, int cond, hsa_signal_value_t c,
                                             uint64_t timeout, int state) {
  (void)timeout; (void)state;
  int64_t v;
  while (!holds(v = hsa_signal_load_relaxed(signal), cond, c)) sched_yield();
  return v;
}

static void pause_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

static int ready(hsa_signal_t s) { return s.handle == 0 || hsa_signal_load_relaxed(s) == 0; }

/* Executes packets in order once the doorbell says they are published. */
static void *processor(void *arg) {
  struct queue *q = arg;
  uint64_t *ring = q->q.base_address;
  while (!q->stop) {
    uint64_t r = q->read_index;
    if ((int64_t)r > __atomic_load_n(&q->doorbell.value, __ATOMIC_ACQUIRE)) { pause_us(20); continue; }
    uint8_t *pkt = (uint8_t *)ring + (r & (q->q.size - 1)) * 64;
    uint16_t header = __atomic_load_n((uint16_t *)pkt, __ATOMIC_ACQUIRE);
    int type = header & 0xff;
    if (type == HSA_PACKET_TYPE_INVALID) { pause_us(20); continue; }
    hsa_signal_t done = {0};
    if (type == HSA_PACKET_TYPE_KERNEL_DISPATCH) {
      hsa_kernel_dispatch_packet_t *k = (void *)pkt;
      pause_us(k->grid_size_x / 1024 + 1); /* simulated work */
      done = k->completion_signal;
    } else if (type == HSA_PACKET_TYPE_BARRIER_AND || type == HSA_PACKET_TYPE_BARRIER_OR) {
      hsa_barrier_and_packet_t *b = (void *)pkt;
      for (;;) {
        int all = 1, any = 0, deps = 0;
        for (int i = 0; i < 5; i++) {
          if (!b->dep_signal[i].handle) continue;
          deps++;
          if (ready(b->dep_signal[i])) any = 1; else all = 0;
        }
        if (q->stop || (type == HSA_PACKET_TYPE_BARRIER_AND ? all : (any || !deps))) break;
        pause_us(20);
      }
      done = b->completion_signal;
    } else if (type == HSA_PACKET_TYPE_VENDOR_SPECIFIC &&
               pkt[2] == HSA_AMD_PACKET_TYPE_BARRIER_VALUE) {
      hsa_amd_barrier_value_packet_t *b = (void *)pkt;
      /* No signal: its value reads as 0. */
      while (!q->stop &&
             !holds((b->signal.handle ? hsa_signal_load_relaxed(b->signal) : 0) & b->mask,
                    (int)b->cond, b->value))
        pause_us(20);
      done = b->completion_signal;
    } else if (type == HSA_PACKET_TYPE_AGENT_DISPATCH) {
      done = ((hsa_agent_dispatch_packet_t *)pkt)->completion_signal;
    }
    if (done.handle)
      __atomic_sub_fetch(&((struct signal *)(uintptr_t)done.handle)->value, 1, __ATOMIC_RELEASE);
    __atomic_store_n((uint16_t *)pkt, HSA_PACKET_TYPE_INVALID, __ATOMIC_RELEASE);
    __atomic_store_n(&q->read_index, r + 1, __ATOMIC_RELEASE);
  }
  return NULL;
}

hsa_status_t hsa_queue_create(hsa_agent_t agent, uint32_t size, uint32_t type,
                              void (*cb)(hsa_status_t, hsa_queue_t *, void *), void *data,
                              uint32_t private_segment_size, uint32_t group_segment_size,
                              hsa_queue_t **out) {
  (void)cb; (void)data; (void)private_segment_size; (void)group_segment_size;
  struct agent *a = (struct agent *)(uintptr_t)agent.handle;
  if (!a || a->type != HSA_DEVICE_TYPE_GPU || !out || size == 0 || (size & (size - 1)))
    return HSA_STATUS_ERROR_INVALID_QUEUE_CREATION;
  struct queue *q = aligned_alloc(64, sizeof *q + 63 - (sizeof *q + 63) % 64);
  memset(q, 0, sizeof *q);
  q->q.type = type;
  q->q.features = 3; /* kernel and agent dispatch */
  q->q.size = size;
  q->q.id = __atomic_add_fetch(&next_queue_id, 1, __ATOMIC_SEQ_CST);
  q->q.base_address = aligned_alloc(64, (size_t)size * 64);
  for (uint32_t i = 0; i < size; i++) *(uint16_t *)((uint8_t *)q->q.base_address + i * 64) = HSA_PACKET_TYPE_INVALID;
  q->doorbell.kind = -1;
  q->doorbell.value = -1;
  q->doorbell.queue_ptr = &q->q;
  q->q.doorbell_signal.handle = (uint64_t)(uintptr_t)&q->doorbell;
  pthread_create(&q->thread, NULL, processor, q);
  *out = &q->q;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_queue_destroy(hsa_queue_t *queue) {
  if (!queue) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  struct queue *q = (struct queue *)queue;
  q->stop = 1;
  pthread_join(q->thread, NULL);
  free(q->q.base_address);
  free(q);
  return HSA_STATUS_SUCCESS;
}

uint64_t hsa_queue_add_write_index_screlease(const hsa_queue_t *queue, uint64_t value) {
  return __atomic_fetch_add(&((struct queue *)queue)->write_index, value, __ATOMIC_SEQ_CST);
}

uint64_t hsa_queue_add_write_index_relaxed(const hsa_queue_t *queue, uint64_t value) {
  return hsa_queue_add_write_index_screlease(queue, value);
}

uint64_t hsa_queue_load_read_index_scacquire(const hsa_queue_t *queue) {
  return __atomic_load_n(&((struct queue *)queue)->read_index, __ATOMIC_ACQUIRE);
}
