/* Calls the statically linked collective library's entry point: N rounds.
 * usage: nccl_user N */
#include <stdlib.h>

int simAllReduce(int n);

int main(int argc, char **argv) {
  return simAllReduce(argc > 1 ? atoi(argv[1]) : 10) ? 1 : 0;
}
