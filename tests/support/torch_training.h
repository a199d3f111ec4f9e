#pragma once
// Checking a trainer against a PyTorch training fixture (tests/reference/
// make_train_fixtures.py, make_llama_train_fixture.py): "grad.<tensor>" holds
// torch's float64 gradient (rounded to float32) of one step, "adam3.<tensor>"
// the parameters after 3 AdamW steps on the same batch.
#include <cstddef>
#include <vector>

#include "engine/train/param_model.h"
#include "formats/gguf/gguf_file.h"

namespace kiln::test {

// Every gradient element within 1e-4 relative of torch's; elements below
// `floor` of their tensor's largest are judged against floor times it (their
// float32 value carries the absolute rounding of the larger ones). Returns the
// largest relative difference.
double require_gradients_match(const GgufFile& fixture, const train::ParamModel& model,
                               const std::vector<float>& gradients, double floor);

// The parameters after 3 steps within 1e-5 of torch's. Adam divides by
// sqrt(v), so an element's step has a full size whatever its gradient's
// magnitude: where torch's gradient is under 1e-4 of its tensor's largest (0
// exactly, or below the float32 noise), the sign of that step is noise, and
// the element is not compared. Returns how many were skipped of how many.
std::pair<size_t, size_t> require_adam_steps_match(const GgufFile& fixture, train::ParamModel& model);

}  // namespace kiln::test
