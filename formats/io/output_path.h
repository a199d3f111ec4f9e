#pragma once
// Checking where a file will be written before any work is done, so that a
// long run (training, a conversion) does not end in "cannot create" after the
// work, and nothing is written beside a path that was wrong from the start.
#include <filesystem>
#include <string_view>

namespace kiln {

// kiln::Error("io") naming `role` (e.g. "-o") and the path when a file could
// not be written there: the path is a directory, its folder is missing or not
// a folder or not writable, or its name is longer than the folder allows.
void check_output_path(const std::filesystem::path& path, std::string_view role);

}  // namespace kiln
