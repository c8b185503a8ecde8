/* Drives the HSA runtime directly, as CLR does: reserve a slot with
 * hsa_queue_add_write_index_*, write the body, store the header, ring the doorbell with
 * hsa_signal_store_screlease. Two GPU agents, one queue each; every iteration a kernel
 * on agent 0, a barrier on agent 1 that waits for it (barrier-AND, barrier-OR also on the
 * previous iteration's last kernel, or AMD's vendor barrier-value, in turn), then a kernel
 * on agent 1; every fourth iteration an agent dispatch on agent 0; sometimes two packets
 * per doorbell. Logs every packet it published, one line each (type 0: barrier-value):
 *   agent queue index type completion_signal dep0 dep1
 * With $SCENARIO_BURST=N, it then publishes N kernels on agent 0's queue behind a single
 * doorbell (more than a probe reads at once). With $SCENARIO_GATE=N, after N iterations it
 * prints "ready" and waits for a line on stdin (an attach finds its queues existing).
 * With $SCENARIO_ENUM_GATE, it prints "enumerating" once it has its first GPU agent and
 * waits for a line (an attach comes in the middle of the agents' enumeration).
 * With $SCENARIO_OUT_OF_ORDER, doorbells then
 * ring out of order and before their packet is written (see out_of_order).
 * usage: hsa_scenario ITERATIONS QUEUE_SIZE   (log: $SCENARIO_LOG) */
#define _GNU_SOURCE
#include "hsa_sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static hsa_agent_t gpus[2];
static int ngpus;
static FILE *out;

static hsa_status_t find_gpu(hsa_agent_t a, void *data) {
  (void)data;
  uint32_t type = 0;
  if (hsa_agent_get_info(a, HSA_AGENT_INFO_DEVICE, &type) == 0 && type == HSA_DEVICE_TYPE_GPU && ngpus < 2)
    gpus[ngpus++] = a;
  if (ngpus == 1 && type == HSA_DEVICE_TYPE_GPU && getenv("SCENARIO_ENUM_GATE")) {
    char buf[16];
    printf("enumerating\n");
    fflush(stdout);
    if (!fgets(buf, sizeof buf, stdin)) exit(5);
  }
  return HSA_STATUS_SUCCESS;
}

/* Reserves a slot (waiting while the ring is full). */
static uint64_t reserve_slot(hsa_queue_t *q) {
  uint64_t idx = hsa_queue_add_write_index_screlease(q, 1);
  while (idx - hsa_queue_load_read_index_scacquire(q) >= q->size) ;
  return idx;
}

/* Writes the body; the header is stored last. */
static void write_slot(hsa_queue_t *q, uint64_t idx, const void *body, uint16_t header) {
  uint8_t *slot = (uint8_t *)q->base_address + (idx & (q->size - 1)) * 64;
  memcpy(slot + 2, (const uint8_t *)body + 2, 62);
  __atomic_store_n((uint16_t *)slot, header, __ATOMIC_RELEASE);
}

static uint64_t reserve(hsa_queue_t *q, void *body, uint16_t header) {
  uint64_t idx = reserve_slot(q);
  write_slot(q, idx, body, header);
  return idx;
}

static void log_packet(int agent, hsa_queue_t *q, uint64_t idx, int type, hsa_signal_t done,
                       uint64_t dep0, uint64_t dep1) {
  fprintf(out, "%d %#llx %llu %d %#llx %#llx %#llx\n", agent, (unsigned long long)(uintptr_t)q,
          (unsigned long long)idx, type, (unsigned long long)done.handle, (unsigned long long)dep0,
          (unsigned long long)dep1);
}

static uint64_t kernel(int agent, hsa_queue_t *q, hsa_signal_t done, uint32_t grid) {
  hsa_kernel_dispatch_packet_t k;
  memset(&k, 0, sizeof k);
  k.setup = 1;
  k.workgroup_size_x = 64; k.workgroup_size_y = 1; k.workgroup_size_z = 1;
  k.grid_size_x = grid; k.grid_size_y = 1; k.grid_size_z = 1;
  k.kernel_object = 0x7000 + (uint64_t)agent;
  k.kernarg_address = (void *)(uintptr_t)0x8000;
  k.completion_signal = done;
  uint64_t idx = reserve(q, &k, HSA_PACKET_TYPE_KERNEL_DISPATCH | 1 << 8);
  log_packet(agent, q, idx, HSA_PACKET_TYPE_KERNEL_DISPATCH, done, 0, 0);
  return idx;
}

static uint64_t barrier(int agent, hsa_queue_t *q, int type, hsa_signal_t dep, hsa_signal_t dep2,
                        hsa_signal_t done) {
  hsa_barrier_and_packet_t b;
  memset(&b, 0, sizeof b);
  b.dep_signal[0] = dep;
  b.dep_signal[1] = dep2;
  b.completion_signal = done;
  uint64_t idx = reserve(q, &b, (uint16_t)(type | 1 << 8));
  log_packet(agent, q, idx, type, done, dep.handle, dep2.handle);
  return idx;
}

/* AMD's barrier-value packet, as CLR publishes on MI200/MI300: wait until dep < 1. */
static uint64_t barrier_value(int agent, hsa_queue_t *q, hsa_signal_t dep, hsa_signal_t done) {
  hsa_amd_barrier_value_packet_t b;
  memset(&b, 0, sizeof b);
  b.AmdFormat = HSA_AMD_PACKET_TYPE_BARRIER_VALUE;
  b.signal = dep;
  b.value = 1;
  b.mask = -1;
  b.cond = HSA_SIGNAL_CONDITION_LT;
  b.completion_signal = done;
  uint64_t idx = reserve(q, &b, HSA_PACKET_TYPE_VENDOR_SPECIFIC | 1 << 8);
  log_packet(agent, q, idx, HSA_PACKET_TYPE_VENDOR_SPECIFIC, done, dep.handle, 0);
  return idx;
}

static uint64_t agent_dispatch(int agent, hsa_queue_t *q, uint64_t arg) {
  hsa_agent_dispatch_packet_t a;
  memset(&a, 0, sizeof a);
  a.type = 7;
  a.arg[0] = arg;
  uint64_t idx = reserve(q, &a, HSA_PACKET_TYPE_AGENT_DISPATCH | 1 << 8);
  log_packet(agent, q, idx, HSA_PACKET_TYPE_AGENT_DISPATCH, a.completion_signal, 0, 0);
  return idx;
}

static hsa_kernel_dispatch_packet_t kernel_body(hsa_signal_t done) {
  hsa_kernel_dispatch_packet_t k;
  memset(&k, 0, sizeof k);
  k.setup = 1;
  k.workgroup_size_x = 64; k.workgroup_size_y = 1; k.workgroup_size_z = 1;
  k.grid_size_x = 64; k.grid_size_y = 1; k.grid_size_z = 1;
  k.completion_signal = done;
  return k;
}

/* Two producers' doorbells out of order on agent 0's queue, as a shared queue sees them:
 * A reserves, B reserves, writes and rings first (A's slot is still empty); A's packet is
 * written and both run before A rings. Then C rings before writing its packet, behind a
 * barrier D that holds the queue, and rings again once written. A tracer reading the ring
 * at doorbells sees A and B only after they were consumed, C on its second ring. */
static void out_of_order(hsa_queue_t *q) {
  hsa_signal_t done, gate, d_done;
  hsa_signal_create(2, 0, NULL, &done);
  uint64_t a = reserve_slot(q), b = reserve_slot(q);
  hsa_kernel_dispatch_packet_t k = kernel_body(done);
  write_slot(q, b, &k, HSA_PACKET_TYPE_KERNEL_DISPATCH | 1 << 8);
  log_packet(0, q, b, HSA_PACKET_TYPE_KERNEL_DISPATCH, done, 0, 0);
  hsa_signal_store_screlease(q->doorbell_signal, (int64_t)b);
  write_slot(q, a, &k, HSA_PACKET_TYPE_KERNEL_DISPATCH | 1 << 8);
  log_packet(0, q, a, HSA_PACKET_TYPE_KERNEL_DISPATCH, done, 0, 0);
  while (hsa_queue_load_read_index_scacquire(q) <= b) ; /* both consumed */
  hsa_signal_store_screlease(q->doorbell_signal, (int64_t)a);

  hsa_signal_create(1, 0, NULL, &gate);
  hsa_signal_create(1, 0, NULL, &d_done);
  hsa_signal_t none = {0};
  uint64_t d = barrier(0, q, HSA_PACKET_TYPE_BARRIER_AND, gate, none, d_done);
  hsa_signal_store_screlease(q->doorbell_signal, (int64_t)d);
  hsa_signal_store_relaxed(done, 1);
  uint64_t c = reserve_slot(q);
  hsa_signal_store_screlease(q->doorbell_signal, (int64_t)c);
  write_slot(q, c, &k, HSA_PACKET_TYPE_KERNEL_DISPATCH | 1 << 8);
  log_packet(0, q, c, HSA_PACKET_TYPE_KERNEL_DISPATCH, done, 0, 0);
  hsa_signal_store_screlease(q->doorbell_signal, (int64_t)c);
  hsa_signal_store_relaxed(gate, 0);
  hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_LT, 1, UINT64_MAX, 0);
  hsa_signal_destroy(done);
  hsa_signal_destroy(gate);
  hsa_signal_destroy(d_done);
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  int iters = atoi(argv[1]);
  uint32_t qsize = (uint32_t)atoi(argv[2]);
  const char *path = getenv("SCENARIO_LOG");
  out = fopen(path ? path : "/dev/null", "w");
  hsa_init();
  hsa_iterate_agents(find_gpu, NULL);
  if (ngpus < 2) { fprintf(stderr, "needs two GPU agents\n"); return 1; }
  hsa_queue_t *q[2];
  for (int i = 0; i < 2; i++)
    if (hsa_queue_create(gpus[i], qsize, 0, NULL, NULL, 0, 0, &q[i])) return 1;
  hsa_signal_t last = {0};
  int gate = getenv("SCENARIO_GATE") ? atoi(getenv("SCENARIO_GATE")) : -1;
  for (int i = 0; i < iters; i++) {
    if (i == gate) {
      char buf[16];
      fflush(out);
      printf("ready\n");
      fflush(stdout);
      if (!fgets(buf, sizeof buf, stdin)) return 5;
    }
    hsa_signal_t k0, b1, k1;
    hsa_signal_create(1, 0, NULL, &k0);
    hsa_signal_create(1, 0, NULL, &b1);
    hsa_signal_create(1, 0, NULL, &k1);
    uint64_t idx = kernel(0, q[0], k0, 4096);
    hsa_signal_store_screlease(q[0]->doorbell_signal, (int64_t)idx);
    if (i % 4 == 3) {
      idx = agent_dispatch(0, q[0], (uint64_t)i);
      hsa_signal_store_screlease(q[0]->doorbell_signal, (int64_t)idx);
    }
    hsa_signal_t none = {0};
    if (i % 3 == 0) idx = barrier(1, q[1], HSA_PACKET_TYPE_BARRIER_AND, k0, none, b1);
    else if (i % 3 == 1) idx = barrier(1, q[1], HSA_PACKET_TYPE_BARRIER_OR, k0, last, b1);
    else idx = barrier_value(1, q[1], k0, b1);
    /* Every third iteration, the barrier and the kernel share one doorbell. */
    if (i % 3 != 0) hsa_signal_store_screlease(q[1]->doorbell_signal, (int64_t)idx);
    idx = kernel(1, q[1], k1, 2048);
    hsa_signal_store_screlease(q[1]->doorbell_signal, (int64_t)idx);
    hsa_signal_wait_scacquire(k1, HSA_SIGNAL_CONDITION_LT, 1, UINT64_MAX, 0);
    if (last.handle) hsa_signal_destroy(last);
    hsa_signal_destroy(k0);
    hsa_signal_destroy(b1);
    last = k1;
  }
  const char *burst = getenv("SCENARIO_BURST");
  if (burst) {
    int n = atoi(burst);
    hsa_signal_t all;
    hsa_signal_create(n, 0, NULL, &all);
    uint64_t idx = 0;
    for (int j = 0; j < n; j++) idx = kernel(0, q[0], all, 64);
    hsa_signal_store_screlease(q[0]->doorbell_signal, (int64_t)idx);
    hsa_signal_wait_scacquire(all, HSA_SIGNAL_CONDITION_LT, 1, UINT64_MAX, 0);
    hsa_signal_destroy(all);
  }
  if (getenv("SCENARIO_OUT_OF_ORDER")) out_of_order(q[0]);
  hsa_queue_destroy(q[0]);
  hsa_queue_destroy(q[1]);
  fclose(out);
  return 0;
}
