#pragma once
// libkiln.so built with sanitizers loads only into programs that carry their
// runtime; Python and a plain C program do not (tests/CMakeLists.txt defines
// KILN_SANITIZED for the test files that load it into such programs).
#include <catch2/catch.hpp>

namespace kiln::test {

// True, with a note in the test's output, when those tests must be skipped.
inline bool skipped_under_sanitizers() {
#ifdef KILN_SANITIZED
    WARN("skipped: libkiln.so is built with sanitizers");
    return true;
#else
    return false;
#endif
}

}  // namespace kiln::test
