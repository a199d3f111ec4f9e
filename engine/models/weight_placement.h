#pragma once
// Where a model's weights live while it computes, decided once by the tool
// (llama.cpp's --no-mmap and --mlock) and handed to every architecture's
// loader, and what a load then did (kiln -v prints it).
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/dtype.h"

namespace kiln {

struct WeightPlacement {
    // true (the default): compute from the file mapping, so the weights cost
    // no memory beyond the file's page cache, which the kernel may drop and
    // every process mapping the file shares; only the tensors the kernels
    // want rearranged (quant/interleave.h) are copied. false (--no-mmap):
    // every tensor is copied into anonymous memory advised to use 2 MiB pages.
    bool mmap = true;
    // Lock what the model computes from (mapped pages and copies) in RAM, so
    // it is never paged out (--mlock). A refusal (RLIMIT_MEMLOCK) is one
    // warning on stderr, and the model runs unlocked.
    bool mlock = false;
};

struct CopiedTensor {
    std::string name;
    DType type = DType::F32;  // what the copy holds: an interleaved layout or the file's type
    uint64_t bytes = 0;
};

// What a load did with the weights.
struct WeightResidence {
    WeightPlacement placement;
    uint64_t mapped_bytes = 0;         // tensor bytes computed from the file mapping
    std::vector<CopiedTensor> copies;  // in the file's order
    uint64_t copied_bytes = 0;
    uint64_t locked_bytes = 0;         // locked in RAM; less than asked when mlock was refused
};

}  // namespace kiln
