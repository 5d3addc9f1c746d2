// spmd/runtime/autograd/grad_mode.hpp — whether operations on variables are recorded.
//
//   { spmd::sim::no_grad guard;  auto y = matmul(x, w); }   // y has no history
//
// Like torch.no_grad: a per-thread switch, restored when the guard goes out of scope. It
// governs variables only; operations on plain dtensors are never recorded.
#pragma once

namespace spmd::runtime {

namespace autograd_detail {
inline bool& grad_enabled_flag() {
  thread_local bool enabled = true;
  return enabled;
}
}  // namespace autograd_detail

/// True unless a no_grad guard is alive on this thread.
inline bool is_grad_enabled() { return autograd_detail::grad_enabled_flag(); }

/// Sets the recording switch for its lifetime, then restores the previous value.
class grad_mode_guard {
 public:
  explicit grad_mode_guard(bool enabled) : previous_(autograd_detail::grad_enabled_flag()) {
    autograd_detail::grad_enabled_flag() = enabled;
  }
  ~grad_mode_guard() { autograd_detail::grad_enabled_flag() = previous_; }
  grad_mode_guard(const grad_mode_guard&) = delete;
  grad_mode_guard& operator=(const grad_mode_guard&) = delete;

 private:
  bool previous_;
};

/// Operations on variables record nothing while it lives (torch.no_grad()).
class no_grad : public grad_mode_guard {
 public:
  no_grad() : grad_mode_guard(false) {}
};
/// Recording back on inside a no_grad scope (torch.enable_grad()).
class enable_grad : public grad_mode_guard {
 public:
  enable_grad() : grad_mode_guard(true) {}
};

}  // namespace spmd::runtime
