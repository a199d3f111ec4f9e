#include "formats/io/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <iterator>
#include <atomic>
#include <csignal>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <limits>
#include <random>
#include <string_view>

#include "engine/core/error.h"

namespace kiln {

namespace {

// The temporary file being written, if any, so that an interrupt (Ctrl-C, a
// kill) removes it instead of leaving it behind. unlink() is async-signal-safe.
std::atomic<const char*> g_temp_path{nullptr};

constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous[std::size(kCleanupSignals)];

extern "C" void remove_temp_and_reraise(int signal_number) {
    if (const char* path = g_temp_path.exchange(nullptr)) ::unlink(path);
    // Hand the signal on to whoever handled it before (by default: terminate).
    for (size_t i = 0; i < std::size(kCleanupSignals); ++i)
        if (kCleanupSignals[i] == signal_number) ::sigaction(signal_number, &g_previous[i], nullptr);
    std::raise(signal_number);
}

// Puts the cleanup handler in front of whatever handles these signals now;
// a signal the program chose to ignore (e.g. under nohup) stays ignored.
void install_interrupt_cleanup() {
    for (size_t i = 0; i < std::size(kCleanupSignals); ++i) {
        struct sigaction current {};
        if (::sigaction(kCleanupSignals[i], nullptr, &current) != 0) continue;
        if (current.sa_handler == SIG_IGN || current.sa_handler == remove_temp_and_reraise) continue;
        g_previous[i] = current;
        struct sigaction action {};
        action.sa_handler = remove_temp_and_reraise;
        sigemptyset(&action.sa_mask);
        ::sigaction(kCleanupSignals[i], &action, nullptr);
    }
}

// The longest file name the target's folder accepts (NAME_MAX, 255 on Linux filesystems).
size_t longest_name(const std::filesystem::path& folder) {
    const long limit = ::pathconf(folder.empty() ? "." : folder.c_str(), _PC_NAME_MAX);
    return limit > 0 ? static_cast<size_t>(limit) : 255;
}

// ".tmp." + a PID of up to 10 digits + "." + 8 hex digits, and the leading dot.
constexpr size_t kTempDecoration = 1 + 5 + 10 + 1 + 8;

// The part of the temporary's name that comes from the target: its name,
// shortened so that the temporary's name still fits the folder.
std::string temp_stem(const std::filesystem::path& target) {
    const std::string name = target.filename().string();
    const size_t room = longest_name(target.parent_path());
    const size_t keep = room > kTempDecoration ? room - kTempDecoration : 1;
    return name.substr(0, std::min(name.size(), keep));
}

// The PID in "<stem>.tmp.<pid>.<8 hex>" after the leading dot, or -1 when `name` is not such a name.
long temp_owner(std::string_view name, std::string_view stem) {
    if (name.size() < 1 + stem.size() || name[0] != '.' || name.substr(1, stem.size()) != stem) return -1;
    std::string_view rest = name.substr(1 + stem.size());
    if (!rest.starts_with(".tmp.")) return -1;
    rest.remove_prefix(5);
    const size_t dot = rest.find('.');
    if (dot == std::string_view::npos || dot == 0 || dot > 10 || rest.size() - dot - 1 != 8) return -1;
    long pid = 0;
    for (char c : rest.substr(0, dot)) {
        if (c < '0' || c > '9') return -1;
        pid = pid * 10 + (c - '0');
    }
    for (char c : rest.substr(dot + 1))
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return -1;
    return pid;
}

bool process_exists(long pid) {
    if (pid <= 0 || pid > std::numeric_limits<pid_t>::max()) return false;
    // EPERM: it exists but belongs to someone else.
    return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

}  // namespace

int AtomicFile::remove_stale_temporaries(const std::filesystem::path& target, int64_t min_age_seconds) {
    namespace fs = std::filesystem;
    const fs::path folder = target.has_parent_path() ? target.parent_path() : ".";
    const std::string stem = temp_stem(target);
    std::error_code ec;
    fs::directory_iterator it(folder, ec);
    if (ec) return 0;
    const auto now = fs::file_time_type::clock::now();
    int removed = 0;
    for (const fs::directory_entry& entry : it) {
        const long pid = temp_owner(entry.path().filename().string(), stem);
        if (pid < 0 || pid == ::getpid() || process_exists(pid)) continue;
        const auto modified = fs::last_write_time(entry.path(), ec);
        if (ec || now - modified < std::chrono::seconds(min_age_seconds)) continue;
        if (entry.is_regular_file(ec) && fs::remove(entry.path(), ec)) ++removed;
    }
    return removed;
}

AtomicFile::AtomicFile(std::filesystem::path target) : target_(std::move(target)) {
    if (target_.filename().empty()) fail("io", "cannot write '{}': not a file name", target_.string());
    if (std::filesystem::is_directory(target_)) fail("io", "cannot write '{}': it is a directory", target_.string());
    remove_stale_temporaries(target_);
    std::random_device entropy;
    // The temporary lives beside the target so that rename() stays on one filesystem.
    const std::string stem = fmt::format(".{}.tmp", temp_stem(target_));
    for (int attempt = 0; attempt < 16 && file_ == nullptr; ++attempt) {
        temp_ = target_;
        temp_.replace_filename(fmt::format("{}.{}.{:08x}", stem, ::getpid(), entropy()));
        const int fd = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) {
            if (errno == EEXIST) continue;
            fail("io", "cannot create '{}': {}", temp_.string(), std::strerror(errno));
        }
        file_ = ::fdopen(fd, "wb");
        if (file_ == nullptr) {
            ::close(fd);
            fail("io", "cannot open '{}': {}", temp_.string(), std::strerror(errno));
        }
    }
    if (file_ == nullptr) fail("io", "cannot create a temporary file beside '{}'", target_.string());
    install_interrupt_cleanup();
    temp_string_ = temp_.string();
    g_temp_path.store(temp_string_.c_str());
}

AtomicFile::~AtomicFile() {
    const char* mine = temp_string_.c_str();
    g_temp_path.compare_exchange_strong(mine, nullptr);
    if (committed_) return;
    if (file_ != nullptr) std::fclose(file_);
    std::error_code ignored;
    std::filesystem::remove(temp_, ignored);
}

void AtomicFile::write(std::span<const std::byte> bytes) {
    if (bytes.empty()) return;
    if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size())
        fail("io", "cannot write '{}': {}", temp_.string(), std::strerror(errno));
    written_ += bytes.size();
}

void AtomicFile::write_zeros(size_t count) {
    static constexpr std::array<std::byte, 256> kZeros{};
    while (count > 0) {
        const size_t n = std::min(count, kZeros.size());
        write({kZeros.data(), n});
        count -= n;
    }
}

void AtomicFile::commit() {
    if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0)
        fail("io", "cannot flush '{}': {}", temp_.string(), std::strerror(errno));
    const int close_result = std::fclose(file_);
    file_ = nullptr;
    if (close_result != 0) fail("io", "cannot close '{}': {}", temp_.string(), std::strerror(errno));
    std::error_code ec;
    const char* mine = temp_string_.c_str();
    g_temp_path.compare_exchange_strong(mine, nullptr);  // from here on the file is the target's
    std::filesystem::rename(temp_, target_, ec);
    if (ec) fail("io", "cannot rename '{}' to '{}': {}", temp_.string(), target_.string(), ec.message());
    committed_ = true;
    // Make the rename itself durable.
    const std::filesystem::path folder = target_.has_parent_path() ? target_.parent_path() : ".";
    const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
        ::fsync(dir);
        ::close(dir);
    }
}

}  // namespace kiln
