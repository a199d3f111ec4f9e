#include "engine/runtime/thread_governor.h"

#include "engine/core/platform.h"
#include "engine/runtime/cpu_budget.h"

#if KILN_OS_LINUX
#include <fcntl.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cmath>
#include <string>

namespace kiln {

namespace {

// A quarter of a CPU lost to waiting (or three quarters idle) is well above
// what a quiet machine shows (kiln-server's HTTP threads, timer interrupts)
// and well below one other busy process.
constexpr double kLostCpusToShrink = 0.25;
constexpr double kIdleCpusToGrow = 0.75;

std::optional<uint64_t> parse_u64(std::string_view& text) noexcept {
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end == text.data()) return std::nullopt;
    text.remove_prefix(static_cast<size_t>(end - text.data()));
    return value;
}

#if KILN_OS_LINUX
// The whole of a small /proc file (a few KiB even with hundreds of CPUs),
// read with plain system calls: no allocation per read besides `out`.
bool read_small_file(const char* path, std::string& out) noexcept {
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    out.clear();
    char buffer[4096];
    for (;;) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0) {
            ::close(fd);
            return false;
        }
        if (n == 0) break;
        try {
            out.append(buffer, static_cast<size_t>(n));
        } catch (...) {
            ::close(fd);
            return false;
        }
    }
    ::close(fd);
    return true;
}
#endif

}  // namespace

int current_thread_id() noexcept {
#if KILN_OS_LINUX
    return static_cast<int>(::gettid());
#else
    return 0;
#endif
}

int next_thread_count(int active, int max_threads, const CpuSample& sample) noexcept {
    active = std::clamp(active, 1, std::max(1, max_threads));
    if (!(sample.wall_seconds > 0)) return active;
    const double lost = sample.runqueue_wait_seconds / sample.wall_seconds;
    if (active > 1 && lost >= kLostCpusToShrink)
        return std::max(1, active - std::max(1, static_cast<int>(std::lround(lost))));
    if (active < max_threads && sample.idle_cpus >= kIdleCpusToGrow)
        return std::min(max_threads, active + std::max(1, static_cast<int>(std::lround(sample.idle_cpus))));
    return active;
}

std::optional<uint64_t> runqueue_wait_from_schedstat(std::string_view schedstat) noexcept {
    if (!parse_u64(schedstat)) return std::nullopt;  // time on a CPU
    return parse_u64(schedstat);                     // time waiting for one
}

std::optional<uint64_t> idle_ticks_from_proc_stat(std::string_view proc_stat, std::span<const int> cpus) {
    std::vector<bool> seen(cpus.size(), false);
    uint64_t total = 0;
    while (!proc_stat.empty()) {
        const size_t eol = std::min(proc_stat.find('\n'), proc_stat.size());
        std::string_view line = proc_stat.substr(0, eol);
        proc_stat.remove_prefix(std::min(eol + 1, proc_stat.size()));
        if (!line.starts_with("cpu") || line.size() < 4 || line[3] < '0' || line[3] > '9') continue;
        line.remove_prefix(3);
        const auto cpu = parse_u64(line);
        if (!cpu) continue;
        const auto it = std::find(cpus.begin(), cpus.end(), static_cast<int>(*cpu));
        if (it == cpus.end()) continue;
        // user nice system idle iowait ...
        uint64_t fields[5] = {};
        for (uint64_t& f : fields) {
            const auto v = parse_u64(line);
            if (!v) return std::nullopt;
            f = *v;
        }
        total += fields[3] + fields[4];
        seen[static_cast<size_t>(it - cpus.begin())] = true;
    }
    if (std::find(seen.begin(), seen.end(), false) != seen.end()) return std::nullopt;
    return total;
}

ThreadGovernor::ThreadGovernor(int max_threads) : max_threads_(std::max(1, max_threads)) {
#if KILN_OS_LINUX
    try {
        cpus_ = affinity_cpu_ids();
    } catch (...) {
        cpus_.clear();
    }
    const long ticks = ::sysconf(_SC_CLK_TCK);
    if (ticks > 0) seconds_per_tick_ = 1.0 / static_cast<double>(ticks);
    std::string text;
    observable_ = max_threads_ > 1 && !cpus_.empty() && read_small_file("/proc/thread-self/schedstat", text) &&
                  runqueue_wait_from_schedstat(text).has_value() && read_small_file("/proc/stat", text) &&
                  idle_ticks_from_proc_stat(text, cpus_).has_value();
#endif
}

std::optional<ThreadGovernor::Reading> ThreadGovernor::read(std::span<const int> tids) const {
#if KILN_OS_LINUX
    Reading r;
    r.when = std::chrono::steady_clock::now();
    r.caller_tid = tids.empty() ? 0 : tids[0];
    std::string text;
    char path[64];
    for (const int tid : tids) {
        if (tid <= 0) return std::nullopt;  // a worker still starting
        std::snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", tid);
        if (!read_small_file(path, text)) return std::nullopt;
        const auto wait = runqueue_wait_from_schedstat(text);
        if (!wait) return std::nullopt;
        r.wait_ns += *wait;
    }
    if (!read_small_file("/proc/stat", text)) return std::nullopt;
    const auto idle = idle_ticks_from_proc_stat(text, cpus_);
    if (!idle) return std::nullopt;
    r.idle_ticks = *idle;
    return r;
#else
    (void)tids;
    return std::nullopt;
#endif
}

int ThreadGovernor::after_run(int active, std::span<const int> tids) noexcept {
    if (!observable_) return active;
    const auto now = std::chrono::steady_clock::now();
    if (now < next_sample_) return active;
    next_sample_ = now + kSampleInterval;
    std::optional<Reading> reading;
    try {
        reading = read(tids);
    } catch (...) {  // out of memory reading /proc: keep the count
        return active;
    }
    if (!reading) return active;
    int next = active;
    if (last_ && last_->caller_tid == reading->caller_tid) {
        CpuSample sample;
        sample.wall_seconds = std::chrono::duration<double>(reading->when - last_->when).count();
        // Counters only grow; a thread that ended and was replaced could make one shrink.
        sample.runqueue_wait_seconds = reading->wait_ns >= last_->wait_ns ? 1e-9 * static_cast<double>(reading->wait_ns - last_->wait_ns) : 0;
        sample.idle_cpus = reading->idle_ticks >= last_->idle_ticks && sample.wall_seconds > 0
                               ? static_cast<double>(reading->idle_ticks - last_->idle_ticks) * seconds_per_tick_ / sample.wall_seconds
                               : 0;
        next = next_thread_count(active, max_threads_, sample);
    }
    last_ = reading;
    return next;
}

}  // namespace kiln
