/* Blocks its main thread in sleep() called from a function of its own, for the native
 * stack reader's tests: `ready` on stdout once it is about to sleep. */
#include <stdio.h>
#include <unistd.h>

/* Not inlined, and not a tail call (the sleep is not its last call): it stays a frame. */
__attribute__((noinline)) static void wait_in_sleep(void) {
    puts("ready");
    fflush(stdout);
    sleep(1000);
    puts("woke");
}

int main(void) {
    wait_in_sleep();
    return 0;
}
