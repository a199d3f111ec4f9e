#include "formats/io/atomic_folder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "engine/core/error.h"

namespace kiln {

namespace {

void sync_folder(const std::filesystem::path& folder) {
    const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    ::fsync(fd);
    ::close(fd);
}

}  // namespace

void AtomicFolder::check_target(const std::filesystem::path& target) {
    std::error_code ec;
    const std::filesystem::file_status status = std::filesystem::symlink_status(target, ec);
    if (status.type() == std::filesystem::file_type::not_found) return;
    if (ec) fail("io", "cannot write the folder '{}': {}", target.string(), ec.message());
    if (status.type() != std::filesystem::file_type::directory)
        fail("io", "cannot write the folder '{}': a file of that name exists", target.string());
    if (!std::filesystem::is_empty(target, ec) || ec)
        fail("io", "cannot write the folder '{}': it exists and is not empty (remove it, or give a new folder)",
             target.string());
}

AtomicFolder::AtomicFolder(std::filesystem::path target) : target_(std::move(target)) {
    if (target_.filename().empty() && target_.has_parent_path()) target_ = target_.parent_path();  // "out/" is out
    if (target_.filename().empty() || target_.filename() == "." || target_.filename() == "..")
        fail("io", "cannot write the folder '{}': not a folder name", target_.string());
    check_target(target_);
    const std::filesystem::path parent = target_.has_parent_path() ? target_.parent_path() : ".";
    if (!std::filesystem::is_directory(parent))
        fail("io", "cannot write the folder '{}': the folder '{}' does not exist", target_.string(), parent.string());
    std::random_device entropy;
    // Beside the target, so that rename() stays on one filesystem.
    for (int attempt = 0; attempt < 16; ++attempt) {
        temp_ = parent / fmt::format(".{}.tmp.{}.{:08x}", target_.filename().string(), ::getpid(), entropy());
        if (::mkdir(temp_.c_str(), 0755) == 0) return;
        if (errno != EEXIST) fail("io", "cannot create the folder '{}': {}", temp_.string(), std::strerror(errno));
    }
    fail("io", "cannot create a temporary folder beside '{}'", target_.string());
}

AtomicFolder::~AtomicFolder() {
    if (committed_) return;
    std::error_code ignored;
    std::filesystem::remove_all(temp_, ignored);
}

void AtomicFolder::commit() {
    sync_folder(temp_);
    std::error_code ec;
    std::filesystem::rename(temp_, target_, ec);
    if (ec) {
        check_target(target_);  // it was filled (or made a file) meanwhile: say so by name
        fail("io", "cannot rename '{}' to '{}': {}", temp_.string(), target_.string(), ec.message());
    }
    committed_ = true;
    sync_folder(target_.has_parent_path() ? target_.parent_path() : ".");
}

}  // namespace kiln
