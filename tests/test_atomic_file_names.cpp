// The atomic writer's temporary files: a long valid target name still gets a
// temporary name that fits the folder, and the temporaries a killed writer
// left behind (SIGKILL cannot be caught) are removed by the next writer of
// the same target, but never one of a live process or a fresh one.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "formats/io/atomic_file.h"
#include "support/sample_gguf.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

// A PID that no process has now: a child that has exited and been reaped.
pid_t dead_pid() {
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    int status = 0;
    ::waitpid(child, &status, 0);
    return child;
}

void touch(const fs::path& p, std::chrono::seconds age) {
    test::write_file(p, {});
    fs::last_write_time(p, fs::file_time_type::clock::now() - age);
}

}  // namespace

TEST_CASE("a 255-byte target name gets a temporary name that fits the folder", "[io][hostile]") {
    test::TempDir dir;
    for (size_t length : {245u, 250u, 255u}) {
        const fs::path target = dir.path() / std::string(length, 'x');
        AtomicFile file(target);
        CHECK(file.temp_path().filename().native().size() <= 255);
        CHECK(file.temp_path().filename().native().rfind(".xxxx", 0) == 0);
        const std::byte data[2] = {std::byte{1}, std::byte{2}};
        file.write(data);
        file.commit();
        CHECK(test::read_file(target).size() == 2);
    }
}

TEST_CASE("a writer removes stale temporaries of its own target only", "[io][hostile]") {
    test::TempDir dir;
    const fs::path target = dir.path() / "model.gguf";
    const pid_t dead = dead_pid();
    const auto old = std::chrono::seconds(3600);
    const fs::path stale = dir.path() / fmt::format(".model.gguf.tmp.{}.0badcafe", dead);
    const fs::path fresh = dir.path() / fmt::format(".model.gguf.tmp.{}.0000abcd", dead);       // written just now
    const fs::path live = dir.path() / fmt::format(".model.gguf.tmp.{}.12345678", ::getppid());  // a running process
    const fs::path other = dir.path() / fmt::format(".other.gguf.tmp.{}.0badcafe", dead);        // another target's
    const fs::path lookalike = dir.path() / fmt::format(".model.gguf.tmp.{}.notahex!", dead);    // not our pattern
    touch(stale, old);
    touch(fresh, std::chrono::seconds(0));
    touch(live, old);
    touch(other, old);
    touch(lookalike, old);
    {
        AtomicFile file(target);
        file.commit();
    }
    CHECK_FALSE(fs::exists(stale));
    CHECK(fs::exists(fresh));
    CHECK(fs::exists(live));
    CHECK(fs::exists(other));
    CHECK(fs::exists(lookalike));
    CHECK(fs::exists(target));
    CHECK(AtomicFile::remove_stale_temporaries(target, 0) == 1);  // the fresh one, once age does not matter
    CHECK_FALSE(fs::exists(fresh));
}

TEST_CASE("a SIGKILLed writer's temporary is removed by the next write", "[io][hostile]") {
    test::TempDir dir;
    const fs::path target = dir.path() / "log.csv";
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        AtomicFile file(target);
        const std::byte junk[4] = {};
        file.write(junk);
        (void)!::write(ready[1], "x", 1);
        ::pause();  // killed here, mid-write
        ::_exit(0);
    }
    char c = 0;
    REQUIRE(::read(ready[0], &c, 1) == 1);
    ::kill(child, SIGKILL);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    ::close(ready[0]);
    ::close(ready[1]);
    size_t left = 0;
    for (const auto& e : fs::directory_iterator(dir.path())) left += e.path().filename().string().rfind(".log.csv.tmp.", 0) == 0;
    REQUIRE(left == 1);  // SIGKILL cannot be caught: the temporary stays
    CHECK(AtomicFile::remove_stale_temporaries(target, 0) == 1);
    CHECK(fs::is_empty(dir.path()));
}
