// Writes the fuzzer's seed: kiln's valid sample GGUF (every value type, 3 tensors).
#include <cstdio>

#include "support/sample_gguf.h"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: fuzz-gguf-seed OUT.gguf\n");
        return 2;
    }
    const auto bytes = kiln::test::make_sample_gguf();
    std::FILE* out = std::fopen(argv[1], "wb");
    if (out == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), out) != bytes.size() || std::fclose(out) != 0) {
        std::perror(argv[1]);
        return 1;
    }
    return 0;
}
