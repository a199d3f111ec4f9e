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

char32_t utf8_code_point(std::string_view text, size_t length) noexcept {
    const auto byte = [&](size_t i) { return static_cast<char32_t>(static_cast<uint8_t>(text[i])); };
    switch (length) {
        case 1: return byte(0);
        case 2: return (byte(0) & 0x1F) << 6 | (byte(1) & 0x3F);
        case 3: return (byte(0) & 0x0F) << 12 | (byte(1) & 0x3F) << 6 | (byte(2) & 0x3F);
        default: return (byte(0) & 0x07) << 18 | (byte(1) & 0x3F) << 12 | (byte(2) & 0x3F) << 6 | (byte(3) & 0x3F);
    }
}

void utf8_append(std::string& out, char32_t code_point) {
    const auto put = [&](char32_t bits) { out.push_back(static_cast<char>(bits)); };
    if (code_point < 0x80) {
        put(code_point);
    } else if (code_point < 0x800) {
        put(0xC0 | code_point >> 6);
        put(0x80 | (code_point & 0x3F));
    } else if (code_point < 0x10000) {
        put(0xE0 | code_point >> 12);
        put(0x80 | (code_point >> 6 & 0x3F));
        put(0x80 | (code_point & 0x3F));
    } else {
        put(0xF0 | code_point >> 18);
        put(0x80 | (code_point >> 12 & 0x3F));
        put(0x80 | (code_point >> 6 & 0x3F));
        put(0x80 | (code_point & 0x3F));
    }
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
