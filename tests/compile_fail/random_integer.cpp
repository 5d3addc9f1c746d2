// expect: random operators fill floating-point tensors (f32, f64, bf16, f16)
#include <spmd/backends/sim/sim.hpp>

// rand of an integer dtensor has no meaning that PyTorch and spmd share (torch.rand refuses
// integer dtypes): refused at compile time.
int main() {
  using namespace spmd;
  (void)sim::rand<int, layout<mesh<4>, placements<shard<0>>, extents<8>>>();
}
