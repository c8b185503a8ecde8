/* What the scenario's files share: the runtime's functions (linked, or with -DUSE_DLOPEN
 * looked up at run time), the call log, and the macros that call and log each hooked API. */
#ifndef ROCSYNC_SCENARIO_H
#define ROCSYNC_SCENARIO_H

#include <stdint.h>

#ifdef USE_DLOPEN
#define HIP_SIM_NO_PROTOTYPES
#endif
#include "hip_sim.h"

#ifdef USE_DLOPEN
#define HIP_PTR(ret, name, params) extern ret(*p_##name) params;
HIP_SIM_APIS(HIP_PTR)
#define H(name) p_##name
#else
#define H(name) name
#endif

/* ---- the call log (scenario_log.c) ---- */
/* Orders calls across threads. */
extern uint64_t call_seq;
/* CLOCK_MONOTONIC ns: the clock BPF's timestamps read, so tests can bound each call. */
uint64_t mono_ns(void);
uint64_t ms_now(void);
void log_call(const char *api, uint64_t a0, uint64_t a1, uint64_t a2, int rc, uint64_t s,
              uint64_t t0, uint64_t t1);
/* Forgets what this process logged so far (a forked child's log is its own). */
void forget_logs(void);
/* Writes every thread's calls to $SCENARIO_LOG, one line each. */
void write_logs(void);

/* Calls EXPR, then logs it; argument expressions are read after the call so that
 * out-parameters log the value written. */
/* Expands the name first, so a build under CUDA's names logs those. */
#define API_NAME(api) #api
#define CALL(api, a0, a1, a2, expr)                                                   \
  ({                                                                                  \
    uint64_t _s = __atomic_add_fetch(&call_seq, 1, __ATOMIC_SEQ_CST);                   \
    uint64_t _t0 = mono_ns();                                                         \
    hipError_t _rc = (expr);                                                          \
    uint64_t _t1 = mono_ns();                                                         \
    log_call(API_NAME(api), (uint64_t)(uintptr_t)(a0), (uint64_t)(uintptr_t)(a1),              \
             (uint64_t)(uintptr_t)(a2), _rc, _s, _t0, _t1);                           \
    _rc;                                                                              \
  })

#define EventRecord(e, s) CALL(hipEventRecord, e, s, 0, H(hipEventRecord)(e, s))
#define EventRecordSpt(e, s) CALL(hipEventRecord_spt, e, s, 0, H(hipEventRecord_spt)(e, s))
#define EventRecordWithFlags(e, s, f) \
  CALL(hipEventRecordWithFlags, e, s, f, H(hipEventRecordWithFlags)(e, s, f))
#define StreamWaitEvent(s, e) CALL(hipStreamWaitEvent, s, e, 0, H(hipStreamWaitEvent)(s, e, 0))
#define StreamWaitEventSpt(s, e) \
  CALL(hipStreamWaitEvent_spt, s, e, 0, H(hipStreamWaitEvent_spt)(s, e, 0))
#define EventSynchronize(e) CALL(hipEventSynchronize, e, 0, 0, H(hipEventSynchronize)(e))
#define StreamSynchronize(s) CALL(hipStreamSynchronize, s, 0, 0, H(hipStreamSynchronize)(s))
#define StreamSynchronizeSpt(s) \
  CALL(hipStreamSynchronize_spt, s, 0, 0, H(hipStreamSynchronize_spt)(s))
#define EventQuery(e) CALL(hipEventQuery, e, 0, 0, H(hipEventQuery)(e))
#define DeviceSynchronize() CALL(hipDeviceSynchronize, 0, 0, 0, H(hipDeviceSynchronize)())
#define EventDestroy(e) CALL(hipEventDestroy, e, 0, 0, H(hipEventDestroy)(e))
#define SetDevice(d) CALL(hipSetDevice, (uint32_t)(d), 0, 0, H(hipSetDevice)(d))
#define GetDevice(p) CALL(hipGetDevice, (uint32_t)*(p), 0, 0, H(hipGetDevice)(p))
#define StreamCreate(p) CALL(hipStreamCreate, *(p), 0, 0, H(hipStreamCreate)(p))
#define StreamCreateWithFlags(p, f) \
  CALL(hipStreamCreateWithFlags, *(p), f, 0, H(hipStreamCreateWithFlags)(p, f))
#define StreamCreateWithPriority(p, f, pr) \
  CALL(hipStreamCreateWithPriority, *(p), f, (uint32_t)(pr), H(hipStreamCreateWithPriority)(p, f, pr))
#define StreamDestroy(s) CALL(hipStreamDestroy, s, 0, 0, H(hipStreamDestroy)(s))
/* Launches and copies (probed only with --probe): the stream is logged second, where the
 * probe records it. A non-zero sharedMemBytes sits at [rsp+8], next to the stream at
 * [rsp+16], so a probe reading the wrong slot is seen. */
#define LaunchKernel(f, blocks, s)                                                    \
  CALL(hipLaunchKernel, f, s, 0,                                                      \
       H(hipLaunchKernel)(f, (dim3){blocks, 1, 1}, (dim3){64, 1, 1}, NULL, 4096, s))
#define MemcpyAsync(d, src, n, s) \
  CALL(hipMemcpyAsync, d, s, 0, H(hipMemcpyAsync)(d, src, n, hipMemcpyHostToHost, s))
/* Not hooked: called without logging. */
#define EventCreate(p) H(hipEventCreate)(p)
#define Launch(s, us) H(hipSimLaunch)(s, us)

/* ---- modes of several threads, and fork (scenario_threads.c) ---- */
void threads(int n, int iters);
void cross(int iters);
void loop(int ms);
void churn(int ms);
void dense(int ms, int spin_us);
void flood(int us, int n);
void distinct(int n);
void loop_devices(int ms, int devices);
int forked(int iters);

#endif
