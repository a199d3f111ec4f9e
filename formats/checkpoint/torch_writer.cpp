#include "formats/checkpoint/torch_writer.h"

#include <map>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/checkpoint/zip_writer.h"
#include "formats/io/atomic_file.h"

namespace kiln {
namespace {

constexpr std::string_view kFolder = "archive";

// Checks that every tensor in the tree names a storage big enough for it,
// before any byte is written.
void check_tensors(const pickle::PickleValue& v, const std::map<std::string, const TorchStorage*>& storages) {
    if (const auto* t = std::get_if<pickle::TensorRecord>(&v.value)) {
        const auto it = storages.find(t->storage_key);
        if (it == storages.end())
            fail("pytorch", "a tensor names storage '{}', which is not written", printable(t->storage_key));
        const uint64_t expected = static_cast<uint64_t>(t->storage_numel) * pickle::torch_dtype_size(t->dtype);
        if (t->storage_numel < 0 || it->second->bytes.size() != expected)
            fail("pytorch", "storage '{}' has {} bytes but a tensor takes it for {} {} elements",
                 printable(t->storage_key), it->second->bytes.size(), t->storage_numel,
                 pickle::torch_dtype_name(t->dtype));
    } else if (const auto* l = std::get_if<pickle::PickleList>(&v.value)) {
        for (const pickle::PickleValue& item : *l) check_tensors(item, storages);
    } else if (const auto* tu = std::get_if<pickle::PickleTuple>(&v.value)) {
        for (const pickle::PickleValue& item : tu->items) check_tensors(item, storages);
    } else if (const auto* d = std::get_if<pickle::PickleDict>(&v.value)) {
        for (const auto& [key, item] : d->items) {
            check_tensors(key, storages);
            check_tensors(item, storages);
        }
    }
}

std::span<const std::byte> bytes_of(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }

}  // namespace

void write_torch_checkpoint(const std::filesystem::path& path, const pickle::PickleValue& root,
                            const std::vector<TorchStorage>& storages, bool force_zip64) {
    std::map<std::string, const TorchStorage*> by_key;
    for (const TorchStorage& s : storages) {
        if (s.key.empty() || s.key.find('/') != std::string::npos)
            fail("pytorch", "storage key '{}' is not a plain entry name", printable(s.key));
        if (!by_key.emplace(s.key, &s).second) fail("pytorch", "storage '{}' is given twice", printable(s.key));
    }
    check_tensors(root, by_key);
    const std::vector<std::byte> pickled = pickle::write_pickle(root);

    AtomicFile file(path);
    ZipWriter zip(file, force_zip64);
    const std::string folder(kFolder);
    zip.add(folder + "/data.pkl", pickled);
    for (const TorchStorage& s : storages) zip.add(folder + "/data/" + s.key, s.bytes);
    zip.add(folder + "/version", bytes_of("3\n"));
    zip.add(folder + "/byteorder", bytes_of("little"));
    zip.finish();
    file.commit();
}

}  // namespace kiln
