/* Scenario programs that drive a HIP runtime the way applications do, and log every call
 * they make (thread, API, arguments, return code) so tests can compare a trace with what
 * really happened. Built twice: linked against libamdhip64, and (-DUSE_DLOPEN) loading it
 * with dlopen at run time, as Python and PyTorch do.
 *
 * usage: scenario MODE [ARGS]      log file: $SCENARIO_LOG (one line per call)
 *   basic                 one thread, every hooked API, error paths, handle reuse
 *   copies N              a copy stream (copies, records) a compute stream waits on
 *   threads N ITERS       N threads, each ITERS x (record, wait, event sync, stream sync)
 *   cross ITERS           two threads: one records, the other waits on its events
 *   gated MODE ...        print "ready", wait for a line on stdin, then run MODE
 *   loaded MODE ...       load the runtime, print "loaded", wait for a line, run MODE
 *   loop MS [DEVICES]     call in a loop for MS milliseconds (DEVICES > 1: one thread per
 *                         device, each on a stream and event of its own)
 *   dense MS US           as loop, with US of work on the host instead of a sleep
 *   dense_stall MS US STALL  dense MS US, then one stall of STALL µs (as stall 1 STALL)
 *   churn MS              for MS: short-lived threads, 32 at a time, each one
 *                         hipStreamSynchronize(0) (not logged); "threads N"
 *   hang                  queue 30 s of work, then block in hipStreamSynchronize
 *   fork ITERS            calls, then forks a child that calls on streams and events of
 *                         its own (its log: $SCENARIO_LOG.child), then calls again
 *   stall N US            N times: US of work on stream 1, an event recorded after it,
 *                         stream 2 waiting on the event, stream 2 synchronized (blocks US)
 *   stalls STEP...        each STEP in turn: US (> 0) a stall as stall's, -US a sleep on
 *                         the host (no call), e.g. "stalls 80000 -2000000 5000000"
 *   flood US N            one thread blocked US in hipStreamSynchronize while N threads
 *                         record and wait flat out (counted, not logged); "flooded N"
 *   distinct N            a record and a wait on each of N made-up event and stream
 *                         handles, none seen before (counted, not logged); "distinct N"
 *   poll                  prints "ready"; at each line on stdin: a thread starts
 *                         recording and waiting (logged), the main thread says
 *                         "polling from T" (T: CLOCK_REALTIME µs) and polls
 *                         hipEventQuery flat out (counted, not logged: millions);
 *                         the polling stops ("polled N"); everything ends
 * $SCENARIO_HIP2 names a second copy, whose hipDeviceSynchronize basic also calls.
 *
 * The call log is scenario_log.c; the modes of several threads, and fork, are
 * scenario_threads.c. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "scenario.h"

#ifdef USE_DLOPEN
#define HIP_PTR_DEF(ret, name, params) ret(*p_##name) params;
HIP_SIM_APIS(HIP_PTR_DEF)
#endif

/* A copy stream, as PyTorch's: copies and the records after them, and nothing else; the
 * compute stream launches, waits for the copy, and launches again. */
static char copy_src[1 << 14], copy_dst[1 << 14];
static void copy_kernel(void) {}

static void copies(int iters) {
  hipStream_t c = 0, s = 0;
  hipEvent_t e[2];
  SetDevice(0);
  StreamCreate(&c);
  StreamCreate(&s);
  for (int i = 0; i < 2; i++) EventCreate(&e[i]);
  for (int i = 0; i < iters; i++) {
    MemcpyAsync(copy_dst, copy_src, sizeof copy_src, c);
    EventRecordWithFlags(e[i % 2], c, 0);
    LaunchKernel((const void *)copy_kernel, 4, s);
    StreamWaitEvent(s, e[i % 2]);
    LaunchKernel((const void *)copy_kernel, 2, s);
    /* Uneven steps, as a training loop's: a profiler's clock lines up with one shift. */
    usleep(400 + 150 * (i * 7 % 5));
  }
  StreamSynchronize(s);
}

/* Event queries before and after a record (one while the work is still running), and a
 * per-thread stream synchronize (which the runtime may implement with the plain one). */
static void query(void) {
  hipStream_t s1 = 0;
  hipEvent_t e1 = 0;
  StreamCreate(&s1);
  EventCreate(&e1);
  EventQuery(e1);                      /* never recorded */
  Launch(s1, 20000);
  EventRecord(e1, s1);
  EventQuery(e1);                      /* hipErrorNotReady: the work runs 20 ms */
  StreamSynchronizeSpt(hipStreamPerThread);
  EventSynchronize(e1);
  EventQuery(e1);                      /* done */
  EventDestroy(e1);
  StreamDestroy(s1);
}

/* Attribution paths for --agents: the main thread, on device 0, records e0 on its stream
 * s0; a thread on device 1 then synchronizes s0 (device 0's, by its stream), makes its own
 * stream s1 wait on e0 (device 1's, by the waiting stream), synchronizes e0 (device 0's,
 * by the recording stream), synchronizes its device (device 1) and records e1 on s1. */
static hipStream_t agents_s0;
static hipEvent_t agents_e0;

static void *agents_device1(void *p) {
  (void)p;
  hipStream_t s1 = 0;
  hipEvent_t e1 = 0;
  SetDevice(1);
  StreamCreate(&s1);
  EventCreate(&e1);
  StreamSynchronize(agents_s0);
  StreamWaitEvent(s1, agents_e0);
  EventSynchronize(agents_e0);
  DeviceSynchronize();
  EventRecord(e1, s1);
  EventSynchronize(e1);
  return NULL;
}

static void agents(void) {
  SetDevice(0);
  StreamCreate(&agents_s0);
  EventCreate(&agents_e0);
  Launch(agents_s0, 1000);
  EventRecord(agents_e0, agents_s0);
  pthread_t t;
  pthread_create(&t, NULL, agents_device1, NULL);
  pthread_join(t, NULL);
  DeviceSynchronize();
}

/* hipDeviceSynchronize of a second copy of the runtime, when one was loaded. */
static hipError_t (*second_device_sync)(void);

/* Every hooked API once or more, the error paths, and a destroyed handle reused. */
static void basic(void) {
  hipStream_t s1 = 0, s2 = 0, s3 = 0;
  hipEvent_t e1 = 0, e2 = 0, e3 = 0;
  int dev = -1;
  SetDevice(0);
  GetDevice(&dev);
  StreamCreate(&s1);
  StreamCreateWithFlags(&s2, 1);
  StreamCreateWithPriority(&s3, 0, -1);
  EventCreate(&e1);
  EventCreate(&e2);
  Launch(s1, 2000);
  EventRecord(e1, s1);                 /* producer */
  StreamWaitEvent(s2, e1);             /* resolves to the record above */
  Launch(s2, 1000);
  EventRecordWithFlags(e2, s2, 0);
  EventSynchronize(e2);
  StreamSynchronize(s1);
  StreamSynchronizeSpt(hipStreamPerThread);
  EventRecordSpt(e1, hipStreamPerThread);
  StreamWaitEventSpt(s3, e1);
  DeviceSynchronize();
  /* Errors: a record on a handle that was never an event, a wait on no event. */
  EventRecord((hipEvent_t)0x1234, s1);
  StreamWaitEvent(s1, (hipEvent_t)0);
  EventRecordWithFlags(e2, s1, 7);
  /* Destroy, then create: the allocator hands the same memory back. */
  EventDestroy(e1);
  EventCreate(&e3);
  StreamWaitEvent(s2, e3);             /* before any record of the new event: unresolved */
  EventRecord(e3, s3);
  StreamWaitEvent(s1, e3);
  SetDevice(1);
  SetDevice(5);                        /* invalid device */
  EventDestroy(e2);
  EventDestroy(e3);
  EventDestroy(e3);                    /* double destroy: invalid handle */
  StreamDestroy(s1);
  StreamDestroy(s2);
  StreamDestroy(s3);
  if (second_device_sync) CALL(hipDeviceSynchronize, 0, 0, 0, second_device_sync());
}

/* Blocks in a stream synchronize for 30 s; says "blocking" on stdout just before. */
static void hang(void) {
  hipStream_t s = 0;
  StreamCreate(&s);
  Launch(s, 30000000);
  printf("blocking\n");
  fflush(stdout);
  StreamSynchronize(s); /* the test stops the capture or kills the process here */
}

/* ---- stall: synchronizations that block for as long as the work they wait on ---- */
static void one_stall(hipStream_t s1, hipStream_t s2, hipEvent_t e, int us) {
  Launch(s1, us);
  EventRecord(e, s1);
  StreamWaitEvent(s2, e);
  StreamSynchronize(s2);
}

/* Each step a stall (us > 0) or a sleep on the host (us < 0), on two streams and an
 * event made for them. */
static void stall_steps(int n, const long *steps) {
  hipStream_t s1 = 0, s2 = 0;
  hipEvent_t e = 0;
  StreamCreate(&s1);
  StreamCreate(&s2);
  EventCreate(&e);
  for (int i = 0; i < n; i++) {
    if (steps[i] < 0) usleep((useconds_t)-steps[i]);
    else one_stall(s1, s2, e, (int)steps[i]);
  }
  EventDestroy(e);
  StreamDestroy(s1);
  StreamDestroy(s2);
}

static void stall(int n, int us) {
  long *steps = malloc(sizeof *steps * (size_t)(n > 0 ? n : 1));
  for (int i = 0; i < n; i++) steps[i] = us;
  stall_steps(n, steps);
  free(steps);
}

/* Stalls of differing lengths, host sleeps between them. */
static void stalls(int n, char **args) {
  long *steps = malloc(sizeof *steps * (size_t)(n > 0 ? n : 1));
  for (int i = 0; i < n; i++) steps[i] = atol(args[i]);
  stall_steps(n, steps);
  free(steps);
}

/* ---- poll: a dense polling phase between records and waits ---- */
static int poll_phase; /* lines read on stdin */

static void *poll_stdin(void *p) {
  (void)p;
  char buf[16];
  /* Three lines (or the end of input) and the scenario is over. */
  for (int i = 0; i < 3 && fgets(buf, sizeof buf, stdin); i++)
    __atomic_add_fetch(&poll_phase, 1, __ATOMIC_SEQ_CST);
  __atomic_store_n(&poll_phase, 3, __ATOMIC_SEQ_CST);
  return NULL;
}

static int phase(void) { return __atomic_load_n(&poll_phase, __ATOMIC_SEQ_CST); }

static void *poll_recorder(void *p) {
  (void)p;
  hipStream_t s = 0;
  hipEvent_t e = 0;
  StreamCreate(&s);
  EventCreate(&e);
  while (phase() < 3) {
    EventRecord(e, s);
    StreamWaitEvent(0, e);
    usleep(2000);
  }
  EventDestroy(e);
  StreamDestroy(s);
  return NULL;
}

static void poll_mode(void) {
  hipEvent_t q = 0;
  EventCreate(&q);
  pthread_t in, rec;
  pthread_create(&in, NULL, poll_stdin, NULL);
  printf("ready\n");
  fflush(stdout);
  while (phase() < 1) usleep(1000);
  pthread_create(&rec, NULL, poll_recorder, NULL);
  unsigned long long polls = 0;
  /* When the polling begins, on the clock a trace's rows and the daemon's shed spans
   * use (µs since the epoch). */
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  printf("polling from %llu\n", (unsigned long long)now.tv_sec * 1000000ull +
                                   (unsigned long long)now.tv_nsec / 1000);
  fflush(stdout);
  while (phase() < 2) {
    H(hipEventQuery)(q);
    polls++;
  }
  printf("polled %llu\n", polls);
  fflush(stdout);
  pthread_join(rec, NULL);
  pthread_join(in, NULL);
}

static void load_runtime(void) {
#ifdef USE_DLOPEN
  const char *lib = getenv("SCENARIO_HIP") ? getenv("SCENARIO_HIP") : "libamdhip64.so";
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); exit(4); }
#define HIP_SYM(ret, name, params) p_##name = (ret(*) params)dlsym(h, #name);
  HIP_SIM_APIS(HIP_SYM)
  if (getenv("SCENARIO_HIP2")) {
    void *h2 = dlopen(getenv("SCENARIO_HIP2"), RTLD_NOW | RTLD_LOCAL);
    if (!h2) { fprintf(stderr, "dlopen: %s\n", dlerror()); exit(4); }
    second_device_sync = (hipError_t(*)(void))dlsym(h2, "hipDeviceSynchronize");
  }
#endif
}

static int run(int argc, char **argv) {
  if (argc < 2) return 2;
  const char *mode = argv[1];
  if (!strcmp(mode, "gated_device")) {
    /* The thread chooses device 1 and creates a stream before rocsync attaches; after the
     * first gate it asks for its device and synchronizes; after the second gate (once
     * rocsync removed its temporary hipGetDevice probes) it asks again. */
    load_runtime();
    hipStream_t s = 0;
    int dev = -1;
    SetDevice(1);
    StreamCreate(&s);
    char buf[16];
    printf("ready\n");
    fflush(stdout);
    if (!fgets(buf, sizeof buf, stdin)) return 5;
    GetDevice(&dev);
    StreamSynchronize(s);
    DeviceSynchronize();
    printf("called\n");
    fflush(stdout);
    if (!fgets(buf, sizeof buf, stdin)) return 5;
    for (int i = 0; i < 3; i++) GetDevice(&dev);
    DeviceSynchronize();
    StreamDestroy(s);
    return 0;
  }
  if (!strcmp(mode, "loaded")) {
    /* The runtime loaded (dlopen: late), nothing called until a line on stdin. */
    load_runtime();
    printf("loaded\n");
    fflush(stdout);
    char buf[16];
    if (!fgets(buf, sizeof buf, stdin)) return 5;
    return run(argc - 1, argv + 1);
  }
  if (!strcmp(mode, "gated")) {
    printf("ready\n");
    fflush(stdout);
    char buf[16];
    if (!fgets(buf, sizeof buf, stdin)) return 5;
    return run(argc - 1, argv + 1);
  }
  load_runtime();
  if (!strcmp(mode, "basic")) basic();
  else if (!strcmp(mode, "query")) query();
  else if (!strcmp(mode, "agents")) agents();
  else if (!strcmp(mode, "threads") && argc == 4) threads(atoi(argv[2]), atoi(argv[3]));
  else if (!strcmp(mode, "cross") && argc == 3) cross(atoi(argv[2]));
  else if (!strcmp(mode, "copies") && argc == 3) copies(atoi(argv[2]));
  else if (!strcmp(mode, "loop") && argc == 3) loop(atoi(argv[2]));
  else if (!strcmp(mode, "churn") && argc == 3) churn(atoi(argv[2]));
  else if (!strcmp(mode, "loop") && argc == 4) loop_devices(atoi(argv[2]), atoi(argv[3]));
  else if (!strcmp(mode, "dense") && argc == 4) dense(atoi(argv[2]), atoi(argv[3]));
  else if (!strcmp(mode, "dense_stall") && argc == 5) {
    dense(atoi(argv[2]), atoi(argv[3]));
    stall(1, atoi(argv[4]));
  }
  else if (!strcmp(mode, "hang")) hang();
  else if (!strcmp(mode, "poll")) poll_mode();
  else if (!strcmp(mode, "stall") && argc == 4) stall(atoi(argv[2]), atoi(argv[3]));
  else if (!strcmp(mode, "stalls") && argc >= 3) stalls(argc - 2, argv + 2);
  else if (!strcmp(mode, "flood") && argc == 4) flood(atoi(argv[2]), atoi(argv[3]));
  else if (!strcmp(mode, "distinct") && argc == 3) distinct(atoi(argv[2]));
  else if (!strcmp(mode, "fork") && argc == 3) return forked(atoi(argv[2]));
  else { fprintf(stderr, "unknown mode %s\n", mode); return 2; }
  return 0;
}

int main(int argc, char **argv) {
  int rc = run(argc, argv);
  write_logs();
  if (getenv("SCENARIO_EXIT")) return atoi(getenv("SCENARIO_EXIT"));
  return rc;
}
