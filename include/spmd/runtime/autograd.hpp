// spmd/runtime/autograd.hpp — reverse-mode differentiation over dtensors, on every backend
// (docs/autograd.md).
//
//   auto w = requires_grad(spmd::sim::distribute_tensor<LW>(w0), "W");
//   auto loss = mean<>(relu(matmul(x, w)));
//   loss.backward();
//   w.grad();            // spmd::sim::dtensor<float, decltype(w)::grad_layout>
//
// Variables (autograd/variable.hpp) record the operators applied to them on a tape of typed
// nodes (autograd/node.hpp); each operator's backward is a composition of operators whose
// sharding the compiler chooses, and every gradient's layout is a type.
#pragma once

#include "spmd/runtime/autograd/attention.hpp"
#include "spmd/runtime/autograd/elementwise.hpp"
#include "spmd/runtime/autograd/grad_mode.hpp"
#include "spmd/runtime/autograd/local.hpp"
#include "spmd/runtime/autograd/local_map.hpp"
#include "spmd/runtime/autograd/loss.hpp"
#include "spmd/runtime/autograd/matmul.hpp"
#include "spmd/runtime/autograd/nn.hpp"
#include "spmd/runtime/autograd/node.hpp"
#include "spmd/runtime/autograd/operand.hpp"
#include "spmd/runtime/autograd/redistribute.hpp"
#include "spmd/runtime/autograd/reduction.hpp"
#include "spmd/runtime/autograd/shape_grad.hpp"
#include "spmd/runtime/autograd/tp.hpp"
#include "spmd/runtime/autograd/variable.hpp"
#include "spmd/runtime/autograd/view.hpp"
