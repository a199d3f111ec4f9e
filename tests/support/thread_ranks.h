#pragma once
// The ranks of a distributed job as threads of one process, for tests that
// check the data-parallel trainer and the layer pipeline without mpirun (and
// under the sanitizers, TSan included). Sums add the ranks' values in rank
// order, so every rank gets the same bits, as MPI_Allreduce gives them.
#include <barrier>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "engine/core/error.h"
#include "engine/distributed/collective.h"

namespace kiln::test {

class ThreadRanks {
public:
    explicit ThreadRanks(int size) : size_(size), barrier_(size), slots_(static_cast<size_t>(size)) {}

    class Rank final : public Collective {
    public:
        Rank(ThreadRanks& job, int rank) : job_(job), rank_(rank) {}
        int rank() const noexcept override { return rank_; }
        int size() const noexcept override { return job_.size_; }
        void sum(std::span<float> v) override { job_.sum(rank_, v.data(), v.size()); }
        void sum(std::span<double> v) override { job_.sum(rank_, v.data(), v.size()); }
        // Started sums finish at once (the test checks their values, not the overlap).
        void start_sum(std::span<float> v) override { job_.sum(rank_, v.data(), v.size()); }
        bool progress_sums() override { return true; }
        void wait_sums() override {}
        void broadcast(std::span<std::byte> bytes, int root) override {
            job_.slots_[static_cast<size_t>(rank_)] = bytes.data();
            job_.barrier_.arrive_and_wait();
            if (rank_ != root) std::memcpy(bytes.data(), job_.slots_[static_cast<size_t>(root)], bytes.size());
            job_.barrier_.arrive_and_wait();
        }
        void gather_all(uint64_t value, std::span<uint64_t> out) override {
            job_.slots_[static_cast<size_t>(rank_)] = &value;
            job_.barrier_.arrive_and_wait();
            for (int r = 0; r < size(); ++r) out[static_cast<size_t>(r)] = *static_cast<const uint64_t*>(job_.slots_[static_cast<size_t>(r)]);
            job_.barrier_.arrive_and_wait();
        }
        void send(std::span<const std::byte> bytes, int to) override {
            std::lock_guard lock(job_.mail_mutex_);
            job_.mail_[{rank_, to}].emplace_back(bytes.begin(), bytes.end());
            job_.mail_ready_.notify_all();
        }
        void receive(std::span<std::byte> bytes, int from) override {
            std::unique_lock lock(job_.mail_mutex_);
            auto& box = job_.mail_[{from, rank_}];
            job_.mail_ready_.wait(lock, [&] { return !box.empty(); });
            if (box.front().size() != bytes.size())
                fail("test", "rank {} sent {} bytes, rank {} expected {}", from, box.front().size(), rank_, bytes.size());
            std::memcpy(bytes.data(), box.front().data(), bytes.size());
            box.pop_front();
        }

    private:
        ThreadRanks& job_;
        int rank_;
    };

    // Runs body(rank) on one thread per rank and waits for all.
    void run(const std::function<void(Rank&)>& body) {
        std::vector<std::thread> threads;
        for (int r = 0; r < size_; ++r)
            threads.emplace_back([this, r, &body] {
                Rank rank(*this, r);
                body(rank);
            });
        for (std::thread& t : threads) t.join();
    }

private:
    template <typename T>
    void sum(int rank, T* values, size_t n) {
        slots_[static_cast<size_t>(rank)] = values;
        barrier_.arrive_and_wait();
        std::vector<T> total(n, T(0));
        for (int r = 0; r < size_; ++r) {
            const T* v = static_cast<const T*>(slots_[static_cast<size_t>(r)]);
            for (size_t i = 0; i < n; ++i) total[i] += v[i];
        }
        barrier_.arrive_and_wait();  // every rank has read every other's values
        std::memcpy(values, total.data(), n * sizeof(T));
        barrier_.arrive_and_wait();
    }

    int size_;
    std::barrier<> barrier_;
    std::vector<const void*> slots_;
    std::mutex mail_mutex_;
    std::condition_variable mail_ready_;
    std::map<std::pair<int, int>, std::deque<std::vector<std::byte>>> mail_;
};

}  // namespace kiln::test
