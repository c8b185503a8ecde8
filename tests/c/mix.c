/* A PyTorch-shaped call mix on a HIP runtime, per training step: 20 hipGetDevice (the
 * framework's device guards), an event created and destroyed, a record on the compute
 * stream, the copy stream waiting on it, an event query, an event synchronize and a
 * stream synchronize.
 *
 * usage: mix LIBRARY STEPS — prints one JSON line {"steps", "ns_per_step", "calls_per_step"}.
 * $MIX_PROGRESS_MS set: also "progress T_NS STEPS" (CLOCK_MONOTONIC) about that often, to
 * see a slowdown over time (the learning window's bench); $MIX_WORK_NS: that much CPU work
 * of the framework's own per step (a busy PyTorch thread calls hipGetDevice ~250 000
 * times a second, so 20 of them come with ~80 us of work); $MIX_IDLE_THREADS: that many
 * threads that never call the runtime (PyTorch's pools), so an attach cannot learn
 * every thread's device and its window lasts its whole bound. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef int (*f0)(void);
typedef int (*f1)(void *);
typedef int (*f2)(void *, void *);
typedef int (*f3)(void *, void *, unsigned);

static void *sym(void *lib, const char *name) {
  void *p = dlsym(lib, name);
  if (!p) { fprintf(stderr, "%s: %s\n", name, dlerror()); exit(2); }
  return p;
}

static void *idle(void *arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: mix LIBRARY STEPS\n"); return 2; }
  void *lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
  long steps = atol(argv[2]);
  f1 get_device = sym(lib, "hipGetDevice"), stream_create = sym(lib, "hipStreamCreate");
  f1 event_create = sym(lib, "hipEventCreate"), event_destroy = sym(lib, "hipEventDestroy");
  f2 record = sym(lib, "hipEventRecord");
  f3 wait = sym(lib, "hipStreamWaitEvent");
  f1 query = sym(lib, "hipEventQuery"), event_sync = sym(lib, "hipEventSynchronize");
  f1 stream_sync = sym(lib, "hipStreamSynchronize");
  void *compute = 0, *copy = 0;
  stream_create(&compute);
  stream_create(&copy);
  int dev = 0;
  const char *idle_env = getenv("MIX_IDLE_THREADS");
  for (int k = 0; idle_env && k < atoi(idle_env); k++) {
    pthread_t t;
    pthread_create(&t, NULL, idle, NULL);
  }
  const char *every = getenv("MIX_PROGRESS_MS");
  uint64_t progress_ns = every ? (uint64_t)atol(every) * 1000000ull : 0;
  const char *work_env = getenv("MIX_WORK_NS");
  uint64_t work_ns = work_env ? (uint64_t)atol(work_env) : 0;
  uint64_t start = now_ns(), last = start;
  for (long i = 0; i < steps; i++) {
    if (progress_ns && i % 16 == 0) {
      uint64_t t = now_ns();
      if (t - last >= progress_ns) {
        printf("progress %llu %ld\n", (unsigned long long)t, i);
        fflush(stdout);
        last = t;
      }
    }
    void *e = 0;
    if (work_ns) {
      uint64_t until = now_ns() + work_ns;
      while (now_ns() < until) {}
    }
    for (int k = 0; k < 20; k++) get_device(&dev);
    event_create(&e);
    record(e, compute);
    wait(copy, e, 0);
    query(e);
    event_sync(e);
    stream_sync(copy);
    event_destroy(e);
  }
  uint64_t ns = now_ns() - start;
  printf("{\"steps\":%ld,\"ns_per_step\":%.1f,\"calls_per_step\":27}\n", steps, (double)ns / steps);
  return 0;
}
