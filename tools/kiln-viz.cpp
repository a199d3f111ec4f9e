// kiln-viz: pictures of what is inside a model and of its runs, drawn with
// Cairo as PNG files, with the numbers behind them as NumPy .npz files.
//
//   kiln-viz attention -m MODEL -p PROMPT [-n N] -o MAP.png [--npz F.npz] [--layer L --head H]
//   kiln-viz positions -m MODEL -o PE.png [--npz PE.npz]
//   kiln-viz train MODEL.csv -o LOSS.png [--log]
//   kiln-viz bench RESULTS.jsonl -o CHART.png
#include <fmt/format.h>

#include <cstdlib>
#include <string_view>

#include "engine/core/printable.h"
#include "tools/common/cli.h"
#include "tools/common/version.h"
#include "tools/kiln-viz/commands.h"

namespace {

constexpr std::string_view kHelp = R"(usage: kiln-viz COMMAND [options]   (kiln-viz COMMAND --help for its options)

Pictures of what is inside a model, as PNG files (and the numbers behind
them as NumPy .npz files that numpy.load(allow_pickle=False) reads):

  attention  the attention probabilities of every layer and head for a prompt
             (and N greedily generated tokens): a grid of maps, or one map
             with the tokens along both axes (--layer, --head)
  positions  the position signal: sinusoidal table, learned position
             embeddings, or RoPE rotation frequencies
  train      a kiln-train CSV log as a loss curve
  bench      kiln-bench's (or llama-bench's) JSON results as tokens/s charts

  -h, --help     show this help
      --version  print the version, git commit, build and kernel sets

Exit status: 0 on success, 1 on errors, 2 on usage errors.
)";

int run(int argc, char** argv) {
    if (argc < 2) kiln::cli::usage_error("a command is required: attention, positions, train or bench");
    const std::string_view command = argv[1];
    if (command == "-h" || command == "--help") {
        fmt::print("{}", kHelp);
        return 0;
    }
    if (command == "--version") {
        kiln::cli::print_version("kiln-viz");
        return 0;
    }
    if (command == "attention") return kiln::viz::attention_command(argc - 1, argv + 1);
    if (command == "positions") return kiln::viz::positions_command(argc - 1, argv + 1);
    if (command == "train") return kiln::viz::train_command(argc - 1, argv + 1);
    if (command == "bench") return kiln::viz::bench_command(argc - 1, argv + 1);
    kiln::cli::usage_error("unknown command '{}': attention, positions, train or bench", kiln::printable(command));
}

}  // namespace

int main(int argc, char** argv) {
    return kiln::cli::run_tool("kiln-viz", [&] { return run(argc, argv); });
}
