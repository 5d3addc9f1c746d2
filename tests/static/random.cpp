// tests/static/random.cpp — Philox4x32 is a constexpr function: Random123's known answers
// (kat_vectors, philox4x32 7 and 10 rounds) hold at compile time; the generator's advance per
// operator is a function of the operator, the element size and the element count.
#include <spmd/random/draw.hpp>
#include <spmd/random/philox.hpp>

namespace {

using spmd::random::distribution;
using spmd::random::philox4x32;
using spmd::random::philox_block;
using spmd::random::words_for;

constexpr philox_block zeros{{0, 0, 0, 0}}, ones{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}};
constexpr philox_block pi{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}};

static_assert(philox4x32<10>(zeros, {{0, 0}}) ==
              philox_block{{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}});
static_assert(philox4x32<10>(ones, {{0xffffffffu, 0xffffffffu}}) ==
              philox_block{{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}});
static_assert(philox4x32<10>(pi, {{0xa4093822u, 0x299f31d0u}}) ==
              philox_block{{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}});
static_assert(philox4x32<7>(zeros, {{0, 0}}) ==
              philox_block{{0x5f6fb709u, 0x0d893f64u, 0x4f121f81u, 0x4f730a48u}});
static_assert(philox4x32<7>(ones, {{0xffffffffu, 0xffffffffu}}) ==
              philox_block{{0x5207ddc2u, 0x45165e59u, 0x4d8ee751u, 0x8c52f662u}});
static_assert(philox4x32<7>(pi, {{0xa4093822u, 0x299f31d0u}}) ==
              philox_block{{0x4dfccabau, 0x190a87f0u, 0xc47362bau, 0xb6b5242au}});

// Words an operator takes: one per element (two for f64 uniform and normal), in whole blocks.
static_assert(words_for(distribution::uniform, 4, 50) == 52);
static_assert(words_for(distribution::uniform, 8, 50) == 100);
static_assert(words_for(distribution::normal, 4, 49) == 52);   // the last pair's partner fits
static_assert(words_for(distribution::normal, 8, 49) == 100);
static_assert(words_for(distribution::bernoulli, 8, 5) == 8);
static_assert(words_for(distribution::dropout, 2, 0) == 0);
static_assert(words_for(distribution::uniform, 2, 1) == 4);

}  // namespace

int main() { return 0; }
