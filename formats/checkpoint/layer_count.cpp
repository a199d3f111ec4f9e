#include "formats/checkpoint/layer_count.h"

#include <charconv>

#include "engine/core/error.h"
#include "engine/core/printable.h"

namespace kiln {

void LayerCount::see(std::string_view name) {
    if (!name.starts_with(prefix_)) return;
    const std::string_view rest = name.substr(prefix_.size());
    uint64_t n = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), n);
    if (ec == std::errc() && end != rest.data() + rest.size() && *end == '.') indices_.insert(n);
}

void LayerCount::check(uint64_t declared, std::string_view component, const std::string& where,
                       std::string_view source) const {
    if (declared <= found()) return;
    fail(component, "{}: {} is {} but the tensors hold {} layer{} ('{}N.*')", where, source, declared, found(),
         found() == 1 ? "" : "s", printable(prefix_, 80));
}

}  // namespace kiln
