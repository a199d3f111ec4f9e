#pragma once
// Whether this process may run Intel AMX (Advanced Matrix Extensions) tile
// instructions, decided once: the CPU has AMX-TILE (and AMX-INT8 / AMX-BF16),
// the OS saves the tile state (XCR0 bits 17 and 18), and, on Linux, the kernel
// granted this process the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM for
// XTILEDATA; without it the first tile instruction kills the process with
// SIGILL). The permission is asked for here and nowhere else.
#include <cstdint>

namespace kiln::kernels {

struct AmxSupport {
    bool int8 = false;  // TDPBSSD and friends usable
    bool bf16 = false;  // TDPBF16PS usable
    // Why AMX is not usable, for messages ("the CPU has no AMX", "Linux
    // refused the tile data permission", ...); null when it is.
    const char* refusal = nullptr;
};

const AmxSupport& amx_support() noexcept;

// The 64-byte tile configuration LDTILECFG reads (palette 1): per tile its
// rows and its bytes per row. Tiles left at zero are unconfigured.
struct alignas(64) AmxTileConfig {
    uint8_t palette = 1;
    uint8_t start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t bytes_per_row[16] = {};
    uint8_t rows[16] = {};
};
static_assert(sizeof(AmxTileConfig) == 64);

}  // namespace kiln::kernels
