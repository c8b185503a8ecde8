/* The C twin of tests/python/rank_job.py: a two-rank job as torchrun starts it, over the
 * simulated RCCL and HIP runtime. Each rank is a fresh process that sets its communicator
 * up at once (no warm-up), then runs STEPS all-reduce + synchronize steps. Rank 1 stops
 * before collective STOP_AT in a function of its own (`wait_for_data`: the libc sleep, no
 * GPU call); rank 0 enters it and blocks in its stream's synchronisation inside
 * `train_step` until rank 1 comes. Built with frame pointers, as the other scenarios.
 * usage: rank_job STEPS STOP_AT PAUSE_S
 * Prints "uid <hex>", waits for a line on stdin, then per rank "rank R pid P comm" and
 * "rank R pid P allreduce N", flushed: the job's own log. */
#include "hip_sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct { char internal[128]; } ncclUniqueId;
typedef struct ncclComm *ncclComm_t;
int ncclGetUniqueId(ncclUniqueId *id);
int ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
int ncclAllReduce(const void *s, void *r, size_t count, int datatype, int op, ncclComm_t comm,
                  hipStream_t stream);
int ncclCommDestroy(ncclComm_t comm);

static float buf[1024 + 4096];

/* "rank R pid P WHAT [N]", one write(2) per line: the ranks share the pipe. */
static void say(int rank, const char *what, int n) {
  char line[96];
  int len = n > 0 ? snprintf(line, sizeof line, "rank %d pid %d %s %d\n", rank, getpid(), what, n)
                  : snprintf(line, sizeof line, "rank %d pid %d %s\n", rank, getpid(), what);
  if (write(1, line, (size_t)len) != len) exit(9);
}

/* Rank 1's host-side wait: where it is while the others block. Not inlined, and the
 * sleep is not its last call (no tail call): it stays a frame. */
__attribute__((noinline)) static void wait_for_data(unsigned seconds) {
  if (sleep(seconds) != 0) exit(8);
}

/* Rank 0 blocks in its synchronisation here, in the collective rank 1 has not entered. */
__attribute__((noinline)) static void train_step(ncclComm_t comm, hipStream_t stream, int n) {
  /* ncclFloat32 = 7, ncclSum = 0 */
  if (ncclAllReduce(buf, buf, 1024 + n, 7, 0, comm, stream)) exit(4);
  if (hipStreamSynchronize(stream)) exit(5);
}

__attribute__((noinline)) static int rank_main(int rank, int steps, int stop_at,
                                               unsigned pause_s, const char *uid) {
  ncclUniqueId id;
  if (strlen(uid) != 256) return 2;
  for (int i = 0; i < 128; i++) {
    unsigned v;
    if (sscanf(uid + 2 * i, "%2x", &v) != 1) return 2;
    id.internal[i] = (char)v;
  }
  ncclComm_t comm;
  hipStream_t stream;
  if (ncclCommInitRank(&comm, 2, id, rank) || hipStreamCreate(&stream)) return 3;
  say(rank, "comm", 0);
  for (int n = 1; n <= steps; n++) {
    if (rank == 1 && n == stop_at) wait_for_data(pause_s);
    say(rank, "allreduce", n);
    train_step(comm, stream, n);
  }
  return ncclCommDestroy(comm) ? 6 : 0;
}

int main(int argc, char **argv) {
  if (argc == 7 && !strcmp(argv[1], "rank")) {
    /* rank R STEPS STOP_AT PAUSE_S UID; not a tail call: main stays a frame. */
    int rc = rank_main(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), (unsigned)atoi(argv[5]),
                       argv[6]);
    if (rc) fprintf(stderr, "rank %s: failed (%d)\n", argv[2], rc);
    return rc;
  }
  if (argc != 4) {
    fprintf(stderr, "usage: rank_job STEPS STOP_AT PAUSE_S\n");
    return 2;
  }
  ncclUniqueId id;
  if (ncclGetUniqueId(&id)) return 3;
  char uid[257];
  for (int i = 0; i < 128; i++) sprintf(uid + 2 * i, "%02x", (unsigned char)id.internal[i]);
  printf("uid %s\n", uid);
  fflush(stdout);
  /* The ranks start on a line (or end of file) on stdin: a tracer that found this launcher
   * has probed the libraries by then. A rank runs 20 collectives in a millisecond: begun
   * while the probes were still being placed, its set-up and its blocked call would be
   * calls made before any probe, which nothing can see. */
  char go[8];
  if (!fgets(go, sizeof go, stdin) && ferror(stdin)) return 3;
  for (int r = 0; r < 2; r++) {
    if (fork() == 0) {
      char rank[16];
      snprintf(rank, sizeof rank, "%d", r);
      /* A fresh process per rank, as torchrun's are: it loads the libraries itself. */
      execl("/proc/self/exe", argv[0], "rank", rank, argv[1], argv[2], argv[3], uid,
            (char *)NULL);
      _exit(127);
    }
  }
  int failed = 0, status;
  while (wait(&status) > 0) failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  return failed;
}
