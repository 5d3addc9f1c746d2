// spmd/runtime/autograd/node.hpp — the tape: one node per recorded result, and the engine
// that runs them in reverse topological order.
//
// A node is typed by the gradient it accumulates (element type, gradient layout, backend):
// grad_node<T, GL, B> holds at most one dtensor<T, GL, B>, the sum of what its consumers
// sent back; an op's result is an op_node, which also holds the closure that turns that
// gradient into its inputs' gradients. Gradients
// arriving in another layout are redistributed into GL by a compile-time plan before they
// are summed, so a node's gradient has one type whatever the graph looks like. The engine
// sees nodes through the untyped base (node_base): the edges and the "run" step only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/core/atomic.hpp"
#include "spmd/core/maybe.hpp"
#include "spmd/runtime/autograd/shared.hpp"
#include "spmd/runtime/dtensor.hpp"
#include "spmd/runtime/ops/elementwise.hpp"

namespace spmd::runtime {

class node_base;
/// A node's inputs: handles to the nodes of the operands that need gradients.
using node_inputs = std::vector<counted_ref<node_base>>;

/// A node of the tape, without its types: what the engine needs. Owned by the variables
/// whose node it is and by the nodes it is an input of (shared.hpp).
class node_base : public counted {
 public:
  node_base(std::string name, node_inputs inputs, bool leaf)
      : name_(std::move(name)), inputs_(std::move(inputs)), leaf_(leaf) {}

  /// The op that made it ("matmul", "redistribute", ...) or the leaf's name.
  const std::string& name() const { return name_; }
  bool is_leaf() const { return leaf_; }
  /// True once a backward without retain_graph has run through it (its saved tensors gone).
  bool freed() const { return freed_; }
  const node_inputs& inputs() const { return inputs_; }

  /// Sends the accumulated gradient to the inputs (a leaf keeps it). Called by the engine
  /// once every consumer has contributed: run_keep, then finish_run.
  virtual void run(bool retain_graph) = 0;
  /// (Split backward) sends the gradient on, keeping it and the closure for another pass.
  virtual void run_keep() = 0;
  /// Drops the gradient (unless retained) and, without retain_graph, the closure.
  virtual void finish_run(bool retain_graph) = 0;

  /// (Engine) the walk that last visited this node: a walk marks nodes with a fresh number
  /// instead of keeping a set of them.
  std::uint64_t visited = 0;
  /// (Engine) the split backward's pass that may send this node gradients (autograd_detail::
  /// pass_allows; 0 and no pass running: any).
  std::uint64_t pass = 0;

 protected:
  std::string name_;
  node_inputs inputs_;
  bool leaf_;
  bool freed_ = false;
};

namespace autograd_detail {

/// Every node reachable from root, each after all of its consumers (reverse post-order of
/// a depth-first walk over the input edges; iterative, so deep graphs do not overflow).
inline std::vector<node_base*> backward_order(node_base* root) {
  static atomic_word<std::uint64_t> walks{0};  // unique over threads: marks never collide
  const std::uint64_t walk = walks.fetch_add(1) + 1;
  std::vector<node_base*> post;
  root->visited = walk;
  std::vector<std::pair<node_base*, std::size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [n, next] = stack.back();
    if (next < n->inputs().size()) {
      node_base* c = n->inputs()[next++].get();
      if (c->visited != walk) {
        c->visited = walk;
        stack.emplace_back(c, 0);
      }
    } else {
      post.push_back(n);
      stack.pop_back();
    }
  }
  std::reverse(post.begin(), post.end());
  return post;
}

/// The split backward's pass running on this thread (0: none, every node takes gradients).
inline std::uint64_t& current_pass() {
  thread_local std::uint64_t pass = 0;
  return pass;
}
inline std::uint64_t fresh_pass() {
  static atomic_word<std::uint64_t> passes{0};
  return passes.fetch_add(1) + 1;
}
/// Whether the running backward computes a gradient for node n (split_backward.hpp's passes
/// each compute a part of the graph; outside them, every node).
inline bool pass_allows(const node_base* n) {
  const std::uint64_t p = current_pass();
  return p == 0 || n->pass == p;
}

/// What runs when the current backward ends (this thread's).
inline std::vector<std::function<void()>>& final_callbacks() {
  thread_local std::vector<std::function<void()>> queue;
  return queue;
}
/// How many backwards are running on this thread (0: none).
inline int& backward_depth() {
  thread_local int depth = 0;
  return depth;
}

/// Runs `nodes` (a callable that runs a backward's nodes) as one backward of split pass `pass`
/// (0: a whole backward), then the callbacks they queued: what every backward shares (run_backward,
/// and split_backward.hpp's two passes). The queue is emptied even when a node throws.
template <class F>
void in_backward(std::uint64_t pass, F&& nodes) {
  struct scope {
    std::uint64_t prev = current_pass();
    explicit scope(std::uint64_t p) {
      current_pass() = p;
      ++backward_depth();
    }
    ~scope() {
      --backward_depth();
      current_pass() = prev;
    }
  } inside(pass);
  auto& queue = final_callbacks();
  try {
    nodes();
    // A callback may queue another: run until none is left, in the order queued.
    for (std::size_t k = 0; k < queue.size(); ++k) {
      auto f = std::move(queue[k]);
      f();
    }
  } catch (...) {
    queue.clear();
    throw;
  }
  queue.clear();
}

/// Runs the nodes reachable from root (whose gradient is already seeded), then the callbacks
/// they queued. Checks first that none was freed, so a refused backward changes no gradient.
inline void run_backward(node_base* root, bool retain_graph) {
  const std::vector<node_base*> order = backward_order(root);
  for (node_base* n : order)
    if (n->freed())
      throw std::logic_error(
          "spmd::backward: the graph through '" + n->name() +
          "' was already freed by an earlier backward (its saved tensors are gone); pass "
          "retain_graph = true to the first backward to run backward through it again");
  in_backward(current_pass(), [&] {
    for (node_base* n : order) n->run(retain_graph);
  });
}

/// dtensor g as the layout GL (same mesh, placements and global shape; only the extents'
/// static/dynamic spelling may differ): the locals are kept.
template <class GL, element T, class L, class B>
dtensor<T, GL, B> relabel(dtensor<T, L, B>&& g) {
  if constexpr (std::is_same_v<L, GL>) {
    return std::move(g);
  } else {
    static_assert(std::is_same_v<typename L::placements_type, typename GL::placements_type>);
    GL lo = [&] {
      if constexpr (GL::extents_type::is_static()) return GL{};
      else return GL{GL::extents_type::from_values(g.layout().extents().values())};
    }();
    return dtensor<T, GL, B>(detail::internal_t{}, lo, std::move(g).locals());
  }
}

/// g in the layout GL: redistributed by the compile-time plan when its placements differ.
template <class GL, element T, class L, class B>
dtensor<T, GL, B> to_layout(dtensor<T, L, B>&& g) {
  static_assert(std::is_same_v<typename L::mesh_type, typename GL::mesh_type>,
                "spmd::backward: a gradient arrived on another mesh than its tensor's.");
  static_assert(L::rank == GL::rank,
                "spmd::backward: a gradient arrived with another number of dims than its tensor.");
  if constexpr (std::is_same_v<typename L::placements_type, typename GL::placements_type>)
    return relabel<GL>(std::move(g));
  else
    return relabel<GL>(runtime::redistribute<typename GL::placements_type>(std::move(g)));
}

}  // namespace autograd_detail

/// Runs f once the backward that is running on this thread ends, after every node (torch's
/// queue_callback): how data parallelism finishes the gradient reductions that a backward
/// did not complete (a bucket with an unused parameter). Outside a backward f runs now.
inline void queue_callback(std::function<void()> f);

/// A node accumulating a gradient of type dtensor<T, GL, B>: a leaf as it is; an op's result
/// is an op_node, which adds the backward closure.
template <element T, class GL, class B>
class grad_node : public node_base {
 public:
  using grad_type = dtensor<T, GL, B>;

  /// A leaf: it keeps what arrives.
  explicit grad_node(std::string name) : node_base(std::move(name), {}, true) {}

  /// Adds g (any layout of this tensor) to the gradient.
  template <class L>
  void accumulate(dtensor<T, L, B>&& g) {
    grad_type r = autograd_detail::to_layout<GL>(std::move(g));
    if (!grad_) grad_.emplace(std::move(r));
    else grad_.emplace(autograd_detail::relabel<GL>(runtime::add<typename GL::placements_type>(*grad_, r)));
  }
  template <class L>
  void accumulate(const dtensor<T, L, B>& g) {
    accumulate(dtensor<T, L, B>(g));
  }

  const maybe<grad_type>& grad() const { return grad_; }
  maybe<grad_type>& grad() { return grad_; }
  /// Keep the gradient of this non-leaf after backward (torch's retain_grad()).
  void retain_grad() { retain_grad_ = true; }

  void run(bool retain_graph) override {
    run_keep();
    finish_run(retain_graph);
  }
  void run_keep() override {
    if (leaf_) return;
    if (grad_) backward(*grad_);
  }
  void finish_run(bool retain_graph) override {
    if (leaf_) return;
    if (!retain_grad_) grad_.reset();
    if (!retain_graph) {
      release();  // the saved tensors go with the closure
      freed_ = true;
    }
  }

 protected:
  grad_node(std::string name, node_inputs inputs)
      : node_base(std::move(name), std::move(inputs), false) {}
  /// Sends g to the inputs (an op's result; a leaf has nothing to do).
  virtual void backward(const grad_type&) {}
  /// Drops the closure and what it saved.
  virtual void release() {}

 private:
  maybe<grad_type> grad_;
  bool retain_grad_ = false;
};

/// An op's result: the closure F (called with the gradient) stored in the node itself, so a
/// recorded op allocates one node, not a node and a std::function. The closure lives in the
/// node's own storage until release() (not in a maybe<F>: a node type per recorded op, and
/// maybe's members were seven more functions each, 4,700 of tests/autograd/grad_shape.cpp's
/// at -O0).
template <element T, class GL, class B, class F>
class op_node final : public grad_node<T, GL, B> {
 public:
  op_node(std::string name, node_inputs inputs, F fn)
      : grad_node<T, GL, B>(std::move(name), std::move(inputs)) {
    ::new (static_cast<void*>(fn_)) F(std::move(fn));
    live_ = true;
  }
  ~op_node() override { op_node::release(); }
  op_node(const op_node&) = delete;
  op_node& operator=(const op_node&) = delete;

 private:
  F* fn() noexcept { return std::launder(reinterpret_cast<F*>(fn_)); }
  void backward(const typename grad_node<T, GL, B>::grad_type& g) override {
    if (live_) (*fn())(g);
  }
  void release() override {
    if (live_) {
      live_ = false;
      std::destroy_at(fn());
    }
  }

  alignas(F) unsigned char fn_[sizeof(F)];
  bool live_ = false;
};

inline void queue_callback(std::function<void()> f) {
  if (autograd_detail::backward_depth() == 0) f();
  else autograd_detail::final_callbacks().push_back(std::move(f));
}

}  // namespace spmd::runtime
