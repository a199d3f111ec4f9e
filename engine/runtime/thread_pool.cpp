#include "engine/runtime/thread_pool.h"

#include <string>
#include <system_error>

#include "engine/core/error.h"
#include "engine/runtime/cpu_budget.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KILN_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
// The spin-wait hint of ARM (what _mm_pause is to x86); a system call per spin would cost microseconds.
#define KILN_CPU_RELAX() __asm__ __volatile__("yield" ::: "memory")
#else
#define KILN_CPU_RELAX() std::this_thread::yield()
#endif

namespace kiln {

namespace {
// A few microseconds of pause instructions (a pause is 10-140 cycles depending
// on the CPU): enough for a barrier between nodes on an idle machine.
constexpr int kSpinIterations = 1 << 9;
// Then yield the core a few times: when there are more runnable threads than
// cores, the thread we wait for may need exactly this core to make progress.
// Few: a yield that finds nobody else to run returns at once, so a long run
// of them is a spin that the scheduler cannot tell from work.
constexpr int kYieldIterations = 8;
// generation_ holds a run counter above a run's thread count.
constexpr int kThreadCountBits = 16;
constexpr uint64_t kThreadCountMask = (uint64_t{1} << kThreadCountBits) - 1;
constexpr int kMaxThreads = static_cast<int>(kThreadCountMask);
}  // namespace

ThreadPool::ThreadPool(int n_threads, LoadAdaptation adaptation)
    : n_threads_(std::clamp(n_threads, 1, kMaxThreads)),
      spin_(n_threads_ <= usable_cpus()),
      active_(n_threads_),
      tids_(std::make_unique<std::atomic<int>[]>(static_cast<size_t>(n_threads_))) {
    if (adaptation == LoadAdaptation::follow_free_cpus && n_threads_ > 1) {
        governor_ = std::make_unique<ThreadGovernor>(n_threads_);
        if (!governor_->can_observe()) governor_.reset();
    }
    workers_.reserve(static_cast<size_t>(n_threads_ - 1));
    std::string reason;
    try {
        for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
        return;
    } catch (const std::system_error& e) {
        reason = e.code().message();
    } catch (const std::exception& e) {
        reason = e.what();
    }
    // A thread left joinable would terminate the process when workers_ is destroyed.
    const size_t started = workers_.size() + 1;
    stop_workers();
    fail("threads", "cannot start {} threads: {} started, then the system refused another ({}); use fewer threads",
         n_threads_, started, reason);
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() noexcept {
    stop_.store(true, std::memory_order_relaxed);
    generation_.fetch_add(uint64_t{1} << kThreadCountBits, std::memory_order_release);
    generation_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
}

void ThreadPool::wait_until_changed(std::atomic<uint64_t>& word, uint64_t seen, bool spin) noexcept {
    for (int i = 0; spin && spin_ && i < kSpinIterations; ++i) {
        if (word.load(std::memory_order_acquire) != seen) return;
        KILN_CPU_RELAX();
    }
    for (int i = 0; i < kYieldIterations; ++i) {
        if (word.load(std::memory_order_acquire) != seen) return;
        std::this_thread::yield();
    }
    while (word.load(std::memory_order_acquire) == seen) word.wait(seen, std::memory_order_acquire);
}

void ThreadPool::worker(int ith) {
    tids_[static_cast<size_t>(ith)].store(current_thread_id(), std::memory_order_relaxed);
    uint64_t seen = 0;
    bool took_part = true;  // a worker that sat the last run out sleeps at once: it is likely to again
    for (;;) {
        wait_until_changed(generation_, seen, took_part);
        seen = generation_.load(std::memory_order_acquire);
        if (stop_.load(std::memory_order_relaxed)) return;
        // The run's thread count travels in the same word as its generation:
        // a worker that sat one run out and wakes late reads the next run's
        // count with the next run, never one with the other.
        const int nth = static_cast<int>(seen & kThreadCountMask);
        took_part = ith < nth;
        if (!took_part) continue;
        try {
            (*task_)(ith, nth);
        } catch (...) {
            if (!has_error_.exchange(true)) error_ = std::current_exception();
        }
        // The last worker to finish wakes the caller if it went to sleep.
        if (finished_.fetch_add(1, std::memory_order_acq_rel) + 1 == nth - 1) {
            done_generation_.fetch_add(1, std::memory_order_release);
            done_generation_.notify_one();
        }
    }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
    const int nth = active_;
    run_threads_.store(nth, std::memory_order_relaxed);  // for barrier()
    if (nth == 1) {
        // The workers are not woken at all.
        fn(0, 1);
        govern();
        return;
    }
    task_ = &fn;
    finished_.store(0, std::memory_order_relaxed);
    has_error_.store(false, std::memory_order_relaxed);
    error_ = nullptr;
    const uint64_t done_before = done_generation_.load(std::memory_order_relaxed);
    const uint64_t counter = (generation_.load(std::memory_order_relaxed) >> kThreadCountBits) + 1;
    generation_.store(counter << kThreadCountBits | static_cast<uint64_t>(nth), std::memory_order_release);
    generation_.notify_all();

    std::exception_ptr own_error;
    try {
        fn(0, nth);
    } catch (...) {
        own_error = std::current_exception();
    }
    wait_until_changed(done_generation_, done_before, true);
    task_ = nullptr;
    govern();
    if (own_error) std::rethrow_exception(own_error);
    if (has_error_.load(std::memory_order_acquire)) std::rethrow_exception(error_);
}

void ThreadPool::govern() noexcept {
    if (!governor_ || !governor_->sample_due()) return;
    tids_[0].store(current_thread_id(), std::memory_order_relaxed);  // whoever calls run()
    int tids[256];
    const int n = std::min(n_threads_, 256);
    for (int i = 0; i < n; ++i) tids[i] = tids_[static_cast<size_t>(i)].load(std::memory_order_relaxed);
    active_ = governor_->after_run(active_, std::span<const int>(tids, static_cast<size_t>(n)));
}

void ThreadPool::barrier() noexcept {
    const int nth = run_threads_.load(std::memory_order_relaxed);
    if (nth == 1) return;
    const uint64_t phase = barrier_phase_.load(std::memory_order_acquire);
    if (barrier_count_.fetch_add(1, std::memory_order_acq_rel) + 1 == nth) {
        // Reset before releasing the others: they can only arrive again after seeing the new phase.
        barrier_count_.store(0, std::memory_order_relaxed);
        barrier_phase_.fetch_add(1, std::memory_order_release);
        barrier_phase_.notify_all();
    } else {
        wait_until_changed(barrier_phase_, phase, true);
    }
}

}  // namespace kiln
