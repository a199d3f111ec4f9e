#pragma once
// Runs a piece of a test in a forked child, for what must not touch the test
// process itself: lowered resource limits, a narrowed CPU affinity.
#include <functional>

namespace kiln::test {

// Runs body() in a child process and returns its result (0-255), or -1 when
// the child died of a signal. An exception in body() gives 255.
int run_in_child(const std::function<int()>& body);

// Whether the test binary runs under AddressSanitizer or ThreadSanitizer, whose
// shadow memory makes address-space limits meaningless.
constexpr bool under_sanitizer() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
    return true;
#else
    return false;
#endif
#else
    return false;
#endif
}

}  // namespace kiln::test
