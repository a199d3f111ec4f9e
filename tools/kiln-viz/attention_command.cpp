#include "tools/common/cli.h"
#include "tools/kiln-viz/commands.h"

namespace kiln::viz {

int attention_command(int, char**) { cli::usage_error("not yet"); }

}  // namespace kiln::viz
