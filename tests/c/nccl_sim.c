/* A collective library that links the CUDA runtime statically, as NCCL does: built with
 * the simulated runtime (under CUDA's names) compiled in with hidden visibility, so its
 * cuda* functions are local symbols of this library, and exporting one entry point.
 * simAllReduce(n): n times, the user stream's work is awaited on the library's stream
 * and the library's work on the user stream (an event recorded, a stream waiting on it,
 * each way), then the user stream is synchronized. Returns 0, or the first error.
 * With $SCENARIO_LOG set, every traced call is logged as the scenarios log them
 * ("seq tid api a0 a1 a2 rc"), under the name it has here (cuda*); a created stream is
 * logged as the value its out-parameter received. */
#include "hip_sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static FILE *nccl_log;
static unsigned long long nccl_seq;

static int logged(const char *api, unsigned long long a0, unsigned long long a1,
                  unsigned long long a2, int rc) {
  if (nccl_log)
    fprintf(nccl_log, "%llu %ld %s %#llx %#llx %#llx %d\n", nccl_seq++,
            (long)syscall(SYS_gettid), api, a0, a1, a2, rc);
  return rc;
}

#define NAME_(f) #f
#define NAME(f) NAME_(f)
/* The call's return code, once it is logged with its three logged values. */
#define LOG(f, a0, a1, a2, rc) logged(NAME(f), (unsigned long long)(a0), \
                                      (unsigned long long)(a1), (unsigned long long)(a2), rc)

__attribute__((visibility("default"))) int simAllReduce(int n) {
  const char *path = getenv("SCENARIO_LOG");
  nccl_log = path ? fopen(path, "w") : NULL;
  hipStream_t user = 0, own = 0;
  hipEvent_t in = 0, out = 0;
  int rc = hipStreamCreate(&user);
  rc = LOG(hipStreamCreate, user, 0, 0, rc);
  int r = hipStreamCreate(&own);
  rc |= LOG(hipStreamCreate, own, 0, 0, r);
  rc |= hipEventCreate(&in) | hipEventCreate(&out); /* not traced */
  for (int i = 0; i < n && rc == 0; i++) {
    rc |= hipSimLaunch(user, 50);
    rc |= LOG(hipEventRecord, in, user, 0, hipEventRecord(in, user));
    rc |= LOG(hipStreamWaitEvent, own, in, 0, hipStreamWaitEvent(own, in, 0));
    rc |= hipSimLaunch(own, 50);
    rc |= LOG(hipEventRecord, out, own, 0, hipEventRecord(out, own));
    rc |= LOG(hipStreamWaitEvent, user, out, 0, hipStreamWaitEvent(user, out, 0));
  }
  rc |= LOG(hipStreamSynchronize, user, 0, 0, hipStreamSynchronize(user));
  LOG(hipEventDestroy, in, 0, 0, hipEventDestroy(in));
  LOG(hipEventDestroy, out, 0, 0, hipEventDestroy(out));
  LOG(hipStreamDestroy, own, 0, 0, hipStreamDestroy(own));
  LOG(hipStreamDestroy, user, 0, 0, hipStreamDestroy(user));
  if (nccl_log) fclose(nccl_log);
  return rc;
}
