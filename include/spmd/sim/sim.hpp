// spmd/sim/sim.hpp — kept for code written before the backends had folders: the simulation
// now lives in spmd/backends/sim/ (the namespace is still spmd::sim).
#pragma once

#include "spmd/backends/sim/sim.hpp"
