// tests/autograd/ownership.cpp — the tape's ownership (runtime/autograd/shared.hpp, core/maybe.hpp):
// each object destroyed exactly once, when its last handle goes; maybe<T> holding and
// dropping values; and a recorded graph freed with its last variable. (The ASan build runs
// this with leak detection; tests/sim/threads.cpp shares handles across threads under TSan.)
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "spmd/core/maybe.hpp"
#include "spmd/runtime/autograd.hpp"
#include "spmd/backends/sim/sim.hpp"

using namespace spmd;
namespace rt = spmd::runtime;

namespace {
/// Counts its live instances.
struct tracked {
  static inline int alive = 0;
  int v;
  explicit tracked(int x) : v(x) { ++alive; }
  tracked(const tracked& o) : v(o.v) { ++alive; }
  tracked(tracked&& o) noexcept : v(o.v) { ++alive; }
  ~tracked() { --alive; }
};
struct base_obj : rt::counted {
  static inline int alive = 0;
  base_obj() { ++alive; }
  ~base_obj() override { --alive; }
  virtual int id() const { return 1; }
};
struct derived_obj final : base_obj {
  tracked t{7};
  int id() const override { return 2; }
};
}  // namespace

TEST_CASE("handles: the last owner destroys the object, once", "[autograd][ownership]") {
  REQUIRE(base_obj::alive == 0);
  {
    rt::counted_ref<derived_obj> a = rt::make_counted<derived_obj>();
    CHECK(a.owners() == 1);
    CHECK(base_obj::alive == 1);
    CHECK(tracked::alive == 1);
    rt::counted_ref<base_obj> b = a;  // derived to base: the same object
    CHECK(a.owners() == 2);
    CHECK(b->id() == 2);
    CHECK(b.get() == static_cast<base_obj*>(a.get()));
    rt::counted_ref<base_obj> c = std::move(b);
    CHECK(b == nullptr);
    CHECK(a.owners() == 2);
    std::vector<rt::counted_ref<base_obj>> many(5, c);
    CHECK(a.owners() == 7);
    many.clear();
    a.reset();
    CHECK(a == nullptr);
    CHECK(c.owners() == 1);
    CHECK(base_obj::alive == 1);  // c still owns it
    c = nullptr;
    CHECK(base_obj::alive == 0);
    CHECK(tracked::alive == 0);  // the derived part's members too (virtual destructor)
  }
  rt::counted_ref<base_obj> n;
  CHECK(!n);
  CHECK(n.owners() == 0);
  n.reset();  // a null handle's reset does nothing
  rt::counted_ref<base_obj> self = rt::make_counted<base_obj>();
  const rt::counted_ref<base_obj>& alias = self;
  self = alias;  // assignment to itself keeps the object
  CHECK(self.owners() == 1);
  CHECK(self->id() == 1);
}

TEST_CASE("shared_value: copies share one value; share() copies it to the heap", "[autograd][ownership]") {
  REQUIRE(tracked::alive == 0);
  {
    tracked t(3);
    rt::shared_value<tracked> a = rt::share(t);
    CHECK(tracked::alive == 2);
    auto b = a;
    b->v = 9;
    CHECK(a->v == 9);
    CHECK((*a).v == 9);
    CHECK(t.v == 3);
    CHECK(a.get() == b.get());
    a = nullptr;
    CHECK(a.get() == nullptr);
    CHECK(tracked::alive == 2);
    b.reset();
    CHECK(tracked::alive == 1);
  }
  CHECK(tracked::alive == 0);
}

TEST_CASE("maybe: emplace, reset, and a throwing emplace leaves nothing", "[autograd][ownership]") {
  REQUIRE(tracked::alive == 0);
  {
    maybe<tracked> m;
    CHECK(!m.has_value());
    m.emplace(4);
    CHECK(m.has_value());
    CHECK(m->v == 4);
    m.emplace(5);  // the old value destroyed first
    CHECK(tracked::alive == 1);
    CHECK((*m).v == 5);
    m.reset();
    CHECK(!m);
    CHECK(tracked::alive == 0);
    m.reset();
    m.emplace(6);
  }
  CHECK(tracked::alive == 0);  // the destructor drops what is held
  struct throws_on_make {
    explicit throws_on_make(bool t) {
      if (t) throw std::runtime_error("no");
    }
  };
  maybe<throws_on_make> m;
  m.emplace(false);
  CHECK_THROWS_AS(m.emplace(true), std::runtime_error);
  CHECK(!m.has_value());
}

TEST_CASE("a recorded graph lives while a variable reaches it, and no longer", "[autograd][ownership]") {
  using L = layout<mesh<2>, placements<shard<0>>, extents<4>>;
  auto x = sim::requires_grad(sim::distribute_tensor<L>(std::vector<double>{1, 2, 3, 4}), "x");
  CHECK(x.node().owners() == 1);
  {
    auto y = rt::sum<>(x * x + x);
    // x's node is an input of the mul and add nodes (and x's own handle).
    CHECK(x.node().owners() >= 2);
    auto y2 = y;  // a copy shares the value and the node
    CHECK(y2.node().get() == y.node().get());
    CHECK(&y2.value() == &y.value());
    y.backward();
    CHECK(x.grad().full_tensor() == std::vector<double>{3, 5, 7, 9});
  }
  CHECK(x.node().owners() == 1);  // the graph went with y and y2
}
