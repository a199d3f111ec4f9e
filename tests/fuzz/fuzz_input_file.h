#pragma once
// The fuzzer's input as a file, for the readers that take a path (as
// kiln-convert calls them): each run overwrites one file per process, in
// /dev/shm when it exists (no disk I/O), removed when the process exits or,
// when it could not be, by the next fuzzer process that starts.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace kiln::fuzz {

// Removes the folders of fuzzer processes that are gone: libFuzzer often ends
// a process with _Exit (time limit, fork-mode jobs, findings), which skips atexit.
inline void remove_stale_folders(const std::filesystem::path& base) {
    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator(base, ignored)) {
        const std::string name = entry.path().filename().string();
        if (!name.starts_with("kiln-fuzz-")) continue;
        const long pid = std::strtol(name.c_str() + 10, nullptr, 10);
        if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
            std::filesystem::remove_all(entry.path(), ignored);
    }
}

// A folder of this process's own, created on first use: the inputs live there
// under the names the readers expect (config.json, tokenizer.json, ...).
inline const std::filesystem::path& scratch_folder() {
    static const std::filesystem::path folder = [] {
        const char* tmp = std::getenv("TMPDIR");
        const std::filesystem::path base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm"
                                           : tmp != nullptr                          ? tmp
                                                                                     : "/tmp";
        remove_stale_folders(base);
        std::filesystem::path f = base / ("kiln-fuzz-" + std::to_string(::getpid()));
        std::filesystem::create_directories(f);
        std::atexit([] {
            std::error_code ignored;
            std::filesystem::remove_all(scratch_folder(), ignored);
        });
        return f;
    }();
    return folder;
}

// Writes `data` to `path` (replacing it); aborts when it cannot, since a
// harness that silently tests a stale file would report nothing.
inline void write_file(const std::filesystem::path& path, const uint8_t* data, size_t size) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) std::abort();
    for (size_t done = 0; done < size;) {
        const ssize_t n = ::write(fd, data + done, size - done);
        if (n <= 0) std::abort();
        done += static_cast<size_t>(n);
    }
    if (::close(fd) != 0) std::abort();
}

// The input as scratch_folder()/name.
inline std::filesystem::path input_file(const char* name, const uint8_t* data, size_t size) {
    std::filesystem::path path = scratch_folder() / name;
    write_file(path, data, size);
    return path;
}

}  // namespace kiln::fuzz
