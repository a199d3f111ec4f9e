#pragma once
// A persistent pool of worker threads. run(fn) calls fn(ith, nth) once on each
// of the nth threads (the caller is thread 0) and returns when all are done.
// Inside fn, barrier() waits until all nth threads reach it: the executor runs
// a whole graph in one run() with a barrier between nodes.
//
// Waiting is a spin (a decode step has hundreds of barriers and a spinning
// barrier costs well under a microsecond) that falls back to sleeping on a
// futex (std::atomic::wait) when nothing arrives for a while: between runs
// the workers sleep and cost nothing. A pool with more threads than the
// process may use at once (usable_cpus()) does not spin at all: a spinning
// thread would hold the very core that the thread it waits for needs. Spinning
// threads also give the core up after a few microseconds, for when another
// process takes the cores.
//
// A pool made with LoadAdaptation::follow_free_cpus runs only as many of its
// threads as the process gets CPUs for (thread_governor.h): fn is then called
// with a smaller nth, and the threads beyond it sleep through the run. Only
// work whose result does not depend on nth may run on such a pool.
#include <algorithm>
#include <atomic>
#include <exception>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "engine/runtime/cpu_budget.h"
#include "engine/runtime/thread_governor.h"

namespace kiln {

enum class LoadAdaptation {
    fixed,             // every run uses all threads (training, benchmarks)
    follow_free_cpus,  // runs use as many threads as the process gets CPUs for
};

class ThreadPool {
public:
    // n_threads >= 1; n_threads - 1 workers are started. When the system
    // refuses a thread, the ones started are stopped and kiln::Error
    // ("threads") says how many were asked, how many started, and why.
    explicit ThreadPool(int n_threads, LoadAdaptation adaptation = LoadAdaptation::fixed);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const noexcept { return n_threads_; }

    // The nth the next run() will use (size() unless the pool follows free
    // CPUs). Changes only inside run(), after its work is done.
    int active() const noexcept { return active_; }

    // Runs use `n` threads (clamped to 1..size()) until the governor, if any,
    // decides otherwise: for tests, and for callers that know better.
    void set_active(int n) noexcept { active_ = std::clamp(n, 1, n_threads_); }

    // Runs fn(ith, nth) on every thread and waits for all. Not reentrant. If fn
    // throws on any thread, the first exception is rethrown here after all
    // threads have finished (fn must not throw between barriers it shares).
    void run(const std::function<void(int ith, int nth)>& fn);

    // Blocks until every thread of the current run() has called barrier() as
    // many times as this one. Memory written before the barrier is visible after it.
    void barrier() noexcept;

    // Whether the threads of the next run spin before they sleep (see above).
    bool spins() const noexcept { return active_ <= usable_cpus_; }

    // The default thread count (cpu_budget.h): physical cores among the CPUs
    // the process may use, capped by its cgroup quota. Kept under this name
    // for the callers that ask the pool.
    static int physical_cores() noexcept { return default_thread_count(); }

private:
    void worker(int ith);
    template <typename Word>
    void wait_until_changed(std::atomic<Word>& word, Word seen, bool spin) noexcept;
    void stop_workers() noexcept;
    void govern() noexcept;  // lets the governor, if any, set active_ after a run

    int n_threads_;
    int usable_cpus_;                             // usable_cpus() when the pool was made
    int active_;                                  // the caller's: threads of the next run
    std::atomic<int> run_threads_{1};             // threads of the current run (published with the wake words)
    std::unique_ptr<ThreadGovernor> governor_;    // follow_free_cpus only
    std::unique_ptr<std::atomic<int>[]> tids_;    // kernel thread ids, the caller's first (0: not started)
    std::vector<int> tid_snapshot_;               // tids_ as the governor reads them (governed pools only)
    std::vector<std::thread> workers_;
    const std::function<void(int, int)>* task_ = nullptr;

    struct alignas(64) WakeWord {
        std::atomic<uint32_t> word{0};  // how many runs the worker was woken for
    };
    std::unique_ptr<WakeWord[]> wake_;                   // one per thread (index 0, the caller's, unused)
    alignas(64) std::atomic<int> finished_{0};           // workers done with the current run
    alignas(64) std::atomic<uint32_t> done_generation_{0};  // bumped when the last worker finishes
    alignas(64) std::atomic<int> barrier_count_{0};
    alignas(64) std::atomic<uint32_t> barrier_phase_{0};
    std::atomic<bool> stop_{false};
    std::exception_ptr error_;
    std::atomic<bool> has_error_{false};
};

// Splits [0, n) into nth near-equal contiguous chunks; returns chunk ith as [begin, end).
inline std::pair<int64_t, int64_t> split_range(int64_t n, int ith, int nth) noexcept {
    const int64_t base = n / nth, extra = n % nth;
    const int64_t begin = ith * base + std::min<int64_t>(ith, extra);
    return {begin, begin + base + (ith < extra ? 1 : 0)};
}

}  // namespace kiln
