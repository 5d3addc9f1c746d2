// Baseline for the compile-time benchmark: the headers and nothing else.
#include "spmd/spmd.hpp"

int main() { return 0; }
