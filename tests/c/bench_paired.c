/* Calls one function of three copies of a library in alternating batches, timing each
 * batch: the per-call cost of three kinds of probe measured side by side in one process.
 *
 * usage: bench_paired SYMBOL ROUNDS BATCH LIB...  (1 to 4 libraries)
 * Each round calls SYMBOL of every library BATCH times, the libraries' order rotating by
 * round (no library is always first after another's batch). The machines this runs on
 * drift by ±20 % over seconds; batches of a few milliseconds each see the same machine,
 * so a round's ratios cancel the drift that separate runs cannot.
 * The function is called as int f(void *) with NULL, as bench_calls does. Prints one JSON
 * line: for each library, ns per call of each round.
 * $BENCH_GATE set: once the libraries are loaded, print "loaded" and wait for a line on
 * stdin (a daemon then has time to probe the process before the first call). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int (*fn_t)(void *);

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 5 || argc > 8) {
    fprintf(stderr, "usage: %s SYMBOL ROUNDS BATCH LIB...\n", argv[0]);
    return 2;
  }
  long rounds = atol(argv[2]), batch = atol(argv[3]);
  int libs = argc - 4;
  if (rounds < 1 || batch < 1) return 2;
  fn_t fn[4];
  for (int l = 0; l < libs; l++) {
    void *h = dlopen(argv[4 + l], RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
    fn[l] = (fn_t)dlsym(h, argv[1]);
    if (!fn[l]) { fprintf(stderr, "dlsym: %s\n", dlerror()); return 1; }
  }
  if (getenv("BENCH_GATE")) {
    char line[16];
    printf("loaded\n");
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) return 1;
  }
  double *ns = malloc(sizeof(double) * (size_t)rounds * (size_t)libs);
  if (!ns) return 1;
  for (int l = 0; l < libs; l++)
    for (long i = 0; i < 1000; i++) fn[l](NULL); /* warm up: lazy binding, caches */
  for (long r = 0; r < rounds; r++) {
    for (int k = 0; k < libs; k++) {
      int l = (int)((r + k) % libs);
      fn_t f = fn[l];
      uint64_t start = now_ns();
      for (long i = 0; i < batch; i++) f(NULL);
      ns[r * libs + l] = (double)(now_ns() - start) / (double)batch;
    }
  }
  printf("{\"rounds\": %ld, \"batch\": %ld, \"calls_per_library\": %ld, \"ns_per_call\": [",
         rounds, batch, rounds * batch + 1000);
  for (int l = 0; l < libs; l++) {
    printf("%s[", l ? ", " : "");
    for (long r = 0; r < rounds; r++) printf("%s%.1f", r ? ", " : "", ns[r * libs + l]);
    printf("]");
  }
  printf("]}\n");
  free(ns);
  return 0;
}
