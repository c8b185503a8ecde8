/* The slice of the HIP ABI that the simulated runtime implements: the same names,
 * prototypes and error codes as ROCm's hip_runtime_api.h. */
#ifndef ROCSYNC_HIP_SIM_H
#define ROCSYNC_HIP_SIM_H

#include <stddef.h>

typedef int hipError_t;
typedef struct ihipStream_t *hipStream_t;
typedef struct ihipEvent_t *hipEvent_t;
/* 12 bytes passed by value: two registers each, which pushes hipLaunchKernel's
 * sharedMemBytes and stream onto the stack (x86-64 SysV). */
typedef struct dim3 { unsigned int x, y, z; } dim3;
typedef enum hipMemcpyKind {
  hipMemcpyHostToHost = 0,
  hipMemcpyHostToDevice = 1,
  hipMemcpyDeviceToHost = 2,
  hipMemcpyDeviceToDevice = 3,
  hipMemcpyDefault = 4,
} hipMemcpyKind;

enum {
  hipSuccess = 0,
  hipErrorInvalidValue = 1,
  hipErrorNoDevice = 100,
  hipErrorInvalidDevice = 101,
  hipErrorInvalidHandle = 400,
  hipErrorNotReady = 600,
};

#define hipStreamPerThread ((hipStream_t)2)

#define HIP_API(ret, name, params) ret name params;
#define HIP_SIM_APIS(X)                                                              \
  X(hipError_t, hipInit, (unsigned int flags))                                       \
  X(hipError_t, hipGetDeviceCount, (int *count))                                     \
  X(hipError_t, hipSetDevice, (int device))                                          \
  X(hipError_t, hipGetDevice, (int *device))                                         \
  X(hipError_t, hipDeviceSynchronize, (void))                                        \
  X(hipError_t, hipStreamCreate, (hipStream_t * stream))                             \
  X(hipError_t, hipStreamCreateWithFlags, (hipStream_t * stream, unsigned int flags)) \
  X(hipError_t, hipStreamCreateWithPriority,                                         \
    (hipStream_t * stream, unsigned int flags, int priority))                        \
  X(hipError_t, hipStreamDestroy, (hipStream_t stream))                              \
  X(hipError_t, hipStreamSynchronize, (hipStream_t stream))                          \
  X(hipError_t, hipStreamSynchronize_spt, (hipStream_t stream))                      \
  X(hipError_t, hipStreamWaitEvent, (hipStream_t stream, hipEvent_t event, unsigned int flags)) \
  X(hipError_t, hipStreamWaitEvent_spt, (hipStream_t stream, hipEvent_t event, unsigned int flags)) \
  X(hipError_t, hipEventCreate, (hipEvent_t * event))                                \
  X(hipError_t, hipEventCreateWithFlags, (hipEvent_t * event, unsigned int flags))   \
  X(hipError_t, hipEventRecord, (hipEvent_t event, hipStream_t stream))              \
  X(hipError_t, hipEventRecord_spt, (hipEvent_t event, hipStream_t stream))          \
  X(hipError_t, hipEventRecordWithFlags, (hipEvent_t event, hipStream_t stream, unsigned int flags)) \
  X(hipError_t, hipEventSynchronize, (hipEvent_t event))                             \
  X(hipError_t, hipEventQuery, (hipEvent_t event))                                   \
  X(hipError_t, hipEventElapsedTime, (float *ms, hipEvent_t start, hipEvent_t stop)) \
  X(hipError_t, hipEventDestroy, (hipEvent_t event))                                 \
  X(hipError_t, hipSimLaunch, (hipStream_t stream, unsigned int work_us))           \
  X(hipError_t, hipLaunchKernel, (const void *function_address, dim3 numBlocks,      \
    dim3 dimBlocks, void **args, size_t sharedMemBytes, hipStream_t stream))         \
  X(hipError_t, hipMemcpyAsync, (void *dst, const void *src, size_t sizeBytes,       \
    hipMemcpyKind kind, hipStream_t stream))

#ifndef HIP_SIM_NO_PROTOTYPES
HIP_SIM_APIS(HIP_API)
/* Not a HIP API: the stream's synchronisation waits until gate(arg) is non-zero. */
hipError_t hipSimGate(hipStream_t stream, int (*gate)(void *), void *arg);
#endif

#endif
