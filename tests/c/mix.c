/* A PyTorch-shaped call mix on a HIP runtime, per training step: 20 hipGetDevice (the
 * framework's device guards), an event created and destroyed, a record on the compute
 * stream, the copy stream waiting on it, an event query, an event synchronize and a
 * stream synchronize.
 *
 * usage: mix LIBRARY STEPS — prints one JSON line {"steps", "ns_per_step", "calls_per_step"}. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int (*f0)(void);
typedef int (*f1)(void *);
typedef int (*f2)(void *, void *);
typedef int (*f3)(void *, void *, unsigned);

static void *sym(void *lib, const char *name) {
  void *p = dlsym(lib, name);
  if (!p) { fprintf(stderr, "%s: %s\n", name, dlerror()); exit(2); }
  return p;
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
  uint64_t start = now_ns();
  for (long i = 0; i < steps; i++) {
    void *e = 0;
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
