#include "formats/checkpoint/gguf_checkpoint.h"

namespace kiln {

Checkpoint read_gguf_checkpoint(const std::filesystem::path& path) {
    auto file = std::make_shared<const GgufFile>(GgufFile::open(path));
    Checkpoint c;
    for (const GgufEntry& e : file->metadata())
        if (e.key != "general.alignment") c.metadata.push_back(e);  // the writer decides the layout
    for (const GgufTensor& t : file->tensors()) c.tensors.push_back({t.name, t.type, t.dims, t.data});
    c.source = file;
    return c;
}

}  // namespace kiln
