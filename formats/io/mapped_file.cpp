#include "formats/io/mapped_file.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "engine/core/error.h"
#include "formats/io/regular_file.h"

namespace kiln {

MappedFile::MappedFile(const std::filesystem::path& path) {
    const RegularFile file = open_regular_file(path);
    size_ = file.size;
    if (size_ > 0) {
        void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd.get(), 0);
        if (p == MAP_FAILED) fail("io", "cannot map '{}' ({} bytes): {}", path.string(), size_, std::strerror(errno));
        data_ = static_cast<const std::byte*>(p);
    }
    // The mapping stays valid when the descriptor closes.
}

MappedFile::~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

}  // namespace kiln
