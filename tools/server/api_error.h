#pragma once
// The errors kiln-server answers with, shaped as OpenAI's (and llama-server's):
//   {"error": {"message": "...", "type": "invalid_request_error", "code": 400}}
// An ApiError carries its HTTP status; the type follows from it.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace kiln::server {

class ApiError : public std::runtime_error {
public:
    ApiError(int status, const std::string& message) : std::runtime_error(message), status_(status) {}
    int status() const noexcept { return status_; }

private:
    int status_;
};

template <typename... Args>
[[noreturn]] void bad_request(fmt::format_string<Args...> format, Args&&... args) {
    throw ApiError(400, fmt::format(format, std::forward<Args>(args)...));
}

// OpenAI's error type for an HTTP status ("invalid_request_error" for 400, ...).
std::string error_type(int status);
nlohmann::json error_json(int status, const std::string& message);

}  // namespace kiln::server
