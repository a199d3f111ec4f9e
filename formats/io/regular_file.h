#pragma once
// Opening a path for reading only when it is a regular file. open() on a FIFO
// blocks until a writer appears (forever, for a forgotten one), and reading a
// directory or a device gives nonsense or nothing; every file a tool reads
// goes through here, so each of those is one clear error instead.
#include <cstddef>
#include <filesystem>
#include <string>

namespace kiln {

// An open descriptor, closed on destruction.
class FileDescriptor {
public:
    explicit FileDescriptor(int fd) noexcept : fd_(fd) {}
    ~FileDescriptor();
    FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
    FileDescriptor(const FileDescriptor&) = delete;
    FileDescriptor& operator=(const FileDescriptor&) = delete;
    FileDescriptor& operator=(FileDescriptor&&) = delete;
    int get() const noexcept { return fd_; }
    int release() noexcept {
        const int fd = fd_;
        fd_ = -1;
        return fd;
    }

private:
    int fd_;
};

struct RegularFile {
    FileDescriptor fd;
    size_t size = 0;
};

// Opens `path` without blocking (O_NONBLOCK, then fstat) and checks that it is
// a regular file: kiln::Error("io") naming the path and what it is instead
// (a directory, a FIFO, ...) or why it cannot be opened.
RegularFile open_regular_file(const std::filesystem::path& path);

// The whole content of a regular file (open_regular_file's checks).
std::string read_regular_file(const std::filesystem::path& path);

// The first `max_bytes` bytes of a regular file (fewer when it is shorter),
// for telling formats apart by their magic bytes.
std::string read_file_head(const std::filesystem::path& path, size_t max_bytes);

}  // namespace kiln
