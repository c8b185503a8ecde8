/* Runs rocsync as a test's standalone capture: `standalone ROCSYNC SOCKET ARGS…` execs
 * `ROCSYNC ARGS…`, with `--daemon-socket SOCKET` after a `run` or `attach` subcommand
 * unless ARGS name one before `--`, so that a daemon running on the host never answers a
 * test's capture. It installs no signal handler and changes nothing else: until its exec
 * it is a process of no handlers, and after it the pid is rocsync's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  char **args = calloc((size_t)argc + 2, sizeof *args);
  int n = 0, add = argc > 3 && (!strcmp(argv[3], "run") || !strcmp(argv[3], "attach"));
  for (int i = 4; i < argc && add && strcmp(argv[i], "--"); i++)
    if (!strcmp(argv[i], "--daemon-socket")) add = 0;
  args[n++] = argv[1];
  for (int i = 3; i < argc; i++) {
    args[n++] = argv[i];
    if (i == 3 && add) {
      args[n++] = "--daemon-socket";
      args[n++] = argv[2];
    }
  }
  args[n] = NULL;
  execv(argv[1], args);
  perror(argv[1]);
  return 127;
}
