// kiln-viz train: a kiln-train CSV log drawn as its loss curve (the same
// picture kiln-train writes beside the CSV).
#include <fmt/format.h>

#include <string>

#include "engine/core/printable.h"
#include "engine/train/train_log.h"
#include "formats/io/output_path.h"
#include "formats/io/regular_file.h"
#include "plot/loss_chart.h"
#include "tools/common/cli.h"
#include "tools/kiln-viz/commands.h"

namespace kiln::viz {

namespace {

constexpr std::string_view kHelp = R"(usage: kiln-viz train MODEL.csv -o LOSS.png [--log]

Draws a kiln-train log: the loss of every step (grey), its running mean over
50 steps, the evaluated training and validation losses (dots) and, for the
reverse task, the held-out exact match (greedy and beam search) against a
0..100% axis on the right. kiln-train draws the same picture as MODEL.png.

  -o, --output FILE   the PNG to write
      --log           losses on a logarithmic axis
  -h, --help          show this help
)";

}  // namespace

int train_command(int argc, char** argv) {
    std::string csv, output;
    bool log_y = false;
    cli::Args args(argc, argv);
    while (!args.done()) {
        const std::string_view flag = args.next();
        if (flag == "-h" || flag == "--help") {
            fmt::print("{}", kHelp);
            return 0;
        }
        if (flag == "-o" || flag == "--output") output = args.value(flag);
        else if (flag == "--log") log_y = true;
        else if (!flag.empty() && flag[0] != '-' && csv.empty()) csv = flag;
        else cli::usage_error("unknown argument '{}'", printable(flag));
    }
    if (csv.empty()) cli::usage_error("a kiln-train CSV log is required (kiln-viz train MODEL.csv -o LOSS.png)");
    if (output.empty()) cli::usage_error("an output is required (-o LOSS.png)");
    check_output_path(output, "-o");
    open_regular_file(csv);
    const train::TrainLog log = train::TrainLog::read_any_csv(csv);
    plot::draw_loss_chart(output, log, log_y);
    return 0;
}

}  // namespace kiln::viz
