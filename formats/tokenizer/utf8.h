#pragma once
// UTF-8 for tokenizers and streamed output.
//
// Token pieces are byte strings: a byte-fallback token carries a single byte,
// so one character may arrive in up to four tokens. utf8_scan classifies the
// bytes at a position strictly (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF), and Utf8Stream uses it to pass on only whole
// characters while tokens are generated one at a time.
#include <cstddef>
#include <string>
#include <string_view>

namespace kiln {

enum class Utf8Status {
    complete,    // a whole, valid character of `length` bytes
    incomplete,  // the text ends inside a valid character: `length` bytes so far
    invalid,     // `length` (>= 1) bytes that no valid character can start with
};

struct Utf8Scan {
    Utf8Status status;
    size_t length;
};

// Looks at the character that starts at text[0] (text must not be empty).
// For invalid input, `length` is the "maximal subpart" of Unicode's
// recommended practice: a valid lead byte with the valid continuation bytes
// that follow it, or a single byte otherwise, so each broken sequence is one
// replacement character and the next sequence is not swallowed.
Utf8Scan utf8_scan(std::string_view text) noexcept;

// True when all of `text` is valid UTF-8.
bool utf8_valid(std::string_view text) noexcept;

// The code point of the character at text[0], which utf8_scan found complete
// with `length` bytes.
char32_t utf8_code_point(std::string_view text, size_t length) noexcept;

// Appends the UTF-8 bytes of a code point (at most U+10FFFF; a surrogate
// gets its three-byte form, as text read by llama_code_points may hold one).
void utf8_append(std::string& out, char32_t code_point);

inline constexpr std::string_view kUtf8Replacement = "\xEF\xBF\xBD";  // U+FFFD

// Joins the bytes of streamed token pieces into whole characters.
//
//   Utf8Stream stream;
//   for (int32_t id : generated) fputs(stream.feed(tok.piece(id)).c_str(), stdout);
//   fputs(stream.flush().c_str(), stdout);
//
// feed() returns the complete characters available so far and holds back a
// cut tail (at most 3 bytes) until the bytes that finish it arrive. Bytes that
// can never become a valid character are replaced by U+FFFD (one per maximal
// subpart, as utf8_scan defines it), so what a Utf8Stream emits is always
// valid UTF-8 and never splits a character: a terminal shows neither mojibake
// nor half a glyph. flush() ends the stream: a held-back tail that was never
// completed becomes one U+FFFD.
class Utf8Stream {
public:
    std::string feed(std::string_view bytes);
    std::string flush();
    // Bytes held back, waiting for the rest of their character.
    size_t pending() const noexcept { return tail_.size(); }

private:
    std::string tail_;
};

}  // namespace kiln
