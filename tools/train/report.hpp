// tools/train/report.hpp — the end of a run of `spmd-train`: one JSON object (--json; the
// fields and their order are a contract) or the table's last lines.
#pragma once

#include <cstdint>
#include <string>

#include "options.hpp"
#include "result.hpp"

namespace spmd_train {

void print_result(const train_options& o, const train_result& r);

/// A flag's number as a user would write it ("1e-07", "-1", "nan"), not std::to_string's
/// fixed six decimals ("0.000000").
std::string number_text(double v);

/// The first step (counted from 1) whose loss or gradient norm is not finite; 0 if none.
std::int64_t first_non_finite(const train_result& r);
/// Says on stderr that the run diverged at `step` (first_non_finite), with its loss and norm.
void warn_non_finite(const train_result& r, std::int64_t step);

}  // namespace spmd_train
