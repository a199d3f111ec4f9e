#include "formats/tokenizer/utf8.h"

#include <cstdint>

namespace kiln {

Utf8Scan utf8_scan(std::string_view text) noexcept {
    const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
    const uint8_t lead = byte(0);
    if (lead < 0x80) return {Utf8Status::complete, 1};

    // The lead byte fixes the length and the range allowed for the second
    // byte; the narrowed ranges are what exclude overlong forms (E0, F0),
    // UTF-16 surrogates (ED) and code points above U+10FFFF (F4).
    size_t length = 0;
    uint8_t second_lo = 0x80, second_hi = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        if (lead == 0xE0) second_lo = 0xA0;
        if (lead == 0xED) second_hi = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        if (lead == 0xF0) second_lo = 0x90;
        if (lead == 0xF4) second_hi = 0x8F;
    } else {
        return {Utf8Status::invalid, 1};  // a continuation byte, C0/C1 or F5..FF
    }

    for (size_t i = 1; i < length; ++i) {
        if (i >= text.size()) return {Utf8Status::incomplete, i};
        const uint8_t lo = i == 1 ? second_lo : 0x80;
        const uint8_t hi = i == 1 ? second_hi : 0xBF;
        if (byte(i) < lo || byte(i) > hi) return {Utf8Status::invalid, i};
    }
    return {Utf8Status::complete, length};
}

bool utf8_valid(std::string_view text) noexcept {
    while (!text.empty()) {
        const Utf8Scan scan = utf8_scan(text);
        if (scan.status != Utf8Status::complete) return false;
        text.remove_prefix(scan.length);
    }
    return true;
}

std::string Utf8Stream::feed(std::string_view bytes) {
    // The held-back tail is at most 3 bytes, so joining it to the new bytes
    // costs nothing worth avoiding.
    std::string input = std::move(tail_);
    input.append(bytes);
    tail_.clear();

    std::string out;
    out.reserve(input.size());
    std::string_view rest = input;
    while (!rest.empty()) {
        const Utf8Scan scan = utf8_scan(rest);
        if (scan.status == Utf8Status::incomplete) {
            tail_.assign(rest);  // only ever the very end of the input
            break;
        }
        if (scan.status == Utf8Status::complete) out.append(rest.substr(0, scan.length));
        else out.append(kUtf8Replacement);
        rest.remove_prefix(scan.length);
    }
    return out;
}

std::string Utf8Stream::flush() {
    if (tail_.empty()) return {};
    tail_.clear();
    return std::string(kUtf8Replacement);
}

}  // namespace kiln
