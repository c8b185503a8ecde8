/* Blocks its main thread in sleep() called from a function of its own, for the native
 * stack reader's tests: `ready` on stdout once it is about to sleep; `stacks_sleep wait`
 * then waits for a line on stdin first (time to put a return probe on sleep);
 * `stacks_sleep spin` spins on a CPU instead, as CUDA's default synchronize does. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile int done;

/* Not inlined, and not a tail call (the sleep is not its last call): it stays a frame. */
__attribute__((noinline)) static void wait_in_sleep(int wait) {
    char line[16];
    puts("ready");
    fflush(stdout);
    if (wait && !fgets(line, sizeof line, stdin))
        return;
    sleep(1000);
    puts("woke");
}

/* Spins in user space, in no system call, until `done` (never set). */
__attribute__((noinline)) static void spin_until_done(void) {
    puts("ready");
    fflush(stdout);
    while (!done)
        ;
    puts("done");
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "spin") == 0)
        spin_until_done();
    else
        wait_in_sleep(argc > 1);
    return 0;
}
