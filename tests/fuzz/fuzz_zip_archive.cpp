// libFuzzer entry for a .pt file as kiln-convert reads it: the zip reader
// (formats/checkpoint/zip_archive.h) on any bytes, every entry's data (CRC
// checked) inside the input, then the whole torch.save walk (unpickling
// data.pkl, storages, tensor views) and the state-dict readers. Anything but a
// result or kiln::Error (a crash, a sanitizer report, another exception type,
// a hang, an out-of-memory) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "engine/core/error.h"
#include "formats/checkpoint/zip_archive.h"
#include "fuzz_torch_models.h"

namespace {

bool inside(std::span<const std::byte> part, std::span<const std::byte> whole) {
    return part.empty() || (part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    try {
        const kiln::ZipArchive zip = kiln::ZipArchive::parse(bytes, "fuzz.pt");
        for (const kiln::ZipEntry& e : zip.entries()) {
            if (zip.find(e.name) != &e) std::abort();  // names are unique, so lookups are unambiguous
            try {
                if (!inside(zip.checked_entry(e.name), bytes)) std::abort();
            } catch (const kiln::Error&) {
                // a compressed or corrupt entry
            }
        }
    } catch (const kiln::Error&) {
        // the expected outcome for a malformed archive
    }
    try {
        kiln::fuzz::convert_torch_models(kiln::parse_torch_checkpoint(bytes, "fuzz.pt"));
    } catch (const kiln::Error&) {
        // the expected outcome for a checkpoint kiln cannot read
    }
    return 0;
}
