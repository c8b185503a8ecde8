/* Blocks its main thread in sleep() called from a function of its own, for the native
 * stack reader's tests: `ready` on stdout once it is about to sleep; `stacks_sleep wait`
 * then waits for a line on stdin first (time to put a return probe on sleep). */
#include <stdio.h>
#include <unistd.h>

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

int main(int argc, char **argv) {
    (void)argv;
    wait_in_sleep(argc > 1);
    return 0;
}
