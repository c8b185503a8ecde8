/* A job launcher that makes no GPU call itself, as torchrun or mpirun: starts each worker
 * by fork+exec with the environment a launcher sets (RANK, WORLD_SIZE, LOCAL_RANK, and
 * the worker's own SCENARIO_LOG=DIR/rank<i>.log), waits for all of them, and fails if
 * any failed.
 * usage: launcher DIR PROG [ARGS...] [-- PROG [ARGS...]]...
 * With $LAUNCHER_GATE set, prints "launcher ready" and waits for a line on stdin first. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  if (getenv("LAUNCHER_GATE")) {
    char buf[16];
    printf("launcher ready\n");
    fflush(stdout);
    if (!fgets(buf, sizeof buf, stdin)) return 5;
  }
  int world = 1;
  for (int i = 2; i < argc; i++) world += !strcmp(argv[i], "--");
  pid_t pids[64];
  int n = 0;
  for (int start = 2; start < argc && n < 64;) {
    int end = start;
    while (end < argc && strcmp(argv[end], "--")) end++;
    argv[end < argc ? end : argc] = NULL;
    char rank[16], size[16], log[4096];
    snprintf(rank, sizeof rank, "%d", n);
    snprintf(size, sizeof size, "%d", world);
    snprintf(log, sizeof log, "%s/rank%d.log", argv[1], n);
    pid_t p = fork();
    if (p < 0) return 6;
    if (p == 0) {
      setenv("RANK", rank, 1);
      setenv("LOCAL_RANK", rank, 1);
      setenv("WORLD_SIZE", size, 1);
      setenv("SCENARIO_LOG", log, 1);
      execv(argv[start], argv + start);
      perror(argv[start]);
      _exit(127);
    }
    pids[n++] = p;
    start = end + 1;
  }
  int failed = 0;
  for (int i = 0; i < n; i++) {
    int status = 0;
    if (waitpid(pids[i], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) failed++;
  }
  return failed ? 1 : 0;
}
