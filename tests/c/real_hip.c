/* Drives one of Debian's real HIP runtimes (libamdhip64.so.5, .6 or .7: HIP_MAJOR says
 * which it is built against) through every hooked entry point it exports, and logs each
 * call like the scenarios do. Without a GPU every call fails (101 on 5.2, 100 from 6.4 on);
 * the trace must say exactly that.
 *
 *   real_hip           make the calls
 *   real_hip gated     print "ready", wait for a line on stdin, then make the calls */
#define _GNU_SOURCE
#include <hip/hip_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <string.h>

#ifndef HIP_MAJOR
#define HIP_MAJOR 5
#endif

hipError_t hipStreamWaitEvent_spt(hipStream_t, hipEvent_t, unsigned int);
hipError_t hipStreamSynchronize_spt(hipStream_t);
#if HIP_MAJOR >= 6
/* Exported from 6.4 on (hipEventRecord_spt since 5.2's symbol version, but 5.2 itself
 * lacks it); declared here because the build uses Debian 12's 5.2 headers. */
hipError_t hipEventRecord_spt(hipEvent_t, hipStream_t);
hipError_t hipEventRecordWithFlags(hipEvent_t, hipStream_t, unsigned int);
#endif

static FILE *out;
static unsigned long long seq;

static void log_call(const char *api, uint64_t a0, uint64_t a1, uint64_t a2, int rc) {
  if (out)
    fprintf(out, "%llu %d %s %#llx %#llx %#llx %d\n", ++seq, (int)gettid(), api,
            (unsigned long long)a0, (unsigned long long)a1, (unsigned long long)a2, rc);
}

#define LOG(api, a0, a1, a2, expr)                                                        \
  do {                                                                                    \
    int _rc = (int)(expr);                                                                \
    log_call(#api, (uint64_t)(uintptr_t)(a0), (uint64_t)(uintptr_t)(a1),                  \
             (uint64_t)(uintptr_t)(a2), _rc);                                             \
  } while (0)

int main(int argc, char **argv) {
  const char *path = getenv("SCENARIO_LOG");
  out = path ? fopen(path, "w") : NULL;
  if (argc > 1 && strcmp(argv[1], "gated") == 0) {
    char buf[16];
    printf("ready\n");
    fflush(stdout);
    if (!fgets(buf, sizeof buf, stdin)) return 5;
  }
  hipStream_t s = (hipStream_t)0x5678;
  hipEvent_t e = (hipEvent_t)0x1234;
  hipStream_t created = NULL;
  int dev = 7;
  LOG(hipSetDevice, 0, 0, 0, hipSetDevice(0));
  LOG(hipGetDevice, (uint32_t)dev, 0, 0, hipGetDevice(&dev));
  LOG(hipStreamCreate, created, 0, 0, hipStreamCreate(&created));
  LOG(hipStreamCreateWithFlags, created, 1, 0, hipStreamCreateWithFlags(&created, 1));
  LOG(hipStreamCreateWithPriority, created, 0, (uint32_t)-1, hipStreamCreateWithPriority(&created, 0, -1));
  LOG(hipEventRecord, e, s, 0, hipEventRecord(e, s));
#if HIP_MAJOR >= 6
  LOG(hipEventRecord_spt, e, 2, 0, hipEventRecord_spt(e, (hipStream_t)2));
  LOG(hipEventRecordWithFlags, e, s, 1, hipEventRecordWithFlags(e, s, 1));
#endif
  LOG(hipEventQuery, e, 0, 0, hipEventQuery(e));
  LOG(hipStreamWaitEvent, s, e, 0, hipStreamWaitEvent(s, e, 0));
  LOG(hipStreamWaitEvent_spt, 2, e, 0, hipStreamWaitEvent_spt((hipStream_t)2, e, 0));
  LOG(hipEventSynchronize, e, 0, 0, hipEventSynchronize(e));
  LOG(hipStreamSynchronize, s, 0, 0, hipStreamSynchronize(s));
  LOG(hipStreamSynchronize_spt, 2, 0, 0, hipStreamSynchronize_spt((hipStream_t)2));
  LOG(hipDeviceSynchronize, 0, 0, 0, hipDeviceSynchronize());
  LOG(hipEventDestroy, e, 0, 0, hipEventDestroy(e));
  LOG(hipStreamDestroy, s, 0, 0, hipStreamDestroy(s));
  if (out) fclose(out);
  return 0;
}
