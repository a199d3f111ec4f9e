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
constexpr int kMaxThreads = 1 << 16;
}  // namespace

ThreadPool::ThreadPool(int n_threads, LoadAdaptation adaptation)
    : n_threads_(std::clamp(n_threads, 1, kMaxThreads)),
      usable_cpus_(usable_cpus()),
      active_(n_threads_),
      tids_(std::make_unique<std::atomic<int>[]>(static_cast<size_t>(n_threads_))),
      wake_(std::make_unique<WakeWord[]>(static_cast<size_t>(n_threads_))) {
    if (adaptation == LoadAdaptation::follow_free_cpus && n_threads_ > 1) {
        governor_ = std::make_unique<ThreadGovernor>(n_threads_);
        if (!governor_->can_observe()) {
            governor_.reset();
        } else {
            // Threads beyond the usable CPUs can never all run at once: a
            // governed pool starts without them (and could only grow into them
            // if CPUs outside the mask sat idle, which it does not look at).
            active_ = std::min(n_threads_, usable_cpus_);
            tid_snapshot_.resize(static_cast<size_t>(n_threads_));
        }
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
    for (size_t i = 1; i <= workers_.size(); ++i) {
        wake_[i].word.fetch_add(1, std::memory_order_release);
        wake_[i].word.notify_one();
    }
    for (std::thread& t : workers_) t.join();
    workers_.clear();
}

template <typename Word>
void ThreadPool::wait_until_changed(std::atomic<Word>& word, Word seen, bool spin) noexcept {
    // A run with more threads than usable CPUs never spins (see the header);
    // a governed pool that came down to the CPUs it gets spins again.
    spin = spin && run_threads_.load(std::memory_order_relaxed) <= usable_cpus_;
    for (int i = 0; spin && i < kSpinIterations; ++i) {
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
    std::atomic<uint32_t>& wake = wake_[static_cast<size_t>(ith)].word;
    uint32_t seen = 0;
    for (;;) {
        wait_until_changed(wake, seen, true);
        seen = wake.load(std::memory_order_acquire);
        if (stop_.load(std::memory_order_relaxed)) return;
        // Written before the wake word; and no later run can start before
        // this worker finishes this one, so it is this run's count.
        const int nth = run_threads_.load(std::memory_order_relaxed);
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
    const uint32_t done_before = done_generation_.load(std::memory_order_relaxed);
    // Only the threads of this run are woken, each on a word of its own that
    // counts its runs: one left out sleeps through the run and takes no CPU
    // from those that work (waking every worker and letting the idle ones go
    // back to sleep cost a governed pool a fifth of its speed). 32-bit words,
    // because the C++ library waits on those with a futex of their own, and
    // on wider ones through a shared table that wakes every sleeper.
    for (int i = 1; i < nth; ++i) {
        wake_[static_cast<size_t>(i)].word.fetch_add(1, std::memory_order_release);
        wake_[static_cast<size_t>(i)].word.notify_one();
    }

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
    for (size_t i = 0; i < tid_snapshot_.size(); ++i) tid_snapshot_[i] = tids_[i].load(std::memory_order_relaxed);
    active_ = governor_->after_run(active_, tid_snapshot_);
}

void ThreadPool::barrier() noexcept {
    const int nth = run_threads_.load(std::memory_order_relaxed);
    if (nth == 1) return;
    const uint32_t phase = barrier_phase_.load(std::memory_order_acquire);
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
