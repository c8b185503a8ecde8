/* Calls one function of a runtime library in a tight loop and reports the cost per call.
 *
 * usage: bench_calls LIBRARY SYMBOL CALLS [THREADS [RATE]]
 * RATE (calls per second over all threads) paces the calls in bursts of 100; without it
 * every thread calls as fast as it can.
 * The function is called as int f(void *) with NULL (hipStreamSynchronize(NULL),
 * cudaStreamSynchronize(NULL), ...). Prints one JSON line.
 * $BENCH_GATE set: once the library is loaded, print "loaded" and wait for a line on stdin
 * (a daemon then has time to find the process before the first call).
 * $BENCH_OUT_INT set: pass each thread's own int instead of NULL (hipGetDevice(&d), which
 * then succeeds).
 * $BENCH_COUNT set: the path of an existing file of at least 8 bytes, mapped shared; its
 * first 8 bytes count (native u64) every call made so far, each counted before it is made
 * (a tracer's tests read it while the loop runs: the program's own count of its calls). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

typedef int (*fn_t)(void *);
static fn_t fn;
static long calls;
static double per_thread_rate;
static int out_int;
static __thread int out_slot;
static uint64_t *count;

/* One call, counted first with $BENCH_COUNT (else no shared write skews the timing). */
static void call(void *a) {
  if (count) __atomic_fetch_add(count, 1, __ATOMIC_SEQ_CST);
  fn(a);
}

/* The argument of every call: NULL, or with $BENCH_OUT_INT the calling thread's int. */
static void *call_arg(void) { return out_int ? &out_slot : NULL; }

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *loop(void *arg) {
  (void)arg;
  uint64_t start = now_ns();
  void *a = call_arg();
  for (long i = 0; i < calls; i++) {
    call(a);
    if (per_thread_rate > 0 && i % 100 == 99) {
      uint64_t due = start + (uint64_t)((double)(i + 1) / per_thread_rate * 1e9);
      uint64_t now = now_ns();
      if (due > now) {
        struct timespec ts = {(time_t)((due - now) / 1000000000ull), (long)((due - now) % 1000000000ull)};
        nanosleep(&ts, NULL);
      }
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s LIBRARY SYMBOL CALLS [THREADS]\n", argv[0]);
    return 2;
  }
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
  fn = (fn_t)dlsym(h, argv[2]);
  if (!fn) { fprintf(stderr, "dlsym: %s\n", dlerror()); return 1; }
  const char *count_path = getenv("BENCH_COUNT");
  if (count_path) {
    int fd = open(count_path, O_RDWR);
    void *m = fd < 0 ? MAP_FAILED : mmap(NULL, 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) { perror("BENCH_COUNT"); return 1; }
    count = m;
  }
  if (getenv("BENCH_GATE")) {
    char buf[16];
    printf("loaded\n");
    fflush(stdout);
    if (!fgets(buf, sizeof buf, stdin)) return 5;
  }
  calls = atol(argv[3]);
  int threads = argc > 4 ? atoi(argv[4]) : 1;
  if (threads < 1 || threads > 64) return 2;
  if (argc > 5) per_thread_rate = atof(argv[5]) / threads;
  out_int = getenv("BENCH_OUT_INT") != NULL;
  for (long i = 0; i < 1000; i++) call(call_arg()); /* warm up: lazy binding, caches */
  pthread_t t[64];
  uint64_t start = now_ns();
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, loop, NULL);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  uint64_t ns = now_ns() - start;
  long total = calls * threads + 1000L * 1;
  printf("{\"ns_per_call\": %.1f, \"calls\": %ld, \"seconds\": %.6f, \"threads\": %d}\n",
         (double)ns / (double)(calls * threads), total, (double)ns / 1e9, threads);
  return 0;
}
