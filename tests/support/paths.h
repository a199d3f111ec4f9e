#pragma once
// Where tests find the repository's fixtures and the shared test models.
#include <filesystem>

namespace kiln::test {

inline std::filesystem::path source_dir() { return KILN_SOURCE_DIR; }
inline std::filesystem::path fixtures_dir() { return source_dir() / "tests" / "fixtures"; }
inline std::filesystem::path shared_dir() { return KILN_SHARED_DIR; }
inline std::filesystem::path shared_models_dir() { return shared_dir() / "models"; }

}  // namespace kiln::test
