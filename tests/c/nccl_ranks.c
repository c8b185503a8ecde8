/* A job of rank processes sharing one unique id, as torchrun starts them: each rank sets
 * up a communicator, then does STEPS rounds of ncclAllReduce + stream synchronisation.
 * Rank LAGGARD sleeps PAUSE_MS on the host (no GPU call) before collective STOP_AT: the
 * others enter it and block in their synchronisation until it comes.
 * Collective N reduces 1024 + N floats: each one's signature is its own.
 * usage: nccl_ranks NRANKS STEPS LAGGARD STOP_AT PAUSE_MS [WARMUP_MS [STEP_MS]]
 * Prints "uid <hex>" once, then per rank "rank R pid P started", "rank R pid P comm 0x…"
 * and, before each collective, "rank R pid P allreduce N", flushed: the job's own log. */
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
int ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, void *config);

static void hex(const ncclUniqueId *id, char *out) {
  for (int i = 0; i < 128; i++) sprintf(out + 2 * i, "%02x", (unsigned char)id->internal[i]);
}

static int unhex(const char *in, ncclUniqueId *id) {
  if (strlen(in) != 256) return -1;
  for (int i = 0; i < 128; i++) {
    unsigned v;
    if (sscanf(in + 2 * i, "%2x", &v) != 1) return -1;
    id->internal[i] = (char)v;
  }
  return 0;
}

static int rank_main(int rank, int nranks, int steps, int laggard, int stop_at, int pause_ms,
                     int warmup_ms, int step_ms, const char *uid) {
  ncclUniqueId id;
  if (unhex(uid, &id)) return 2;
  printf("rank %d pid %d started\n", rank, getpid());
  fflush(stdout);
  usleep(warmup_ms * 1000); /* the daemon finds the process by its libraries */
  ncclComm_t comm;
  hipStream_t stream;
  if (ncclCommInitRank(&comm, nranks, id, rank) || hipStreamCreate(&stream)) return 3;
  printf("rank %d pid %d comm %p\n", rank, getpid(), (void *)comm);
  fflush(stdout);
  /* $NCCL_RANKS_SPLITS: that many communicators split off first (kept: each one more). */
  const char *splits = getenv("NCCL_RANKS_SPLITS");
  for (int i = 0; splits && i < atoi(splits); i++) {
    ncclComm_t child;
    if (ncclCommSplit(comm, i, rank, &child, NULL)) return 7;
  }
  static float buf[1024 + 4096];
  for (int i = 1; i <= steps; i++) {
    if (rank == laggard && i == stop_at) usleep(pause_ms * 1000);
    if (step_ms > 0) usleep(step_ms * 1000);
    printf("rank %d pid %d allreduce %d\n", rank, getpid(), i);
    fflush(stdout);
    /* ncclFloat32 = 7, ncclSum = 0 */
    if (ncclAllReduce(buf, buf, 1024 + i % 4096, 7, 0, comm, stream)) return 4;
    if (hipStreamSynchronize(stream)) return 5;
  }
  return ncclCommDestroy(comm) ? 6 : 0;
}

int main(int argc, char **argv) {
  if (argc > 2 && !strcmp(argv[1], "rank")) {
    /* rank R NRANKS STEPS LAGGARD STOP_AT PAUSE_MS WARMUP_MS STEP_MS UID */
    if (argc != 11) return 2;
    return rank_main(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]),
                     atoi(argv[7]), atoi(argv[8]), atoi(argv[9]), argv[10]);
  }
  if (argc < 6) {
    fprintf(stderr, "usage: nccl_ranks NRANKS STEPS LAGGARD STOP_AT PAUSE_MS [WARMUP_MS [STEP_MS]]\n");
    return 2;
  }
  ncclUniqueId id;
  if (ncclGetUniqueId(&id)) return 3;
  char uid[257];
  hex(&id, uid);
  printf("uid %s\n", uid);
  fflush(stdout);
  int nranks = atoi(argv[1]);
  for (int r = 0; r < nranks; r++) {
    if (fork() == 0) {
      char rank[16];
      snprintf(rank, sizeof rank, "%d", r);
      /* A fresh process per rank, as torchrun's are: it loads the libraries itself. */
      execl("/proc/self/exe", argv[0], "rank", rank, argv[1], argv[2], argv[3], argv[4],
            argv[5], argc > 6 ? argv[6] : "1500", argc > 7 ? argv[7] : "0", uid, (char *)NULL);
      _exit(127);
    }
  }
  int failed = 0, status;
  while (wait(&status) > 0) failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  return failed;
}
