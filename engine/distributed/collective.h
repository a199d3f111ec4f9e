#pragma once
// What the engine asks of the other processes of a job, whatever carries it
// (Open MPI in the tools: tools/common/mpi_world.h): the ranks, sums across
// them, one rank's bytes to all, and bytes from one rank to another. The
// engine sees only this interface, so kiln-lib (and the C API's libkiln.so)
// never links MPI; a single process passes nullptr or a SingleProcess.
//
// Every rank must make the same collective calls in the same order; a call
// one rank makes alone waits for ever (the tools end the job on any error
// one rank meets alone: mpi_world.h).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>

#include "engine/core/error.h"

namespace kiln {

// An error every rank of a distributed job raises at the same point with the
// same message (found by comparing what the ranks hold, or after a sum that
// gives every rank the same values): the tools print it once, from rank 0, and
// end every rank normally instead of aborting the job.
class CollectiveError : public Error {
public:
    using Error::Error;
};

class Collective {
public:
    virtual ~Collective() = default;
    virtual int rank() const noexcept = 0;
    virtual int size() const noexcept = 0;
    bool leader() const noexcept { return rank() == 0; }

    // Element-wise sums over the ranks, in place; every rank gets the same bits.
    virtual void sum(std::span<float> values) = 0;
    virtual void sum(std::span<double> values) = 0;
    // Sums started now and finished by wait_sums(): the caller goes on
    // computing (e.g. the rest of the backward pass) while they travel.
    // `values` must stay alive and untouched until wait_sums() returns.
    virtual void start_sum(std::span<float> values) = 0;
    // Lets started sums progress without waiting (MPI moves a non-blocking
    // collective only inside MPI calls). Returns whether all have finished.
    virtual bool progress_sums() = 0;
    virtual void wait_sums() = 0;

    // Root's bytes into every rank's `bytes`.
    virtual void broadcast(std::span<std::byte> bytes, int root) = 0;
    // Every rank's value, in rank order, into `out` (size() of them).
    virtual void gather_all(uint64_t value, std::span<uint64_t> out) = 0;
    virtual void send(std::span<const std::byte> bytes, int to) = 0;
    virtual void receive(std::span<std::byte> bytes, int from) = 0;

    // Throws kiln::CollectiveError on every rank, the same message, when the
    // ranks' hashes of `what` differ (a different model file or text on one
    // machine: a silently wrong run otherwise).
    void require_same(std::string_view what, uint64_t hash);
};

// One process: nothing to exchange.
class SingleProcess final : public Collective {
public:
    int rank() const noexcept override { return 0; }
    int size() const noexcept override { return 1; }
    void sum(std::span<float>) override {}
    void sum(std::span<double>) override {}
    void start_sum(std::span<float>) override {}
    bool progress_sums() override { return true; }
    void wait_sums() override {}
    void broadcast(std::span<std::byte>, int) override {}
    void gather_all(uint64_t value, std::span<uint64_t> out) override { out[0] = value; }
    void send(std::span<const std::byte>, int) override;
    void receive(std::span<std::byte>, int) override;
};

// Rank r's contiguous share [begin, end) of `count` items split as evenly as
// possible (the first count % size ranks take one more).
struct Share {
    int64_t begin = 0, end = 0;
    int64_t size() const noexcept { return end - begin; }
};
Share share_of(int64_t count, int rank, int size) noexcept;

// A 64-bit hash of bytes, for telling files apart (not cryptographic): four
// independent multiply-mix lanes over 8-byte words, several GB/s.
uint64_t content_hash(std::span<const std::byte> bytes, uint64_t seed = 0) noexcept;
// The same over a file's bytes, read in pieces with read(2) rather than
// through a mapping: a rank of a layer split hashes the whole model file
// without making it part of its resident memory. kiln::Error when unreadable.
uint64_t file_content_hash(const std::filesystem::path& path);

}  // namespace kiln
