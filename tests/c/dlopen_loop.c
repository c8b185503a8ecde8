/* A process that maps no GPU runtime and loads and unloads a library in a loop: every
 * load is a link-map change rocsync's loader probe stops at. Prints "ready", then runs
 * until killed; prints nothing else. usage: dlopen_loop */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

int main(void) {
  printf("ready\n");
  fflush(stdout);
  for (;;) {
    void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h) dlclose(h);
    usleep(200);
  }
}
