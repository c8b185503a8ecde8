/* The scenario's modes of several threads (workers, a producer and a consumer, loops on
 * one device or several) and the one that forks. */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "scenario.h"

struct worker { int id, iters; };

static void *worker_main(void *p) {
  struct worker *w = p;
  /* Named as applications name theirs (rocsync's traces show the kernel's names). */
  char name[16];
  snprintf(name, sizeof name, "worker-%d", w->id);
  pthread_setname_np(pthread_self(), name);
  hipStream_t s = 0;
  hipEvent_t e = 0;
  SetDevice(w->id % 2);
  /* $SCENARIO_LINGER_MS: alive that long after its first call, so that a tracer reading
   * a thread's name when its first call is read finds it on a loaded machine. */
  if (getenv("SCENARIO_LINGER_MS")) usleep(1000 * atoi(getenv("SCENARIO_LINGER_MS")));
  StreamCreate(&s);
  EventCreate(&e);
  for (int i = 0; i < w->iters; i++) {
    EventRecord(e, s);
    StreamWaitEvent(hipStreamPerThread, e);
    EventSynchronize(e);
    StreamSynchronize(s);
  }
  EventDestroy(e);
  StreamDestroy(s);
  return NULL;
}

void threads(int n, int iters) {
  pthread_t t[64];
  struct worker w[64];
  if (n > 63) n = 63;
  for (int i = 0; i < n; i++) {
    w[i] = (struct worker){i, iters};
    pthread_create(&t[i], NULL, worker_main, &w[i]);
  }
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
}

/* Cross-thread producer/consumer: thread A records event k on its stream, then thread B
 * makes its stream wait on it. A handshake orders each record before its wait. */
static hipEvent_t cross_events[4];
static hipStream_t cross_a, cross_b;
static int cross_iters, turn;
static pthread_mutex_t cross_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cross_cv = PTHREAD_COND_INITIALIZER;

static void wait_turn(int want) {
  pthread_mutex_lock(&cross_lock);
  while (turn != want) pthread_cond_wait(&cross_cv, &cross_lock);
  pthread_mutex_unlock(&cross_lock);
}
static void give_turn(int next) {
  pthread_mutex_lock(&cross_lock);
  turn = next;
  pthread_cond_broadcast(&cross_cv);
  pthread_mutex_unlock(&cross_lock);
}

static void *cross_producer(void *p) {
  (void)p;
  SetDevice(0);
  for (int i = 0; i < cross_iters; i++) {
    wait_turn(2 * i);
    Launch(cross_a, 200);
    EventRecord(cross_events[i % 4], cross_a);
    give_turn(2 * i + 1);
  }
  return NULL;
}

static void *cross_consumer(void *p) {
  (void)p;
  SetDevice(0);
  for (int i = 0; i < cross_iters; i++) {
    wait_turn(2 * i + 1);
    StreamWaitEvent(cross_b, cross_events[i % 4]);
    Launch(cross_b, 100);
    if (i % 3 == 0) EventSynchronize(cross_events[i % 4]);
    give_turn(2 * i + 2);
  }
  StreamSynchronize(cross_b);
  return NULL;
}

void cross(int iters) {
  pthread_t a, b;
  cross_iters = iters;
  SetDevice(0);
  StreamCreate(&cross_a);
  StreamCreate(&cross_b);
  for (int i = 0; i < 4; i++) EventCreate(&cross_events[i]);
  pthread_create(&a, NULL, cross_producer, NULL);
  pthread_create(&b, NULL, cross_consumer, NULL);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  DeviceSynchronize();
  for (int i = 0; i < 4; i++) EventDestroy(cross_events[i]);
  StreamDestroy(cross_a);
  StreamDestroy(cross_b);
}

/* Thread churn: for `ms`, short-lived threads, 32 at a time, each making one synchronize
 * of the default stream. Not logged (a log per thread, 100 000 of them); prints how many
 * threads it made. */
static void *churn_main(void *p) {
  (void)p;
  H(hipStreamSynchronize)(0);
  return NULL;
}

void churn(int ms) {
  unsigned long long made = 0;
  for (uint64_t end = ms_now() + (uint64_t)ms; ms_now() < end;) {
    pthread_t t[32];
    int n = 0;
    while (n < 32 && pthread_create(&t[n], NULL, churn_main, NULL) == 0) n++;
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    made += (unsigned long long)n;
  }
  printf("threads %llu\n", made);
  fflush(stdout);
}

void loop(int ms) {
  hipStream_t s = 0;
  hipEvent_t e = 0;
  StreamCreate(&s);
  EventCreate(&e);
  printf("looping\n"); /* the test's handshake: the loop runs for `ms` from here */
  fflush(stdout);
  for (uint64_t end = ms_now() + (uint64_t)ms; ms_now() < end;) {
    EventRecord(e, s);
    StreamWaitEvent(0, e);
    StreamSynchronize(s);
    usleep(200);
  }
  EventDestroy(e);
  StreamDestroy(s);
}

/* Record, wait and synchronize, then SPIN_US of work on the host (the CPU a step of a
 * sync-dense loop uses between its calls), for MS milliseconds. */
void dense(int ms, int spin_us) {
  hipStream_t s = 0;
  hipEvent_t e = 0;
  StreamCreate(&s);
  EventCreate(&e);
  printf("looping\n");
  fflush(stdout);
  for (uint64_t end = ms_now() + (uint64_t)ms; ms_now() < end;) {
    EventRecord(e, s);
    StreamWaitEvent(0, e);
    StreamSynchronize(s);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000 + (t.tv_nsec - t0.tv_nsec) / 1000 < spin_us);
  }
  EventDestroy(e);
  StreamDestroy(s);
}

struct looper {
  int device, ms;
};

static pthread_barrier_t loopers_ready;
static sem_t looper_recorded;

static void *device_loop(void *p) {
  struct looper *l = p;
  hipStream_t s = 0;
  hipEvent_t e = 0;
  SetDevice(l->device);
  StreamCreate(&s);
  EventCreate(&e);
  /* A first record, in device order (the next thread starts after it): over HSA, each
   * device's queue is made in device order, so a tracer that did not see the runtime
   * enumerate its agents, and numbers them by first queue, numbers them as devices. */
  EventRecord(e, s);
  sem_post(&looper_recorded);
  pthread_barrier_wait(&loopers_ready); /* "looping" once every thread is set up */
  for (uint64_t end = ms_now() + (uint64_t)l->ms; ms_now() < end;) {
    EventRecord(e, s);
    StreamWaitEvent(s, e);
    StreamSynchronize(s);
    usleep(200);
  }
  EventDestroy(e);
  StreamDestroy(s);
  return NULL;
}

void loop_devices(int ms, int devices) {
  pthread_t t[8];
  struct looper l[8];
  if (devices > 8) devices = 8;
  pthread_barrier_init(&loopers_ready, NULL, (unsigned)devices + 1);
  sem_init(&looper_recorded, 0, 0);
  for (int d = 0; d < devices; d++) {
    l[d] = (struct looper){d, ms};
    pthread_create(&t[d], NULL, device_loop, &l[d]);
    sem_wait(&looper_recorded);
  }
  pthread_barrier_wait(&loopers_ready);
  printf("looping\n");
  fflush(stdout);
  for (int d = 0; d < devices; d++) pthread_join(t[d], NULL);
}

/* A process that loaded the runtime forks (as Python multiprocessing does): the child has
 * the parent's memory, handles included, and a process of its own. */
int forked(int iters) {
  hipStream_t s = 0, cs = 0;
  hipEvent_t e = 0, ce = 0;
  SetDevice(0);
  StreamCreate(&s);
  EventCreate(&e);
  EventRecord(e, s);
  StreamWaitEvent(0, e);
  StreamSynchronize(s);
  pid_t child = fork();
  if (child < 0) return 6;
  if (child == 0) {
    /* The parent's calls are the parent's log. */
    forget_logs();
    char path[4096];
    snprintf(path, sizeof path, "%s.child", getenv("SCENARIO_LOG") ? getenv("SCENARIO_LOG") : "/dev/null");
    setenv("SCENARIO_LOG", path, 1);
    StreamCreate(&cs);
    EventCreate(&ce);
    StreamWaitEvent(cs, e); /* the parent's event: never recorded in this process */
    for (int i = 0; i < iters; i++) {
      Launch(cs, 100);
      EventRecord(ce, cs);
      StreamWaitEvent(s, ce);
      if (i % 2) EventSynchronize(ce);
    }
    StreamSynchronize(cs);
    StreamDestroy(cs);
    return 0;
  }
  int status = 0;
  if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) return 7;
  for (int i = 0; i < iters; i++) {
    EventRecord(e, s);
    StreamWaitEvent(0, e);
  }
  DeviceSynchronize();
  EventDestroy(e);
  StreamDestroy(s);
  return 0;
}

/* ---- flood: one thread blocked, others flooding records and waits ---- */
static int flood_done;
static uint64_t flooded[8];

static void *flooder(void *p) {
  int i = (int)(intptr_t)p;
  hipStream_t s = 0;
  hipEvent_t e = 0;
  StreamCreate(&s);
  EventCreate(&e);
  /* Counted, not logged: millions of calls. */
  while (!__atomic_load_n(&flood_done, __ATOMIC_SEQ_CST)) {
    H(hipEventRecord)(e, s);
    H(hipStreamWaitEvent)(0, e, 0);
    flooded[i] += 2;
  }
  EventDestroy(e);
  StreamDestroy(s);
  return NULL;
}

void flood(int us, int n) {
  hipStream_t s = 0;
  pthread_t t[8];
  if (n > 8) n = 8;
  StreamCreate(&s);
  for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, flooder, (void *)(intptr_t)i);
  Launch(s, us);
  StreamSynchronize(s);
  __atomic_store_n(&flood_done, 1, __ATOMIC_SEQ_CST);
  uint64_t total = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(t[i], NULL);
    total += flooded[i];
  }
  StreamDestroy(s);
  printf("flooded %llu\n", (unsigned long long)total);
  fflush(stdout);
}

/* ---- distinct: records and waits on N handles never seen before ---- */
/* Made-up handles, as many as a loop of fresh events would give: the runtime refuses
 * them, the probes keep each one's record and wait all the same (counted, not logged). */
void distinct(int n) {
  for (int i = 1; i <= n; i++) {
    hipEvent_t e = (hipEvent_t)(uintptr_t)(0x7e0000000000ull + 16ull * (unsigned)i);
    hipStream_t s = (hipStream_t)(uintptr_t)(0x5e0000000000ull + 16ull * (unsigned)i);
    H(hipEventRecord)(e, s);
    H(hipStreamWaitEvent)(s, e, 0);
  }
  printf("distinct %d\n", n);
  fflush(stdout);
}
