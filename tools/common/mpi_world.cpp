#include "tools/common/mpi_world.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <vector>

#include "engine/core/error.h"
#include "tools/common/cli.h"

#if KILN_HAVE_MPI
#include <mpi.h>
#endif

namespace kiln::mpi {

#if KILN_HAVE_MPI

namespace {

// MPI counts are ints: large buffers go in pieces of at most this many elements.
constexpr size_t kMaxCount = size_t{1} << 30;

void check(int code, const char* call) {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    fail("mpi", "{} failed: {}", call, std::string_view(text, static_cast<size_t>(length)));
}

template <typename T>
void sum_in_pieces(std::span<T> values, MPI_Datatype type) {
    for (size_t at = 0; at < values.size(); at += kMaxCount) {
        const size_t n = std::min(kMaxCount, values.size() - at);
        check(MPI_Allreduce(MPI_IN_PLACE, values.data() + at, static_cast<int>(n), type, MPI_SUM, MPI_COMM_WORLD),
              "MPI_Allreduce");
    }
}

void finalize_once() {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Finalize();
}

}  // namespace

struct World::Pending {
    std::vector<MPI_Request> requests;
};

bool built_with_mpi() noexcept { return true; }

World::World(std::string_view tool) : pending_(std::make_unique<Pending>()) {
    // Only a process that mpirun started joins a job: MPI_Init in a process
    // run alone (a singleton) is slow and may look for a network for nothing.
    if (cli::launched_rank().size <= 1) return;
    int provided = 0;
    // The thread pool's caller (thread 0) is the main thread, the one that
    // makes every MPI call, even from inside a graph run.
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    joined_ = true;
    // A rank that leaves through exit() (--help, --version) still finalizes,
    // so that mpirun does not report it as a rank that died.
    std::atexit(finalize_once);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // Errors come back as codes (check() turns them into kiln::Error) rather
    // than ending the job behind the tool's back.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    (void)tool;
}

World::~World() {
    if (joined_) finalize_once();
}

void World::sum(std::span<float> values) {
    if (size_ > 1) sum_in_pieces(values, MPI_FLOAT);
}

void World::sum(std::span<double> values) {
    if (size_ > 1) sum_in_pieces(values, MPI_DOUBLE);
}

void World::start_sum(std::span<float> values) {
    if (size_ <= 1) return;
    for (size_t at = 0; at < values.size(); at += kMaxCount) {
        const size_t n = std::min(kMaxCount, values.size() - at);
        MPI_Request request;
        check(MPI_Iallreduce(MPI_IN_PLACE, values.data() + at, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                             &request),
              "MPI_Iallreduce");
        pending_->requests.push_back(request);
    }
}

bool World::progress_sums() {
    if (pending_->requests.empty()) return true;
    int done = 0;
    check(MPI_Testall(static_cast<int>(pending_->requests.size()), pending_->requests.data(), &done,
                      MPI_STATUSES_IGNORE),
          "MPI_Testall");
    if (done) pending_->requests.clear();
    return done != 0;
}

void World::wait_sums() {
    if (pending_->requests.empty()) return;
    check(MPI_Waitall(static_cast<int>(pending_->requests.size()), pending_->requests.data(), MPI_STATUSES_IGNORE),
          "MPI_Waitall");
    pending_->requests.clear();
}

void World::broadcast(std::span<std::byte> bytes, int root) {
    if (size_ <= 1) return;
    for (size_t at = 0; at < bytes.size(); at += kMaxCount)
        check(MPI_Bcast(bytes.data() + at, static_cast<int>(std::min(kMaxCount, bytes.size() - at)), MPI_BYTE, root,
                        MPI_COMM_WORLD),
              "MPI_Bcast");
}

void World::gather_all(uint64_t value, std::span<uint64_t> out) {
    if (size_ <= 1) {
        out[0] = value;
        return;
    }
    check(MPI_Allgather(&value, 1, MPI_UINT64_T, out.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD), "MPI_Allgather");
}

void World::send(std::span<const std::byte> bytes, int to) {
    for (size_t at = 0; at < bytes.size(); at += kMaxCount)
        check(MPI_Send(bytes.data() + at, static_cast<int>(std::min(kMaxCount, bytes.size() - at)), MPI_BYTE, to, 0,
                       MPI_COMM_WORLD),
              "MPI_Send");
}

void World::receive(std::span<std::byte> bytes, int from) {
    for (size_t at = 0; at < bytes.size(); at += kMaxCount)
        check(MPI_Recv(bytes.data() + at, static_cast<int>(std::min(kMaxCount, bytes.size() - at)), MPI_BYTE, from, 0,
                       MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              "MPI_Recv");
}

void World::abort(int code) {
    if (joined_) MPI_Abort(MPI_COMM_WORLD, code);
    std::exit(code);
}

#else  // built without MPI: a world of one

struct World::Pending {};

bool built_with_mpi() noexcept { return false; }

World::World(std::string_view tool) {
    if (const cli::LaunchedRank launched = cli::launched_rank(); launched.size > 1)
        throw cli::UsageError(fmt::format("launched as one of {} ranks (mpirun), but this {} was built without MPI "
                                          "(install libopenmpi-dev and rebuild: CMake option KILN_MPI)",
                                          launched.size, tool));
}
World::~World() = default;
void World::sum(std::span<float>) {}
void World::sum(std::span<double>) {}
void World::start_sum(std::span<float>) {}
bool World::progress_sums() { return true; }
void World::wait_sums() {}
void World::broadcast(std::span<std::byte>, int) {}
void World::gather_all(uint64_t value, std::span<uint64_t> out) { out[0] = value; }
void World::send(std::span<const std::byte>, int to) { fail("mpi", "a single process has no rank {}", to); }
void World::receive(std::span<std::byte>, int from) { fail("mpi", "a single process has no rank {}", from); }
void World::abort(int code) { std::exit(code); }

#endif

int run_on_ranks(std::string_view tool, const std::function<int(World&)>& body) {
    std::unique_ptr<World> world;
    try {
        world = std::make_unique<World>(tool);
    } catch (const cli::UsageError& e) {
        // Launched by mpirun into a build without MPI: every rank finds it.
        if (cli::launched_rank().rank == 0) fmt::print(stderr, "{}: {}\n", tool, e.what());
        return 2;
    } catch (const std::exception& e) {
        fmt::print(stderr, "{}: {}\n", tool, e.what());
        return 1;
    }
    const int rank = world->rank(), size = world->size();
    // An error this rank met alone: say which rank, and end the job when there are others.
    const auto alone = [&](std::string_view message, int code) {
        if (size > 1) {
            fmt::print(stderr, "{}: rank {} of {}: {}\n", tool, rank, size, message);
            std::fflush(stderr);
            world->abort(code);
        }
        fmt::print(stderr, "{}: {}\n", tool, message);
        return code;
    };
    try {
        return body(*world);
    } catch (const cli::UsageError& e) {
        if (rank == 0) fmt::print(stderr, "{}: {} (try --help)\n", tool, e.what());
        return 2;
    } catch (const CollectiveError& e) {
        if (rank == 0) fmt::print(stderr, "{}: {}\n", tool, e.what());
        return 1;
    } catch (const Error& e) {
        return alone(e.what(), 1);
    } catch (const std::bad_alloc&) {
        return alone("out of memory", 1);
    } catch (const std::exception& e) {
        return alone(fmt::format("unexpected error: {}", e.what()), 1);
    }
}

}  // namespace kiln::mpi
