/* Maps files, as an unprivileged neighbour of the daemon would, then waits: each line
 * on stdin loads and unloads a library (a link-map change the daemon looks at) and
 * answers "loaded"; end of input exits. Prints "mapped" once every file is mapped.
 * usage: map_wait FILE... */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    int fd = open(argv[i], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
      perror(argv[i]);
      return 1;
    }
    /* The first page, executable: as a loader maps a library's code. */
    if (mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED) {
      perror("mmap");
      return 1;
    }
    close(fd);
  }
  printf("mapped\n");
  fflush(stdout);
  char line[64];
  while (fgets(line, sizeof line, stdin)) {
    void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h) dlclose(h);
    printf("loaded\n");
    fflush(stdout);
  }
  return 0;
}
