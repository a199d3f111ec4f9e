#include "engine/runtime/reply_stream.h"

#include <algorithm>

#include "engine/core/error.h"

namespace kiln {

ReplyStream::ReplyStream(std::vector<std::string> stop_strings) : stops_(std::move(stop_strings)) {
    for (const std::string& s : stops_)
        if (s.empty() || !utf8_valid(s)) fail("sampling", "a stop string must be non-empty, valid UTF-8 text");
}

std::string ReplyStream::feed(std::string_view piece) {
    if (stopped_) return {};
    return release(held_ + utf8_.feed(piece));
}

std::string ReplyStream::flush() {
    if (stopped_) return {};
    std::string text = release(held_ + utf8_.flush());
    if (stopped_) return text;
    text += held_;  // nothing more comes: a partial stop string is plain text
    held_.clear();
    return text;
}

std::string ReplyStream::release(std::string text) {
    held_.clear();
    // The earliest stop string wins; at one position, the longest.
    size_t stop_at = std::string::npos;
    for (const std::string& s : stops_) {
        const size_t at = text.find(s);
        if (at < stop_at || (at == stop_at && at != std::string::npos && s.size() > stop_found_.size())) {
            stop_at = at;
            stop_found_ = s;
        }
    }
    if (stop_at != std::string::npos) {
        stopped_ = true;
        text.resize(stop_at);
        return text;
    }
    // Hold back the longest tail that some stop string begins with. Stop
    // strings are valid UTF-8 and the text holds whole characters, so such a
    // tail starts at a character boundary.
    size_t keep = 0;
    for (const std::string& s : stops_)
        for (size_t n = std::min(s.size() - 1, text.size()); n > keep; --n)
            if (text.compare(text.size() - n, n, s, 0, n) == 0) {
                keep = n;
                break;
            }
    held_ = text.substr(text.size() - keep);
    text.resize(text.size() - keep);
    return text;
}

}  // namespace kiln
