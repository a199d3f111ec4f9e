// When the system refuses a thread (an address-space or process limit), the
// pool reports it as one kiln error and the tools exit 1 with that line,
// instead of std::terminate (exit 134) from a joinable std::thread.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "engine/core/error.h"
#include "engine/runtime/thread_pool.h"
#include "support/child_process.h"
#include "support/paths.h"
#include "support/run_tool.h"

using namespace kiln;

namespace {

// The process's address space now, in bytes (first field of /proc/self/statm, in pages).
uint64_t address_space_bytes() {
    std::ifstream statm("/proc/self/statm");
    uint64_t pages = 0;
    statm >> pages;
    return pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

TEST_CASE("a thread the system refuses is a kiln error naming asked and started threads", "[thread_pool][hostile]") {
    if (test::under_sanitizer()) {
        WARN("skipped: a sanitizer's shadow memory makes address-space limits meaningless");
        return;
    }
#if !defined(__linux__)
    WARN("skipped: the address space is read from Linux's /proc/self/statm");
    return;
#endif
    if (test::under_emulator()) {
        // qemu-user places the guest's thread stacks in address space it
        // reserved at start, so the limit never bites (every thread starts).
        WARN("skipped: under qemu-user the guest's address space is not the kernel's");
        return;
    }
    // Room for a few 8 MiB thread stacks, not for 1000.
    const int result = test::run_in_child([] {
        const rlim_t limit = address_space_bytes() + (96u << 20);
        const rlimit r{limit, limit};
        if (::setrlimit(RLIMIT_AS, &r) != 0) return 10;
        try {
            ThreadPool pool(1000);
            return 1;  // every thread started: the limit did not bite
        } catch (const Error& e) {
            const std::string m = e.what();
            if (m.rfind("[threads] cannot start 1000 threads: ", 0) != 0) return 2;
            if (m.find(" started, then the system refused another (") == std::string::npos) return 3;
            if (m.find('\n') != std::string::npos) return 4;
        }
        // The threads that did start were stopped and joined: their stacks are free again.
        ThreadPool small(2);
        int calls = 0;
        small.run([&](int ith, int) {
            if (ith == 0) ++calls;
        });
        return calls == 1 ? 0 : 5;
    });
    CHECK(result == 0);
}

TEST_CASE("kiln -t 1000 under an address-space limit exits 1 with one line", "[cli][hostile]") {
    if (test::under_sanitizer()) {
        WARN("skipped: a sanitizer's shadow memory makes address-space limits meaningless");
        return;
    }
    const std::string model = (test::shared_models_dir() / "stories260K.gguf").string();
    const auto run = test::run_tool("kiln", fmt::format("-m {} -p hi -n 4 -t 1000", test::shell_quote(model)),
                                    "ulimit -v 400000 &&");
    INFO("stderr: " << run.err);
    CHECK(run.status == 1);
    CHECK(run.out.empty());
    CHECK(run.err.rfind("kiln: [threads] cannot start 1000 threads: ", 0) == 0);
    CHECK(run.err.find('\n') == run.err.size() - 1);
}
