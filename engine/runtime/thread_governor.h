#pragma once
// How many of a pool's threads should run, from how much CPU the process is
// really getting. A pool splits every step into one equal share per thread
// and waits at a barrier between steps, so one thread that loses its core to
// another process (a browser, a build, a second kiln) holds every other
// thread at the next barrier until the scheduler gives the core back, a time
// slice of milliseconds later, hundreds of times per token: with one of two
// cores busy elsewhere, 2 threads decoded 6-7x slower than 1 (bench/
// oversubscription.sh). So the pool runs fewer threads while its threads
// wait for cores, and more again when the CPUs of its affinity mask sit idle.
//
// The evidence is the kernel's own: the time each thread spent runnable but
// waiting for a CPU (/proc/self/task/TID/schedstat, second field), and the
// idle time of the mask's CPUs (/proc/stat). Both are read at most every
// kSampleInterval, after a run, by the thread that called run(). Off Linux
// there is nothing to read and the count never changes.
//
// Only results that do not depend on the thread count may be computed by a
// governed pool (kiln's inference graph: its 1-, 2- and 3-thread logits are
// bit-identical, tests/test_llama.cpp). Training keeps a fixed count.
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace kiln {

// What one sampling interval saw.
struct CpuSample {
    double wall_seconds = 0;         // time since the last sample
    double runqueue_wait_seconds = 0;  // summed over the pool's threads: runnable, not running
    double idle_cpus = 0;            // the mask's CPUs' idle time / wall time (in CPUs)
};

// The thread count for the next interval, from `active` threads in the last
// one (1 <= result <= max_threads):
// - threads that waited for a CPU a quarter of a CPU's worth of time or more
//   give up that many threads (rounded, at least one);
// - otherwise, when three quarters of a CPU or more sat idle, take that many
//   more (rounded, at least one).
int next_thread_count(int active, int max_threads, const CpuSample& sample) noexcept;

// Parsers of what the governor reads (pure, for tests).
// "RUN_NS WAIT_NS SLICES" -> WAIT_NS.
std::optional<uint64_t> runqueue_wait_from_schedstat(std::string_view schedstat) noexcept;
// The idle + iowait ticks of the "cpuN" lines of /proc/stat for the given CPUs
// (the "cpu" total line is skipped); nothing when a CPU is missing.
std::optional<uint64_t> idle_ticks_from_proc_stat(std::string_view proc_stat, std::span<const int> cpus);

// The kernel's id of the calling thread (0 off Linux).
int current_thread_id() noexcept;

class ThreadGovernor {
public:
    static constexpr std::chrono::milliseconds kSampleInterval{100};

    // Governs a pool of `max_threads` threads.
    explicit ThreadGovernor(int max_threads);

    // Whether this system lets the governor see anything (Linux with
    // schedstat); when not, after_run() always returns `active`.
    bool can_observe() const noexcept { return observable_; }

    // Whether after_run() would take a sample now (at most once per
    // kSampleInterval), so the pool gathers the thread ids only then.
    bool sample_due() const noexcept { return observable_ && std::chrono::steady_clock::now() >= next_sample_; }

    // Called after a run with the thread count it used and the ids of the
    // pool's threads (the caller of run() first; 0 for a worker not yet
    // started); returns the count for the next run.
    int after_run(int active, std::span<const int> tids) noexcept;

private:
    struct Reading {
        std::chrono::steady_clock::time_point when;
        uint64_t wait_ns = 0;
        uint64_t idle_ticks = 0;
        int caller_tid = 0;  // counters of another caller's thread are not comparable
    };
    std::optional<Reading> read(std::span<const int> tids) const;

    int max_threads_;
    bool observable_ = false;
    std::vector<int> cpus_;
    double seconds_per_tick_ = 0.01;
    std::chrono::steady_clock::time_point next_sample_{};
    std::optional<Reading> last_;
};

}  // namespace kiln
