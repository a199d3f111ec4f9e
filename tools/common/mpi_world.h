#pragma once
// The job a tool runs in: Open MPI's world when mpirun started this process
// (and kiln was built with KILN_MPI), else a world of one. Tools that split
// their work across ranks (kiln-train, kiln-perplexity, kiln) run their body
// through run_on_ranks(), which also decides how a failure ends the job:
//
//   - a usage error (the same argv on every rank): rank 0 prints it, every
//     rank exits 2;
//   - a kiln::CollectiveError (every rank found the same thing): rank 0
//     prints it, every rank exits 1;
//   - any other error, met by one rank alone: that rank prints
//     "<tool>: rank R of N: <message>" and aborts the whole job (MPI_Abort),
//     since the others would otherwise wait for it for ever.
//
// A rank killed from outside ends the job too: mpirun kills the others and
// says which rank died (docs/distributed.md).
#include <functional>
#include <memory>
#include <string_view>

#include "engine/distributed/collective.h"

namespace kiln::mpi {

// Whether this build can join an MPI job (KILN_MPI).
bool built_with_mpi() noexcept;

class World final : public Collective {
public:
    // Joins the job when launched by mpirun; throws cli::UsageError when
    // launched as one of several ranks by a build without MPI.
    explicit World(std::string_view tool);
    ~World() override;
    World(const World&) = delete;
    World& operator=(const World&) = delete;

    int rank() const noexcept override { return rank_; }
    int size() const noexcept override { return size_; }
    void sum(std::span<float> values) override;
    void sum(std::span<double> values) override;
    void start_sum(std::span<float> values) override;
    bool progress_sums() override;
    void wait_sums() override;
    void broadcast(std::span<std::byte> bytes, int root) override;
    void gather_all(uint64_t value, std::span<uint64_t> out) override;
    void send(std::span<const std::byte> bytes, int to) override;
    void receive(std::span<std::byte> bytes, int from) override;

    // Ends every rank of the job now with `code` (MPI_Abort); a world of one exits.
    [[noreturn]] void abort(int code);

private:
    struct Pending;
    int rank_ = 0, size_ = 1;
    bool joined_ = false;  // MPI_Init ran: MPI_Finalize at the end
    std::unique_ptr<Pending> pending_;
};

// Runs body(world) as the comment at the top says; returns the exit status.
int run_on_ranks(std::string_view tool, const std::function<int(World&)>& body);

}  // namespace kiln::mpi
