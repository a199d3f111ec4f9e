// A process that finds itself one of several ranks (mpirun's environment)
// but cannot be one says so once and exits 2, never running N copies of one
// job: a build without MPI, and the tools that run on one process.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "support/run_command.h"
#include "support/paths.h"
#include "support/run_tool.h"

using namespace kiln;

namespace {

// What mpirun (Open MPI) sets for rank `rank` of `size`.
std::string launched(int rank, int size) {
    return fmt::format("env OMPI_COMM_WORLD_RANK={} OMPI_COMM_WORLD_SIZE={}", rank, size);
}

}  // namespace

TEST_CASE("a build without MPI launched as one of several ranks refuses in one line from rank 0", "[mpi]") {
    const std::string probe = test::program_command(KILN_NO_MPI_PROBE);  // behind qemu in a cross build
    const test::ToolRun alone = test::run_command(probe);
    CHECK(alone.status == 0);
    CHECK(alone.out == "ran on rank 0 of 1\n");
    const test::ToolRun first = test::run_command(launched(0, 2) + " " + probe);
    CHECK(first.status == 2);
    CHECK(first.out.empty());
    CHECK(first.err ==
          "kiln-no-mpi-probe: launched as one of 2 ranks (mpirun), but this kiln-no-mpi-probe was built without MPI "
          "(install libopenmpi-dev and rebuild: CMake option KILN_MPI)\n");
    const test::ToolRun second = test::run_command(launched(1, 2) + " " + probe);
    CHECK(second.status == 2);
    CHECK(second.out.empty());
    CHECK(second.err.empty());  // rank 0 says it for the job
    // One rank alone is a process alone.
    CHECK(test::run_command(launched(0, 1) + " " + probe).status == 0);
}

TEST_CASE("tools that run on one process refuse to be one of several ranks", "[mpi]") {
    const std::string model = test::shell_quote((test::shared_models_dir() / "stories260K.gguf").string());
    for (const char* tool : {"kiln-tokenize", "kiln-convert", "kiln-bench", "kiln-server"}) {
        const test::ToolRun run = test::run_tool(tool, "--help", launched(0, 3));
        INFO(tool << ": " << run.err);
        CHECK(run.status == 2);
        CHECK(run.out.empty());
        CHECK(run.err.find("launched as one of 3 ranks (mpirun), but") != std::string::npos);
        CHECK(run.err.find("runs on one process") != std::string::npos);
        CHECK(test::run_tool(tool, "--help", launched(2, 3)).err.empty());
    }
    // The tokenizer alone, to be sure the environment is all that differs.
    CHECK(test::run_tool("kiln-tokenize", "-m " + model + " -p hello").status == 0);
}
