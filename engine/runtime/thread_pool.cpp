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
}  // namespace

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(n_threads < 1 ? 1 : n_threads), spin_(n_threads_ <= usable_cpus()) {
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
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
}

void ThreadPool::wait_until_changed(std::atomic<uint64_t>& word, uint64_t seen) noexcept {
    for (int i = 0; spin_ && i < kSpinIterations; ++i) {
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
    uint64_t seen = 0;
    for (;;) {
        wait_until_changed(generation_, seen);
        seen = generation_.load(std::memory_order_acquire);
        if (stop_.load(std::memory_order_relaxed)) return;
        try {
            (*task_)(ith, n_threads_);
        } catch (...) {
            if (!has_error_.exchange(true)) error_ = std::current_exception();
        }
        // The last worker to finish wakes the caller if it went to sleep.
        if (finished_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_threads_ - 1) {
            done_generation_.fetch_add(1, std::memory_order_release);
            done_generation_.notify_one();
        }
    }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
    if (n_threads_ == 1) {
        fn(0, 1);
        return;
    }
    task_ = &fn;
    finished_.store(0, std::memory_order_relaxed);
    has_error_.store(false, std::memory_order_relaxed);
    error_ = nullptr;
    const uint64_t done_before = done_generation_.load(std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();

    std::exception_ptr own_error;
    try {
        fn(0, n_threads_);
    } catch (...) {
        own_error = std::current_exception();
    }
    wait_until_changed(done_generation_, done_before);
    task_ = nullptr;
    if (own_error) std::rethrow_exception(own_error);
    if (has_error_.load(std::memory_order_acquire)) std::rethrow_exception(error_);
}

void ThreadPool::barrier() noexcept {
    if (n_threads_ == 1) return;
    const uint64_t phase = barrier_phase_.load(std::memory_order_acquire);
    if (barrier_count_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_threads_) {
        // Reset before releasing the others: they can only arrive again after seeing the new phase.
        barrier_count_.store(0, std::memory_order_relaxed);
        barrier_phase_.fetch_add(1, std::memory_order_release);
        barrier_phase_.notify_all();
    } else {
        wait_until_changed(barrier_phase_, phase);
    }
}

}  // namespace kiln
