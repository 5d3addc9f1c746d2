// spmd/spmd.hpp — everything of the compile-time core.
#pragma once

#include "spmd/core/chunk.hpp"
#include "spmd/core/config.hpp"
#include "spmd/core/extents.hpp"
#include "spmd/core/fixed_string.hpp"
#include "spmd/core/layout.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/core/mesh.hpp"
#include "spmd/core/mesh_groups.hpp"
#include "spmd/core/placement.hpp"
#include "spmd/core/numerics.hpp"
#include "spmd/core/small_array.hpp"
#include "spmd/core/with_rank.hpp"
