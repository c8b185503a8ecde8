/* A collective library that links the CUDA runtime statically, as NCCL does: built with
 * the simulated runtime (under CUDA's names) compiled in with hidden visibility, so its
 * cuda* functions are local symbols of this library, and exporting one entry point.
 * simAllReduce(n): n times, the user stream's work is awaited on the library's stream
 * and the library's work on the user stream (an event recorded, a stream waiting on it,
 * each way), then the user stream is synchronized. Returns 0, or the first error. */
#include "hip_sim.h"

__attribute__((visibility("default"))) int simAllReduce(int n) {
  hipStream_t user = 0, own = 0;
  hipEvent_t in = 0, out = 0;
  int rc = hipStreamCreate(&user) | hipStreamCreate(&own) | hipEventCreate(&in) |
           hipEventCreate(&out);
  for (int i = 0; i < n && rc == 0; i++) {
    rc |= hipSimLaunch(user, 50);
    rc |= hipEventRecord(in, user);
    rc |= hipStreamWaitEvent(own, in, 0);
    rc |= hipSimLaunch(own, 50);
    rc |= hipEventRecord(out, own);
    rc |= hipStreamWaitEvent(user, out, 0);
  }
  rc |= hipStreamSynchronize(user);
  hipEventDestroy(in);
  hipEventDestroy(out);
  hipStreamDestroy(own);
  hipStreamDestroy(user);
  return rc;
}
