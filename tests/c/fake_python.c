/* A hostile target for the stack reader: built as `python3.11`, it exports what py-spy
 * looks for — Py_Version (3.11.0) and a _PyRuntime — but every word of its runtime lies.
 * `fake_python cycles`: each word points back into _PyRuntime, so every list the reader
 * follows (interpreters, threads, frames) is a cycle and every length is an address.
 * `fake_python mixed`: the same pointers among huge and negative lengths and pointers to
 * unmapped memory. `fake_python jail DIR`: maps DIR/libpython3.11.so as code, then
 * chroots into DIR/jail, where the test put a FIFO at the same path: a reader opening
 * what the maps name through /proc/PID/root blocks there. Prints `ready`, then waits. */
#include <stdint.h>
#include <stdio.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define WORDS 16384

__attribute__((used, visibility("default"))) uint32_t Py_Version = 0x030b00f0;
__attribute__((used, visibility("default"))) uintptr_t _PyRuntime[WORDS];

int main(int argc, char **argv) {
    int mixed = argc > 1 && strcmp(argv[1], "mixed") == 0;
    for (uintptr_t i = 0; i < WORDS; i++) {
        uintptr_t back = (uintptr_t)&_PyRuntime[(i * 7 + 8) % WORDS];
        switch (mixed ? i % 5 : 0) {
        case 2: _PyRuntime[i] = 0x7fffffffffffULL; break;
        case 3: _PyRuntime[i] = (uintptr_t)-256; break;
        case 4: _PyRuntime[i] = 0x10; break;
        default: _PyRuntime[i] = back;
        }
    }
    if (argc > 2 && strcmp(argv[1], "jail") == 0) {
        char path[4096];
        snprintf(path, sizeof path, "%s/libpython3.11.so", argv[2]);
        int fd = open(path, O_RDONLY);
        if (fd < 0 || mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED) {
            perror(path);
            return 1;
        }
        snprintf(path, sizeof path, "%s/jail", argv[2]);
        if (chroot(path) != 0 || chdir("/") != 0) {
            perror(path);
            return 1;
        }
    }
    puts("ready");
    fflush(stdout);
    for (;;)
        pause();
}
