#include "formats/io/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "engine/core/error.h"

namespace kiln {

namespace {

std::string_view kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    return "a special file";
}

}  // namespace

FileDescriptor::~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
}

RegularFile open_regular_file(const std::filesystem::path& path) {
    // O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer.
    FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    if (fd.get() < 0) fail("io", "cannot open '{}': {}", path.string(), std::strerror(errno));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) fail("io", "cannot stat '{}': {}", path.string(), std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail("io", "'{}' is not a regular file: it is {}", path.string(), kind_of(st.st_mode));
    // Reads of a regular file never block anyway; clear the flag so nothing downstream sees EAGAIN.
    const int flags = ::fcntl(fd.get(), F_GETFL);
    if (flags >= 0) ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
    return RegularFile{std::move(fd), static_cast<size_t>(st.st_size)};
}

namespace {

// Reads up to `limit` bytes (all, when limit is npos) from the start of an open file.
std::string read_up_to(const RegularFile& file, const std::filesystem::path& path, size_t limit) {
    std::string text(std::min(file.size, limit), '\0');
    size_t done = 0;
    // Read until end of file: the size is a hint (a file can grow or shrink while it is read).
    for (;;) {
        if (done == limit) break;
        if (done == text.size()) text.resize(std::min(text.size() + 65536, limit));
        const ssize_t n = ::read(file.fd.get(), text.data() + done, text.size() - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            fail("io", "cannot read '{}': {}", path.string(), std::strerror(errno));
        }
        if (n == 0) break;
        done += static_cast<size_t>(n);
    }
    text.resize(done);
    return text;
}

}  // namespace

std::string read_regular_file(const std::filesystem::path& path) {
    return read_up_to(open_regular_file(path), path, std::string::npos);
}

std::string read_file_head(const std::filesystem::path& path, size_t max_bytes) {
    return read_up_to(open_regular_file(path), path, max_bytes);
}

}  // namespace kiln
