// spmd/runtime/observe.hpp — seeing what a sharded program does: logging (SPMD_LOG,
// spmd::log), timelines (SPMD_TRACE, spmd::timeline::session). docs/observability.md.
#pragma once

#include "spmd/runtime/observe/hooks.hpp"
#include "spmd/runtime/observe/log.hpp"
#include "spmd/runtime/observe/switch.hpp"
#include "spmd/runtime/observe/trace.hpp"
