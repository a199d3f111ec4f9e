#include "formats/io/output_path.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/core/error.h"

namespace kiln {

void check_output_path(const std::filesystem::path& path, std::string_view role) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (path.filename().empty()) fail("io", "{} '{}' names a folder, not a file", role, path.string());
    if (fs::is_directory(path, ec)) fail("io", "{} '{}' is a directory", role, path.string());
    const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
    if (!fs::exists(folder, ec)) fail("io", "{} '{}': the folder '{}' does not exist", role, path.string(), folder.string());
    if (!fs::is_directory(folder, ec)) fail("io", "{} '{}': '{}' is not a folder", role, path.string(), folder.string());
    if (::access(folder.c_str(), W_OK | X_OK) != 0)
        fail("io", "{} '{}': cannot write into '{}': {}", role, path.string(), folder.string(), std::strerror(errno));
    const long name_max = ::pathconf(folder.c_str(), _PC_NAME_MAX);
    if (name_max > 0 && path.filename().native().size() > static_cast<size_t>(name_max))
        fail("io", "{} '{}': the name is {} bytes, longer than the {} the folder allows", role, path.string(),
             path.filename().native().size(), name_max);
}

}  // namespace kiln
