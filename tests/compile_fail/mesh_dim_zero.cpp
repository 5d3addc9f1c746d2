// expect: every mesh dim must have size >= 1
#include <spmd/spmd.hpp>

using M = spmd::mesh<2, 0>;
constexpr auto n = M::ndim;
int main() { return 0; }
