#pragma once
// Writes a file so that the target path only ever holds a complete file: data
// goes to a temporary file in the same folder, which is flushed, synced and
// renamed over the target on commit(). Destroying an uncommitted AtomicFile
// (an exception, an early return) removes the temporary file, and so does an
// interrupt (SIGINT, SIGTERM, SIGHUP) while it is being written.
//
// The temporary is named ".NAME.tmp.PID.RANDOM" (NAME shortened when the whole
// would exceed the folder's longest file name). SIGKILL or a power cut leaves
// it behind: the next AtomicFile for the same target removes those of its
// pattern whose process is gone (see remove_stale_temporaries).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>

namespace kiln {

class AtomicFile {
public:
    explicit AtomicFile(std::filesystem::path target);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    void write(std::span<const std::byte> bytes);
    void write_zeros(size_t count);
    uint64_t bytes_written() const noexcept { return written_; }
    // Flushes, syncs and renames the temporary file over the target.
    void commit();

    const std::filesystem::path& temp_path() const noexcept { return temp_; }

    // Removes the temporaries that writers of `target` left behind: files of
    // its pattern whose PID is not a running process and that have not been
    // modified for `min_age_seconds` (a process in another PID namespace that
    // writes into the same folder has a PID this one cannot see). Returns how
    // many it removed.
    static int remove_stale_temporaries(const std::filesystem::path& target, int64_t min_age_seconds = 60);

private:
    std::filesystem::path target_;
    std::filesystem::path temp_;
    std::string temp_string_;  // stable storage for the interrupt handler
    std::FILE* file_ = nullptr;
    uint64_t written_ = 0;
    bool committed_ = false;
};

}  // namespace kiln
