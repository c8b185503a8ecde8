/* A collective library with nccl.h's exports and signatures (RCCL's are the same), over
 * the simulated runtime it links dynamically, as RCCL links the HIP runtime. Ranks are
 * processes given one unique id: each communicator is a shared file named by the id,
 * holding each rank's last collective. A collective enqueues work on its stream that is
 * done once every rank has entered it (hipSimGate): a rank that stops early blocks the
 * others' synchronisation, as a real hang does. */
#include "hip_sim.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef enum { ncclSuccess = 0, ncclInvalidArgument = 4, ncclSystemError = 2 } ncclResult_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;
typedef struct ncclConfig ncclConfig_t;
typedef struct ncclComm *ncclComm_t;

#define MAX_RANKS 64
#define EXPORT __attribute__((visibility("default")))

struct ncclComm {
  int rank, nranks, splits;
  unsigned long long seq;
  volatile unsigned long long *slots; /* each rank's last collective, shared */
  ncclUniqueId id;
  char path[512];
};

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  int fd = open("/dev/urandom", O_RDONLY);
  if (fd < 0 || read(fd, id->internal, sizeof id->internal) != sizeof id->internal) {
    if (fd >= 0) close(fd);
    return ncclSystemError;
  }
  close(fd);
  return ncclSuccess;
}

static ncclResult_t make(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank) {
  if (!out || nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks)
    return ncclInvalidArgument;
  unsigned long long tag;
  memcpy(&tag, id->internal, sizeof tag);
  const char *dir = getenv("TMPDIR");
  char path[512];
  snprintf(path, sizeof path, "%s/nccl-sim-%016llx", dir ? dir : "/tmp", tag);
  int fd = open(path, O_RDWR | O_CREAT, 0600);
  if (fd < 0 || ftruncate(fd, MAX_RANKS * 8) != 0) return ncclSystemError;
  void *m = mmap(NULL, MAX_RANKS * 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return ncclSystemError;
  struct ncclComm *c = calloc(1, sizeof *c);
  c->rank = rank;
  c->nranks = nranks;
  c->slots = m;
  c->id = *id;
  memcpy(c->path, path, sizeof path);
  *out = c;
  return ncclSuccess;
}

EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  return make(comm, nranks, &id, rank);
}

EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id,
                                           int rank, ncclConfig_t *config) {
  (void)config;
  return make(comm, nranks, &id, rank);
}

EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) {
  (void)devlist;
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  for (int i = 0; i < ndev && r == ncclSuccess; i++) r = make(&comms[i], ndev, &id, i);
  return r;
}

/* The child's file: the parent's id with which split it is and its colour mixed in. */
EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                  ncclConfig_t *config) {
  (void)config;
  ncclUniqueId id = comm->id;
  unsigned long long tag;
  memcpy(&tag, id.internal, sizeof tag);
  tag ^= 0x9e3779b97f4a7c15ull * (unsigned long long)(comm->splits++ * 1000 + color + 1);
  memcpy(id.internal, &tag, sizeof tag);
  return make(newcomm, comm->nranks, &id, key % comm->nranks);
}

static ncclResult_t end(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  munmap((void *)comm->slots, MAX_RANKS * 8);
  if (comm->rank == 0) unlink(comm->path); /* the others have it mapped */
  free(comm);
  return ncclSuccess;
}

EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) { return end(comm); }
EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) { return end(comm); }

static int everyone_entered(void *arg) {
  ncclComm_t c = arg;
  for (int r = 0; r < c->nranks; r++)
    if (__atomic_load_n(&c->slots[r], __ATOMIC_ACQUIRE) < c->seq) return 0;
  return 1;
}

static ncclResult_t enqueue(ncclComm_t comm, hipStream_t stream) {
  if (!comm) return ncclInvalidArgument;
  comm->seq++;
  __atomic_store_n(&comm->slots[comm->rank], comm->seq, __ATOMIC_RELEASE);
  if (hipSimLaunch(stream, 20) != 0) return ncclInvalidArgument;
  return hipSimGate(stream, everyone_entered, comm) ? ncclInvalidArgument : ncclSuccess;
}

EXPORT ncclResult_t ncclAllReduce(const void *s, void *r, size_t count, ncclDataType_t t,
                                  ncclRedOp_t op, ncclComm_t comm, hipStream_t stream) {
  (void)s, (void)r, (void)count, (void)t, (void)op;
  return enqueue(comm, stream);
}
EXPORT ncclResult_t ncclBroadcast(const void *s, void *r, size_t count, ncclDataType_t t,
                                  int root, ncclComm_t comm, hipStream_t stream) {
  (void)s, (void)r, (void)count, (void)t, (void)root;
  return enqueue(comm, stream);
}
EXPORT ncclResult_t ncclReduce(const void *s, void *r, size_t count, ncclDataType_t t,
                               ncclRedOp_t op, int root, ncclComm_t comm, hipStream_t stream) {
  (void)s, (void)r, (void)count, (void)t, (void)op, (void)root;
  return enqueue(comm, stream);
}
EXPORT ncclResult_t ncclAllGather(const void *s, void *r, size_t count, ncclDataType_t t,
                                  ncclComm_t comm, hipStream_t stream) {
  (void)s, (void)r, (void)count, (void)t;
  return enqueue(comm, stream);
}
EXPORT ncclResult_t ncclReduceScatter(const void *s, void *r, size_t count, ncclDataType_t t,
                                      ncclRedOp_t op, ncclComm_t comm, hipStream_t stream) {
  (void)s, (void)r, (void)count, (void)t, (void)op;
  return enqueue(comm, stream);
}
EXPORT ncclResult_t ncclAllToAll(const void *s, void *r, size_t count, ncclDataType_t t,
                                 ncclComm_t comm, hipStream_t stream) {
  (void)s, (void)r, (void)count, (void)t;
  return enqueue(comm, stream);
}
EXPORT ncclResult_t ncclSend(const void *b, size_t count, ncclDataType_t t, int peer,
                             ncclComm_t comm, hipStream_t stream) {
  (void)b, (void)count, (void)t, (void)peer;
  return enqueue(comm, stream);
}
EXPORT ncclResult_t ncclRecv(void *b, size_t count, ncclDataType_t t, int peer,
                             ncclComm_t comm, hipStream_t stream) {
  (void)b, (void)count, (void)t, (void)peer;
  return enqueue(comm, stream);
}
EXPORT ncclResult_t ncclGroupStart(void) { return ncclSuccess; }
EXPORT ncclResult_t ncclGroupEnd(void) { return ncclSuccess; }
