#include "capi/boundary.h"

#include <algorithm>

namespace kiln::capi {
namespace {

thread_local std::string last_error;
thread_local bool last_error_lost = false;  // the message itself could not be stored

}  // namespace

void set_last_error(std::string_view message) noexcept {
    try {
        last_error.assign(message.substr(0, message.find('\n')));
        last_error_lost = false;
    } catch (...) {
        last_error_lost = true;
    }
}

kiln_status status_of(const Error& e) noexcept {
    const std::string& c = e.component();
    if (c == "gguf" || c == "io" || c == "tokenizer") return KILN_ERROR_MODEL;
    const std::string_view what = e.what();
    if (c == "model" && what.find("do not fit the context") != std::string_view::npos) return KILN_ERROR_CONTEXT_FULL;
    if (c == "model" && (what.find("out of range") != std::string_view::npos ||
                         what.find("outside the vocabulary") != std::string_view::npos))
        return KILN_ERROR_INVALID_ARGUMENT;
    if (c == "model") return KILN_ERROR_MODEL;
    return KILN_ERROR_FAILED;
}

void write_text(std::string_view text, char* buf, size_t capacity, size_t* n_bytes) {
    require(n_bytes, "n_bytes");
    *n_bytes = text.size();
    if (capacity < text.size() + 1)
        reject(KILN_ERROR_BUFFER_TOO_SMALL, "the text needs {} bytes (NUL included); the buffer has {}",
               text.size() + 1, capacity);
    require(buf, "buf");
    std::copy(text.begin(), text.end(), buf);
    buf[text.size()] = '\0';
}

void write_tokens(const int32_t* ids, size_t count, kiln_token* tokens, int32_t capacity, int32_t* n_tokens) {
    require(n_tokens, "n_tokens");
    if (count > static_cast<size_t>(INT32_MAX)) reject(KILN_ERROR_FAILED, "{} tokens are more than an int32_t counts", count);
    *n_tokens = static_cast<int32_t>(count);
    if (capacity < 0 || static_cast<size_t>(capacity) < count)
        reject(KILN_ERROR_BUFFER_TOO_SMALL, "{} tokens do not fit a buffer of {}", count, capacity);
    if (count > 0) require(tokens, "tokens");
    std::copy(ids, ids + count, tokens);
}

}  // namespace kiln::capi

extern "C" const char* kiln_last_error(void) {
    return kiln::capi::last_error_lost ? "out of memory (the error message could not be stored)"
                                       : kiln::capi::last_error.c_str();
}
