/* The scenario's call log: every thread appends to a log of its own (no lock per call),
 * and the logs are written to $SCENARIO_LOG once the scenario ends. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "scenario.h"

struct line { uint64_t seq, a0, a1, a2, t0, t1; const char *api; int tid, rc; };
struct log { struct line *v; size_t n, cap; };
static __thread struct log *my_log;
static struct log *logs[64];
static int nlogs;
static pthread_mutex_t logs_lock = PTHREAD_MUTEX_INITIALIZER;
uint64_t call_seq;

uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t ms_now(void) { return mono_ns() / 1000000; }

void log_call(const char *api, uint64_t a0, uint64_t a1, uint64_t a2, int rc, uint64_t s,
              uint64_t t0, uint64_t t1) {
  if (!my_log) {
    my_log = calloc(1, sizeof *my_log);
    pthread_mutex_lock(&logs_lock);
    logs[nlogs++] = my_log;
    pthread_mutex_unlock(&logs_lock);
  }
  if (my_log->n == my_log->cap) {
    my_log->cap = my_log->cap ? my_log->cap * 2 : 1024;
    my_log->v = realloc(my_log->v, my_log->cap * sizeof *my_log->v);
  }
  my_log->v[my_log->n++] = (struct line){s, a0, a1, a2, t0, t1, api, (int)gettid(), rc};
}

void forget_logs(void) {
  for (int i = 0; i < nlogs; i++) logs[i]->n = 0;
}

void write_logs(void) {
  const char *path = getenv("SCENARIO_LOG");
  if (!path) return;
  FILE *f = fopen(path, "w");
  if (!f) { perror(path); exit(3); }
  for (int i = 0; i < nlogs; i++)
    for (size_t j = 0; j < logs[i]->n; j++) {
      struct line *l = &logs[i]->v[j];
      fprintf(f, "%llu %d %s %#llx %#llx %#llx %d %llu %llu\n", (unsigned long long)l->seq, l->tid,
              l->api, (unsigned long long)l->a0, (unsigned long long)l->a1,
              (unsigned long long)l->a2, l->rc, (unsigned long long)l->t0,
              (unsigned long long)l->t1);
    }
  fclose(f);
}
