#pragma once
// The C API's boundary: every entry point runs its body through guard(), which
// turns any C++ exception into a kiln_status and this thread's last-error
// message, so that nothing is ever thrown into C.
#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <string_view>

#include "engine/core/error.h"
#include "kiln.h"

namespace kiln::capi {

// A failure that already knows its status (argument checks at the boundary).
class StatusError : public std::exception {
public:
    StatusError(kiln_status status, std::string message) : status_(status), message_(std::move(message)) {}
    kiln_status status() const noexcept { return status_; }
    const char* what() const noexcept override { return message_.c_str(); }

private:
    kiln_status status_;
    std::string message_;
};

template <typename... Args>
[[noreturn]] void reject(kiln_status status, fmt::format_string<Args...> format, Args&&... args) {
    throw StatusError(status, fmt::format(format, std::forward<Args>(args)...));
}

// Records the message as this thread's last error; never throws (a message that
// cannot be stored for want of memory becomes a fixed one).
void set_last_error(std::string_view message) noexcept;

// The status a kiln::Error from the engine means: the component names the area.
kiln_status status_of(const Error& e) noexcept;

template <typename Body>
kiln_status guard(const char* function, Body&& body) noexcept {
    try {
        body();
        return KILN_OK;
    } catch (const StatusError& e) {
        set_last_error(fmt::format("{}: {}", function, e.what()));
        return e.status();
    } catch (const Error& e) {
        set_last_error(fmt::format("{}: {}", function, e.what()));
        return status_of(e);
    } catch (const std::bad_alloc&) {
        set_last_error("out of memory");
        return KILN_ERROR_OUT_OF_MEMORY;
    } catch (const std::exception& e) {
        set_last_error(e.what());
        return KILN_ERROR_FAILED;
    } catch (...) {
        set_last_error("unknown failure");
        return KILN_ERROR_FAILED;
    }
}

template <typename T>
T& require(T* p, const char* name) {
    if (p == nullptr) reject(KILN_ERROR_INVALID_ARGUMENT, "{} is NULL", name);
    return *p;
}

// Copies bytes into a caller's buffer with a NUL after them, or reports the
// size needed (see "Buffers" in kiln.h).
void write_text(std::string_view text, char* buf, size_t capacity, size_t* n_bytes);

// Copies ids into a caller's array, or reports the count needed.
void write_tokens(const int32_t* ids, size_t count, kiln_token* tokens, int32_t capacity, int32_t* n_tokens);

}  // namespace kiln::capi
