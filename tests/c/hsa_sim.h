/* The slice of the HSA runtime ABI (hsa.h, ROCr 5.2) the simulated runtime implements. */
#ifndef ROCSYNC_HSA_SIM_H
#define ROCSYNC_HSA_SIM_H
#include <stdint.h>

typedef int hsa_status_t;
typedef struct { uint64_t handle; } hsa_agent_t;
typedef struct { uint64_t handle; } hsa_signal_t;
typedef int64_t hsa_signal_value_t;

/* hsa_queue_t: 40 bytes, as on x86-64 (HSA_LARGE_MODEL). */
typedef struct {
  uint32_t type;
  uint32_t features;
  void *base_address;
  hsa_signal_t doorbell_signal;
  uint32_t size;
  uint32_t reserved1;
  uint64_t id;
} hsa_queue_t;

enum { HSA_STATUS_SUCCESS = 0, HSA_STATUS_ERROR_INVALID_ARGUMENT = 0x1001,
       HSA_STATUS_ERROR_INVALID_QUEUE_CREATION = 0x1002, HSA_STATUS_INFO_BREAK = 0x1 };
enum { HSA_AGENT_INFO_NAME = 0, HSA_AGENT_INFO_DEVICE = 17 };
enum { HSA_DEVICE_TYPE_CPU = 0, HSA_DEVICE_TYPE_GPU = 1 };
enum { HSA_PACKET_TYPE_VENDOR_SPECIFIC = 0, HSA_PACKET_TYPE_INVALID = 1,
       HSA_PACKET_TYPE_KERNEL_DISPATCH = 2, HSA_PACKET_TYPE_BARRIER_AND = 3,
       HSA_PACKET_TYPE_AGENT_DISPATCH = 4, HSA_PACKET_TYPE_BARRIER_OR = 5 };
enum { HSA_SIGNAL_CONDITION_EQ = 0, HSA_SIGNAL_CONDITION_NE = 1, HSA_SIGNAL_CONDITION_LT = 2,
       HSA_SIGNAL_CONDITION_GTE = 3 };

typedef struct {
  uint16_t header, setup, workgroup_size_x, workgroup_size_y, workgroup_size_z, reserved0;
  uint32_t grid_size_x, grid_size_y, grid_size_z, private_segment_size, group_segment_size;
  uint64_t kernel_object;
  void *kernarg_address;
  uint64_t reserved2;
  hsa_signal_t completion_signal;
} hsa_kernel_dispatch_packet_t;

typedef struct {
  uint16_t header, reserved0;
  uint32_t reserved1;
  hsa_signal_t dep_signal[5];
  uint64_t reserved2;
  hsa_signal_t completion_signal;
} hsa_barrier_and_packet_t;

/* Barrier-OR has the same layout as barrier-AND. */
typedef hsa_barrier_and_packet_t hsa_barrier_or_packet_t;

typedef struct {
  uint16_t header, type;
  uint32_t reserved0;
  void *return_address;
  uint64_t arg[4];
  uint64_t reserved2;
  hsa_signal_t completion_signal;
} hsa_agent_dispatch_packet_t;

/* hsa_ext_amd.h: a vendor packet (type 0) with AmdFormat 2 waits until
 * (value of signal & mask) cond value holds. */
enum { HSA_AMD_PACKET_TYPE_BARRIER_VALUE = 2 };
typedef struct {
  uint16_t header;
  uint8_t AmdFormat, reserved;
  uint32_t reserved0;
  hsa_signal_t signal;
  hsa_signal_value_t value, mask;
  uint32_t cond, reserved1;
  uint64_t reserved2, reserved3;
  hsa_signal_t completion_signal;
} hsa_amd_barrier_value_packet_t;

hsa_status_t hsa_init(void);
hsa_status_t hsa_shut_down(void);
hsa_status_t hsa_iterate_agents(hsa_status_t (*cb)(hsa_agent_t, void *), void *data);
hsa_status_t hsa_agent_get_info(hsa_agent_t agent, int attribute, void *value);
hsa_status_t hsa_signal_create(hsa_signal_value_t initial, uint32_t num_consumers,
                               const hsa_agent_t *consumers, hsa_signal_t *signal);
hsa_status_t hsa_signal_destroy(hsa_signal_t signal);
hsa_signal_value_t hsa_signal_load_relaxed(hsa_signal_t signal);
void hsa_signal_store_relaxed(hsa_signal_t signal, hsa_signal_value_t value);
void hsa_signal_store_screlease(hsa_signal_t signal, hsa_signal_value_t value);
hsa_signal_value_t hsa_signal_wait_scacquire(hsa_signal_t signal, int condition,
                                             hsa_signal_value_t compare, uint64_t timeout, int state);
hsa_status_t hsa_queue_create(hsa_agent_t agent, uint32_t size, uint32_t type,
                              void (*cb)(hsa_status_t, hsa_queue_t *, void *), void *data,
                              uint32_t private_segment_size, uint32_t group_segment_size,
                              hsa_queue_t **queue);
hsa_status_t hsa_queue_destroy(hsa_queue_t *queue);
uint64_t hsa_queue_add_write_index_screlease(const hsa_queue_t *queue, uint64_t value);
uint64_t hsa_queue_add_write_index_relaxed(const hsa_queue_t *queue, uint64_t value);
uint64_t hsa_queue_load_read_index_scacquire(const hsa_queue_t *queue);
#endif
