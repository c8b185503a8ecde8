/* `peak_rss CMD ARGS…` runs CMD and prints its peak resident set (KiB) as the last line
 * of stdout, exiting with its status. A peak read by the test process itself would not
 * be CMD's: a child forked from it starts as a copy of the test process, and Linux keeps
 * the larger resident set across exec (ru_maxrss). This small program is what CMD is
 * forked from, so the copy is a few hundred KiB. */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return perror("fork"), 127;
  if (pid == 0) {
    execv(argv[1], argv + 1);
    perror(argv[1]);
    _exit(127);
  }
  int status;
  struct rusage usage;
  if (wait4(pid, &status, 0, &usage) != pid) return perror("wait4"), 127;
  printf("%ld\n", usage.ru_maxrss);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
