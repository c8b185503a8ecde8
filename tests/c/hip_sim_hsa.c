/* The simulated HIP runtime's HSA side (built with -DSIM_HSA): what CLR publishes on the
 * AQL queues of the simulated libhsa-runtime64, and the logs tests compare traces with. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hip_sim.h"
#include "hip_sim_internal.h"

static hsa_agent_t gpu_agents[SIM_DEVICES];
static int n_gpu_agents;

static hsa_status_t find_gpu(hsa_agent_t a, void *data) {
  (void)data;
  uint32_t type = 0;
  if (hsa_agent_get_info(a, HSA_AGENT_INFO_DEVICE, &type) == 0 && type == HSA_DEVICE_TYPE_GPU &&
      n_gpu_agents < SIM_DEVICES)
    gpu_agents[n_gpu_agents++] = a;
  return HSA_STATUS_SUCCESS;
}

/* As CLR: HIP device N is the GPU agent HIP_VISIBLE_DEVICES (else CUDA_VISIBLE_DEVICES)
 * names N-th, in enumeration order; without it, the N-th agent. */
static void apply_visible_devices(void) {
  const char *v = getenv("HIP_VISIBLE_DEVICES");
  if (!v) v = getenv("CUDA_VISIBLE_DEVICES");
  if (!v) return;
  hsa_agent_t all[SIM_DEVICES];
  memcpy(all, gpu_agents, sizeof all);
  for (int d = 0; d < SIM_DEVICES && *v; d++) {
    char *end;
    long a = strtol(v, &end, 10);
    if (end == v || a < 0 || a >= n_gpu_agents) break;
    gpu_agents[d] = all[a];
    v = *end == ',' ? end + 1 : end;
  }
}

/* With $HIP_SIM_PACKET_LOG set, every barrier packet published is logged, one line each:
 *   tid queue index completion_signal dep_signal
 * (written at exit), so tests can check what the trace says each wait submitted. */
static struct { int tid; uint64_t queue, index, done, dep; } packet_log[65536];
static int n_packet_log;

static void write_packet_log(void) {
  const char *path = getenv("HIP_SIM_PACKET_LOG");
  FILE *f = path ? fopen(path, "w") : NULL;
  if (!f) return;
  for (int i = 0; i < n_packet_log; i++)
    fprintf(f, "%d %#llx %llu %#llx %#llx\n", packet_log[i].tid,
            (unsigned long long)packet_log[i].queue, (unsigned long long)packet_log[i].index,
            (unsigned long long)packet_log[i].done, (unsigned long long)packet_log[i].dep);
  fclose(f);
}

/* With $HIP_SIM_EVERY_PACKET_LOG set, every packet published (any kind), one line each:
 *   device queue index type doorbell_before_ns doorbell_after_ns
 * (written at exit): the HIP device whose agent the queue is on, the header's packet type,
 * and CLOCK_MONOTONIC just before and just after its doorbell rang. */
static struct every_packet { int device, type; uint64_t queue, index, before, after; } *every_packet;
static size_t n_every_packet, cap_every_packet;

static void write_every_packet_log(void) {
  const char *path = getenv("HIP_SIM_EVERY_PACKET_LOG");
  FILE *f = path ? fopen(path, "w") : NULL;
  if (!f) return;
  for (size_t i = 0; i < n_every_packet; i++) {
    struct every_packet *p = &every_packet[i];
    fprintf(f, "%d %#llx %llu %d %llu %llu\n", p->device, (unsigned long long)p->queue,
            (unsigned long long)p->index, p->type, (unsigned long long)p->before,
            (unsigned long long)p->after);
  }
  fclose(f);
}

/* Lock held. */
static void log_every_packet(struct ihipStream_t *s, uint64_t idx, uint16_t header,
                             uint64_t before, uint64_t after) {
  if (!getenv("HIP_SIM_EVERY_PACKET_LOG")) return;
  if (n_every_packet == cap_every_packet) {
    size_t cap = cap_every_packet ? 2 * cap_every_packet : 4096;
    struct every_packet *grown = realloc(every_packet, cap * sizeof *grown);
    if (!grown) return;
    if (!every_packet) atexit(write_every_packet_log);
    every_packet = grown;
    cap_every_packet = cap;
  }
  every_packet[n_every_packet++] = (struct every_packet){
      s->queue_device, header & 0xff, (uint64_t)(uintptr_t)s->queue, idx, before, after};
}

/* Publishes one packet on the stream's queue as CLR does: reserve, body, header, doorbell.
 * Called with the lock held, so doorbells of a shared queue ring in order. Returns the
 * write index (or UINT64_MAX without a queue). */
static uint64_t submit(struct ihipStream_t *s, void *body, uint16_t header) {
  if (!s->queue) {
    if (hsa_queue_create(gpu_agents[s->device], 64, 0, NULL, NULL, 0, 0, &s->queue))
      return UINT64_MAX;
    s->queue_device = s->device;
  }
  hsa_queue_t *q = s->queue;
  uint64_t idx = hsa_queue_add_write_index_screlease(q, 1);
  while (idx - hsa_queue_load_read_index_scacquire(q) >= q->size) ;
  uint8_t *slot = (uint8_t *)q->base_address + (idx & (q->size - 1)) * 64;
  memcpy(slot + 2, (uint8_t *)body + 2, 62);
  __atomic_store_n((uint16_t *)slot, header, __ATOMIC_RELEASE);
  uint64_t before = now_ns();
  hsa_signal_store_screlease(q->doorbell_signal, (int64_t)idx);
  log_every_packet(s, idx, header, before, now_ns());
  return idx;
}

static void log_barrier(struct ihipStream_t *s, uint64_t idx, uint64_t done, uint64_t dep) {
  if (idx == UINT64_MAX || n_packet_log == 65536) return;
  if (n_packet_log == 0) atexit(write_packet_log);
  packet_log[n_packet_log++] = (typeof(packet_log[0])){
      (int)syscall(SYS_gettid), (uint64_t)(uintptr_t)s->queue, idx, done, dep};
}

static uint64_t new_signal(void) {
  hsa_signal_t sig = {0};
  hsa_signal_create(1, 0, NULL, &sig);
  return sig.handle;
}

/* With $HIP_SIM_KERNEL_COUNT set, the number of kernel dispatch packets published is
 * written there at exit (tests count them against the daemon's metrics). */
static unsigned long n_kernels;

static void write_kernel_count(void) {
  const char *path = getenv("HIP_SIM_KERNEL_COUNT");
  FILE *f = path ? fopen(path, "w") : NULL;
  if (!f) return;
  fprintf(f, "%lu\n", n_kernels);
  fclose(f);
}

void submit_kernel(struct ihipStream_t *s, unsigned work_us) {
  hsa_kernel_dispatch_packet_t k;
  memset(&k, 0, sizeof k);
  k.setup = 1;
  k.workgroup_size_x = 256; k.workgroup_size_y = 1; k.workgroup_size_z = 1;
  k.grid_size_x = work_us * 1024; k.grid_size_y = 1; k.grid_size_z = 1;
  k.kernel_object = 0x51000;
  k.completion_signal.handle = new_signal();
  if (submit(s, &k, HSA_PACKET_TYPE_KERNEL_DISPATCH | 1 << 8) != UINT64_MAX && n_kernels++ == 0)
    atexit(write_kernel_count);
}

/* A barrier waiting on `dep` (0: none); returns its completion signal. A barrier-AND, or
 * with $HIP_SIM_BARRIER_VALUE AMD's barrier-value packet, as CLR publishes on MI200/MI300.
 * The packet is logged after its doorbell, still under the lock. */
uint64_t submit_barrier(struct ihipStream_t *s, uint64_t dep) {
  uint64_t done = new_signal(), idx;
  if (getenv("HIP_SIM_BARRIER_VALUE")) {
    hsa_amd_barrier_value_packet_t b;
    memset(&b, 0, sizeof b);
    b.AmdFormat = HSA_AMD_PACKET_TYPE_BARRIER_VALUE;
    b.signal.handle = dep;
    b.value = 1;
    b.mask = -1;
    b.cond = HSA_SIGNAL_CONDITION_LT;
    b.completion_signal.handle = done;
    idx = submit(s, &b, HSA_PACKET_TYPE_VENDOR_SPECIFIC | 1 << 8);
  } else {
    hsa_barrier_and_packet_t b;
    memset(&b, 0, sizeof b);
    b.dep_signal[0].handle = dep;
    b.completion_signal.handle = done;
    idx = submit(s, &b, HSA_PACKET_TYPE_BARRIER_AND | 1 << 8);
  }
  log_barrier(s, idx, done, dep);
  return done;
}

void sim_hsa_init(void) {
  hsa_init();
  hsa_iterate_agents(find_gpu, NULL);
  apply_visible_devices();
}
