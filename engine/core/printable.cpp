#include "engine/core/printable.h"

#include <fmt/format.h>

namespace kiln {

std::string printable(std::string_view s, size_t max_bytes) {
    std::string out;
    out.reserve(std::min(s.size(), max_bytes) + 8);
    for (size_t i = 0; i < s.size(); ++i) {
        if (i == max_bytes) return out + fmt::format("... ({} bytes)", s.size());
        const auto c = static_cast<unsigned char>(s[i]);
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
            case '\r': out += "\\r"; break;
            default:
                if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
                else out += static_cast<char>(c);
        }
    }
    return out;
}

}  // namespace kiln
