#pragma once
// Checking that an action fails with one clear kiln::Error line.
#include <catch2/catch.hpp>

#include <functional>
#include <string>

#include "engine/core/error.h"

namespace kiln::test {

// The message of the kiln::Error that `action` throws (checked to be one
// line); fails the test when it throws none.
inline std::string error_of(const std::function<void()>& action) {
    try {
        action();
    } catch (const Error& e) {
        const std::string message = e.what();
        CHECK(message.find('\n') == std::string::npos);
        return message;
    }
    FAIL("no kiln::Error was thrown");
    return {};
}

}  // namespace kiln::test

// Checks that evaluating expr throws a kiln::Error whose message contains fragment.
#define REQUIRE_ERROR(expr, fragment)                                               \
    do {                                                                            \
        const std::string message_ = ::kiln::test::error_of([&] { (void)(expr); }); \
        INFO(message_);                                                             \
        CHECK(message_.find(fragment) != std::string::npos);                        \
    } while (0)
