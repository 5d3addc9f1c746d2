// spmd/runtime/autograd/split_backward.hpp — a backward in two passes: the gradients of some
// inputs now, every other gradient (the weights') later. Zero-bubble pipeline schedules run
// the first as I, on the critical path, and the second as W, where a rank would wait
// (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024; PyTorch's stage_backward_input
// and stage_backward_weight).
//
//   auto w = runtime::backward_input(y, dy, x);   // x.grad() is there; no parameter's yet
//   ...                                           // other work
//   w.run();                                      // the parameters' gradients, as backward's
//
// The graph from y splits in two: A, the nodes with a path to an input (x), and B, the rest
// (the parameters, and whatever leads only to them). The first pass runs A's nodes in the
// engine's order, each computing only the gradients of its A operands (wants() and send()
// ask the running pass, node.hpp); a node of A with operands in B keeps its gradient and its
// closure. The second pass runs those closures again, now computing only their B operands'
// gradients, then B's nodes in order. Each operand's gradient is the same expression as in
// one backward and every node receives its parts in the same order, so the gradients are
// bit for bit backward's (tests/autograd/split_backward.cpp). A closure that computes
// several operands' gradients together (attention's) computes the shared part twice: the
// cost of splitting it. For a linear layer, I makes dX = g·W and W makes dW = gᵀ·X.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include "spmd/runtime/autograd/node.hpp"
#include "spmd/runtime/autograd/variable.hpp"

namespace spmd::runtime {

/// The second pass of a split backward: run() computes every gradient the first left.
/// Holds the graph's B part (and the A nodes that feed it) until then.
class weight_backward {
 public:
  weight_backward() = default;
  weight_backward(weight_backward&&) noexcept = default;
  weight_backward& operator=(weight_backward&&) noexcept = default;

  /// True until run() (or when there was nothing to defer).
  bool pending() const { return !done_; }

  void run() {
    if (done_) throw std::logic_error("spmd::weight_backward: run twice");
    done_ = true;
    const std::uint64_t pass = autograd_detail::fresh_pass();
    for (auto& n : rest_) n->pass = pass;
    autograd_detail::in_backward(pass, [&] {
      for (auto& n : feeding_) n->run(retain_graph_);  // their B operands' gradients
      for (auto& n : rest_) n->run(retain_graph_);
    });
    feeding_.clear();
    rest_.clear();
  }

 private:
  template <class V, class G, class... In>
  friend weight_backward backward_input(const V&, const G&, const In&...);
  std::vector<counted_ref<node_base>> feeding_;  // A nodes with B operands, in order
  std::vector<counted_ref<node_base>> rest_;     // B's nodes, in order
  bool retain_graph_ = false;
  bool done_ = true;
};

/// The first pass from y with gradient g: the gradients of `inputs` (variables, usually
/// leaves) and of every node on a path to them; the returned object's run() computes the
/// rest. y's graph must not have been freed.
template <class V, class G, class... In>
weight_backward backward_input(const V& y, const G& grad_output, const In&... inputs) {
  weight_backward w;
  if (!y.node()) throw std::logic_error("spmd::backward_input: '" + y.name() + "' does not require a gradient");
  node_base* root = y.node().get();
  const std::vector<node_base*> order = autograd_detail::backward_order(root);
  // handles to the nodes (the engine's order is raw): the root's, then each input edge's
  std::unordered_map<const node_base*, counted_ref<node_base>> held;
  held.emplace(root, counted_ref<node_base>(y.node()));
  for (node_base* n : order)
    for (const auto& c : n->inputs()) held.emplace(c.get(), c);
  for (node_base* n : order)
    if (n->freed())
      throw std::logic_error("spmd::backward_input: the graph through '" + n->name() +
                             "' was already freed by an earlier backward");
  // A: the nodes with a path to an input (inputs before their consumers: the order reversed)
  const std::uint64_t pass = autograd_detail::fresh_pass();
  const node_base* targets[] = {inputs.node().get()..., nullptr};
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    node_base* n = *it;
    bool in_a = false;
    for (const node_base* t : targets) in_a = in_a || (t && t == n);
    for (const auto& c : n->inputs()) in_a = in_a || c->pass == pass;
    if (in_a) n->pass = pass;
  }
  y.node()->accumulate(grad_output);
  autograd_detail::in_backward(pass, [&] {
    for (node_base* n : order) {
      if (n->pass != pass) {
        w.rest_.push_back(held.at(n));
        continue;
      }
      bool feeds_b = false;
      for (const auto& c : n->inputs()) feeds_b = feeds_b || c->pass != pass;
      // a node feeding B keeps its gradient and closure for the second pass
      n->run_keep();
      if (feeds_b) w.feeding_.push_back(held.at(n));
      else n->finish_run(false);
    }
  });
  w.done_ = false;
  return w;
}

/// The same from a 0-d loss (its gradient 1).
template <class V, class... In>
weight_backward backward_input_of_loss(const V& loss, const In&... inputs) {
  using value_type = typename V::value_type;
  using T = typename value_type::value_type;
  return backward_input(loss, factories<typename V::backend_type>::template full<T>(
                                  T(1), typename V::grad_layout{loss.value().layout().extents()}),
                        inputs...);
}

}  // namespace spmd::runtime
