// tools/common/mpi_world.cpp compiled without MPI, as a build without Open
// MPI has it (tests/test_mpi_launch.cpp runs it as if mpirun had started it).
#include <fmt/format.h>

#include "tools/common/mpi_world.h"

int main() {
    return kiln::mpi::run_on_ranks("kiln-no-mpi-probe", [](kiln::mpi::World& world) {
        fmt::print("ran on rank {} of {}\n", world.rank(), world.size());
        return 0;
    });
}
