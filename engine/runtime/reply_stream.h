#pragma once
// Turns generated token pieces into the text a user is shown: whole UTF-8
// characters only, and nothing of a stop string. Text that could be the start
// of a stop string is held back until the following pieces show whether it
// is one, so a stream never shows "<|us" and then has to take it back.
//
//   ReplyStream reply({"\nUser:"});
//   for each sampled token: send(reply.feed(tokenizer.piece(id))); if (reply.stopped()) break;
//   send(reply.flush());
//
// Used by kiln's conversation mode and by kiln-server (stop strings of a
// request, streamed as server-sent events).
#include <string>
#include <string_view>
#include <vector>

#include "formats/tokenizer/utf8.h"

namespace kiln {

class ReplyStream {
public:
    // Stop strings must be valid, non-empty UTF-8 (kiln::Error otherwise).
    explicit ReplyStream(std::vector<std::string> stop_strings = {});

    // Adds a piece's bytes; returns the text that is now safe to show. When
    // a stop string appears, returns the text before it and stopped() turns
    // true; later calls return nothing.
    std::string feed(std::string_view piece);
    // The end of generation (end-of-turn token, length limit): returns what
    // was held back. A cut character at the very end becomes U+FFFD.
    std::string flush();

    bool stopped() const noexcept { return stopped_; }
    // The stop string that ended the reply (empty when none did).
    const std::string& stop_found() const noexcept { return stop_found_; }

private:
    std::string release(std::string text);

    std::vector<std::string> stops_;
    Utf8Stream utf8_;
    std::string held_;  // whole characters that are the beginning of some stop string
    bool stopped_ = false;
    std::string stop_found_;
};

}  // namespace kiln
