#pragma once
// Writes a folder of files so that the target path only ever holds a complete
// folder: the files go into a temporary folder beside the target, which is
// renamed to the target on commit(). Destroying an uncommitted AtomicFolder
// (an exception: a full disk, a refused tensor) removes the temporary folder
// and everything in it, so a failed export leaves nothing behind.
//
// The target may be missing or an empty folder (rename() replaces an empty
// folder); an existing file, or a folder that holds anything, is refused up
// front rather than mixed with or overwritten by the new files.
// An interrupt (Ctrl-C) while writing removes the file being written
// (AtomicFile) but may leave the hidden temporary folder ".<name>.tmp.*".
#include <filesystem>

namespace kiln {

class AtomicFolder {
public:
    explicit AtomicFolder(std::filesystem::path target);
    ~AtomicFolder();
    AtomicFolder(const AtomicFolder&) = delete;
    AtomicFolder& operator=(const AtomicFolder&) = delete;

    // Where to write the files until commit().
    const std::filesystem::path& path() const noexcept { return temp_; }
    // Syncs the temporary folder and renames it to the target.
    void commit();

    // Throws kiln::Error("io", ...) when `target` exists and is not an empty folder.
    static void check_target(const std::filesystem::path& target);

private:
    std::filesystem::path target_;
    std::filesystem::path temp_;
    bool committed_ = false;
};

}  // namespace kiln
