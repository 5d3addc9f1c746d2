// tools/train/report.hpp — the end of a run of `spmd-train`: one JSON object (--json; the
// fields and their order are a contract) or the table's last lines.
#pragma once

#include "options.hpp"
#include "result.hpp"

namespace spmd_train {

void print_result(const train_options& o, const train_result& r);

}  // namespace spmd_train
