// expect: a static extent must be >= 0
#include <spmd/spmd.hpp>

// spmd::dyn (-1) marks a run-time extent; other negative values are errors.
using E = spmd::extents<4, -2>;
constexpr auto r = E::rank();
int main() { return 0; }
