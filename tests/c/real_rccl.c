/* Calls a real RCCL (Debian's librccl1, over its real HIP runtime) as a job would, with
 * RCCL's own prototypes (nccl.h): a unique id, a communicator set-up (the id passed by
 * value, 128 bytes on the stack), a group, and a destroy. Without a GPU the set-up fails (no communicator: RCCL's
 * collectives would read through it), but each call is made through the library's real
 * exports. Logs a line per call, NAME RET, and "uid HEX" (the 128 bytes set-up got).
 * usage: real_rccl   (log: $SCENARIO_LOG) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char internal[128]; } ncclUniqueId;
typedef void *ncclComm_t;
typedef void *hipStream_t;
typedef int ncclResult_t;

ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

static FILE *out;

static void logged(const char *name, ncclResult_t r) { fprintf(out, "%s %d\n", name, r); }

int main(void) {
  const char *path = getenv("SCENARIO_LOG");
  out = fopen(path ? path : "/dev/null", "w");
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  logged("ncclGetUniqueId", ncclGetUniqueId(&id));
  /* Without a GPU it gives none: a pattern of our own is passed instead. */
  for (size_t i = 0; i < sizeof id; i++)
    if (!id.internal[i]) id.internal[i] = (char)(i * 7 + 3);
  fprintf(out, "uid ");
  for (size_t i = 0; i < sizeof id; i++) fprintf(out, "%02x", (unsigned char)id.internal[i]);
  fprintf(out, "\n");
  ncclComm_t comm = NULL;
  logged("ncclCommInitRank", ncclCommInitRank(&comm, 1, id, 0));
  /* Without a GPU set-up fails and leaves no communicator, and RCCL reads a
   * collective's communicator before it checks it: only the calls that need none. */
  logged("ncclGroupStart", ncclGroupStart());
  logged("ncclGroupEnd", ncclGroupEnd());
  logged("ncclCommDestroy", ncclCommDestroy(comm));
  fclose(out);
  return 0;
}
