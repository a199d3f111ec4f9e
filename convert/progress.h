#pragma once
// kiln-convert's progress line on a terminal: bytes of tensor data processed
// out of the total, as a percentage and in MiB, with the tensor at hand.
// Redrawn in place ("\r", erase line) at most every 100 ms, so a large model
// costs a few hundred writes, not one per tensor or chunk; disabled (prints
// nothing) when the stream is not a terminal, so logs and pipes stay clean.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string_view>

namespace kiln::convert {

class Progress {
public:
    Progress(std::FILE* out, uint64_t total_bytes, bool enabled);

    // `done` bytes of the total are processed; `what` is the tensor (or step) at hand.
    void update(uint64_t done, std::string_view what);
    // Shows a step that has no byte count (e.g. writing the file), immediately.
    void status(std::string_view what);
    // Erases the line.
    void clear();

private:
    std::FILE* out_;
    uint64_t total_;
    bool enabled_;
    std::chrono::steady_clock::time_point last_{};
};

}  // namespace kiln::convert
