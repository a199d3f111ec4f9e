#pragma once
// kiln's one exception type. Thrown at I/O and graph-building boundaries; every
// command-line tool catches it and prints what() as one line on stderr.
//
// The message reads "[component] what is wrong (expected vs got); hint", e.g.
//   [gguf] model.gguf: tensor 'output.weight' ends at byte 9000 but the file has 8000 bytes
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace kiln {

class Error : public std::runtime_error {
public:
    Error(std::string_view component, std::string_view message)
        : std::runtime_error(fmt::format("[{}] {}", component, message)),
          component_(component) {}

    const std::string& component() const noexcept { return component_; }

private:
    std::string component_;
};

// Throws kiln::Error with a fmt-style message.
template <typename... Args>
[[noreturn]] void fail(std::string_view component, fmt::format_string<Args...> format, Args&&... args) {
    throw Error(component, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace kiln
