#pragma once
// A training log as a picture: the loss of every step (thin, grey), its
// running mean over 50 steps, the evaluated training and validation losses
// (dots), and for the reverse task the held-out exact match, greedy and beam
// search, against a 0..100% axis on the right. kiln-train draws it beside its
// CSV after each checkpoint; kiln-viz train draws it from the CSV.
#include <filesystem>

#include "engine/train/train_log.h"

namespace kiln::plot {

// log_y: the losses on a logarithmic axis.
void draw_loss_chart(const std::filesystem::path& path, const train::TrainLog& log, bool log_y = false);

}  // namespace kiln::plot
