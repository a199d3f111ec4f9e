// The default thread count's reading of sysfs (engine/runtime/cpu_topology.h),
// on fake trees laid out as Linux lays out the real ones: an SMT desktop, a
// hybrid Intel laptop (P-cores with SMT, E-cores without), ARM big.LITTLE by
// cpu_capacity, offline CPUs, and files that are missing or garbage.
#include <catch2/catch.hpp>

#include <fstream>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "engine/runtime/cpu_topology.h"
#include "support/sample_gguf.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

using Cpus = std::vector<int>;

Cpus range(int first, int last) {
    Cpus cpus;
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
    return cpus;
}

Cpus join(std::initializer_list<Cpus> parts) {
    Cpus all;
    for (const Cpus& p : parts) all.insert(all.end(), p.begin(), p.end());
    return all;
}

// A sysfs tree in a temporary folder, written file by file.
class FakeSys {
public:
    const fs::path& root() const { return dir_.path(); }

    void write(const fs::path& relative, const std::string& text) const {
        const fs::path path = root() / relative;
        fs::create_directories(path.parent_path());
        std::ofstream(path) << text;
    }
    // cpuN on core `core` of package `package` (as the kernel writes them: a number and a newline).
    void cpu(int n, int package, int core) const {
        const fs::path topology = cpu_dir(n) / "topology";
        write(topology / "physical_package_id", std::to_string(package) + "\n");
        write(topology / "core_id", std::to_string(core) + "\n");
    }
    void capacity(int n, int capacity) const { write(cpu_dir(n) / "cpu_capacity", std::to_string(capacity) + "\n"); }
    void online(const std::string& list) const { write("devices/system/cpu/online", list + "\n"); }
    void hybrid(const std::string& p_cores, const std::string& e_cores) const {
        write("devices/cpu_core/cpus", p_cores + "\n");
        write("devices/cpu_atom/cpus", e_cores + "\n");
    }

private:
    static fs::path cpu_dir(int n) { return fs::path("devices/system/cpu") / ("cpu" + std::to_string(n)); }
    test::TempDir dir_;
};

// 4 cores with 2 hardware threads each, numbered as Intel and AMD desktops are:
// cpu0-3 the first thread of cores 0-3, cpu4-7 the second.
void write_smt_desktop(const FakeSys& sys) {
    for (int cpu = 0; cpu < 8; ++cpu) sys.cpu(cpu, 0, cpu % 4);
    sys.online("0-7");
}

// An Alder Lake laptop (i7-1260P shape): 4 P-cores with SMT (cpu0-7, siblings
// 0+1, 2+3, ...; core ids 0, 4, 8, 12 as the kernel numbers them) and 8
// E-cores without (cpu8-15, core ids 16-23).
void write_hybrid_laptop(const FakeSys& sys) {
    for (int cpu = 0; cpu < 8; ++cpu) sys.cpu(cpu, 0, (cpu / 2) * 4);
    for (int cpu = 8; cpu < 16; ++cpu) sys.cpu(cpu, 0, 8 + cpu);
    sys.online("0-15");
    sys.hybrid("0-7", "8-15");
}

}  // namespace

TEST_CASE("sysfs CPU lists parse, and anything else is no list", "[cpu_budget]") {
    CHECK(parse_cpu_list("0-3,8,10-11\n") == Cpus{0, 1, 2, 3, 8, 10, 11});
    CHECK(parse_cpu_list("5") == Cpus{5});
    CHECK(parse_cpu_list(" 4,0-1 \n") == Cpus{0, 1, 4});  // sorted
    CHECK(parse_cpu_list("0-2,1-3") == Cpus{0, 1, 2, 3});  // each CPU once
    CHECK_FALSE(parse_cpu_list(""));
    CHECK_FALSE(parse_cpu_list("\n"));
    CHECK_FALSE(parse_cpu_list("3-1"));
    CHECK_FALSE(parse_cpu_list("0-"));
    CHECK_FALSE(parse_cpu_list("-1"));
    CHECK_FALSE(parse_cpu_list("1,,2"));
    CHECK_FALSE(parse_cpu_list("0-3,"));
    CHECK_FALSE(parse_cpu_list("cpu0"));
    CHECK_FALSE(parse_cpu_list("0x3"));
    CHECK_FALSE(parse_cpu_list("0-99999999999"));  // garbage, not four billion CPUs to list
}

TEST_CASE("SMT siblings are one core", "[cpu_budget]") {
    FakeSys sys;
    write_smt_desktop(sys);
    CHECK(performance_cores(range(0, 7), sys.root()) == Cpus{0, 1, 2, 3});
    // Only the CPUs given count: two siblings are one core, two cores two.
    CHECK(performance_cores({1, 5}, sys.root()) == Cpus{1});
    CHECK(performance_cores({5, 6}, sys.root()) == Cpus{5, 6});
    // The same core id in another package is another core.
    FakeSys two_sockets;
    for (int cpu = 0; cpu < 4; ++cpu) two_sockets.cpu(cpu, cpu / 2, cpu % 2);
    CHECK(performance_cores(range(0, 3), two_sockets.root()) == Cpus{0, 1, 2, 3});
}

TEST_CASE("on a hybrid Intel CPU only the P-cores count, once each", "[cpu_budget]") {
    FakeSys sys;
    write_hybrid_laptop(sys);
    CHECK(performance_cores(range(0, 15), sys.root()) == Cpus{0, 2, 4, 6});
    CHECK(performance_cores({0, 1, 8, 9, 10}, sys.root()) == Cpus{0});
    // Pinned to E-cores only (taskset -c 8-11): those are what there is.
    CHECK(performance_cores(range(8, 11), sys.root()) == Cpus{8, 9, 10, 11});

    SECTION("without the core-kind lists every core counts") {
        fs::remove_all(sys.root() / "devices/cpu_core");
        fs::remove_all(sys.root() / "devices/cpu_atom");
        CHECK(performance_cores(range(0, 15), sys.root()) == join({{0, 2, 4, 6}, range(8, 15)}));
    }
    SECTION("a P-core list alone (no E-cores listed) is not hybrid") {
        fs::remove_all(sys.root() / "devices/cpu_atom");
        CHECK(performance_cores(range(0, 15), sys.root())->size() == 12);
    }
    SECTION("a core-kind list that is garbage is left out") {
        sys.write("devices/cpu_core/cpus", "P-cores\n");
        CHECK(performance_cores(range(0, 15), sys.root())->size() == 12);
    }
    SECTION("offline P-cores do not count") {
        sys.online("0-3,8-15");  // cores 2 and 3 (cpu4-7) taken offline: the kernel removes their topology
        fs::remove_all(sys.root() / "devices/system/cpu/cpu4/topology");
        fs::remove_all(sys.root() / "devices/system/cpu/cpu5/topology");
        fs::remove_all(sys.root() / "devices/system/cpu/cpu6/topology");
        fs::remove_all(sys.root() / "devices/system/cpu/cpu7/topology");
        CHECK(performance_cores(range(0, 15), sys.root()) == Cpus{0, 2});
    }
}

TEST_CASE("on ARM the cores under half the largest cpu_capacity are efficiency cores", "[cpu_budget]") {
    SECTION("big.LITTLE: 4 Cortex-A55 and 4 Cortex-A76") {
        FakeSys sys;
        for (int cpu = 0; cpu < 8; ++cpu) {
            sys.cpu(cpu, 0, cpu);
            sys.capacity(cpu, cpu < 4 ? 446 : 1024);
        }
        sys.online("0-7");
        CHECK(performance_cores(range(0, 7), sys.root()) == Cpus{4, 5, 6, 7});
        CHECK(performance_cores(range(0, 3), sys.root()) == Cpus{0, 1, 2, 3});  // pinned to the little ones
    }
    SECTION("three tiers: prime and middle cores count, little ones do not") {
        FakeSys sys;
        const int capacities[8] = {325, 325, 325, 870, 870, 870, 870, 1024};
        for (int cpu = 0; cpu < 8; ++cpu) {
            sys.cpu(cpu, 0, cpu);
            sys.capacity(cpu, capacities[cpu]);
        }
        CHECK(performance_cores(range(0, 7), sys.root()) == Cpus{3, 4, 5, 6, 7});
    }
    SECTION("equal capacities: every core") {
        FakeSys sys;
        for (int cpu = 0; cpu < 4; ++cpu) {
            sys.cpu(cpu, 0, cpu);
            sys.capacity(cpu, 1024);
        }
        CHECK(performance_cores(range(0, 3), sys.root()) == Cpus{0, 1, 2, 3});
    }
    SECTION("a capacity missing or garbage on one CPU leaves capacities out") {
        FakeSys sys;
        for (int cpu = 0; cpu < 4; ++cpu) {
            sys.cpu(cpu, 0, cpu);
            sys.capacity(cpu, cpu < 2 ? 400 : 1024);
        }
        sys.write("devices/system/cpu/cpu0/cpu_capacity", "big\n");
        CHECK(performance_cores(range(0, 3), sys.root()) == Cpus{0, 1, 2, 3});
        sys.capacity(0, 400);
        fs::remove(sys.root() / "devices/system/cpu/cpu1/cpu_capacity");
        CHECK(performance_cores(range(0, 3), sys.root()) == Cpus{0, 1, 2, 3});
        sys.capacity(1, 0);
        CHECK(performance_cores(range(0, 3), sys.root()) == Cpus{0, 1, 2, 3});
        sys.capacity(1, 400);
        CHECK(performance_cores(range(0, 3), sys.root()) == Cpus{2, 3});
    }
}

TEST_CASE("a topology that cannot be read is no answer, so the caller counts logical CPUs", "[cpu_budget]") {
    FakeSys sys;
    write_smt_desktop(sys);
    SECTION("no tree at all") { CHECK_FALSE(performance_cores(range(0, 7), sys.root() / "absent")); }
    SECTION("a CPU without topology that the online list does not excuse") {
        fs::remove_all(sys.root() / "devices/system/cpu/cpu6/topology");
        CHECK_FALSE(performance_cores(range(0, 7), sys.root()));
        sys.online("0-5,7");  // offline: left out, the rest counted
        CHECK(performance_cores(range(0, 7), sys.root()) == Cpus{0, 1, 2, 3});
    }
    SECTION("a core id that is not a number") {
        sys.write("devices/system/cpu/cpu3/topology/core_id", "three\n");
        CHECK_FALSE(performance_cores(range(0, 7), sys.root()));
    }
    SECTION("an empty core id") {
        sys.write("devices/system/cpu/cpu3/topology/core_id", "");
        CHECK_FALSE(performance_cores(range(0, 7), sys.root()));
    }
    SECTION("an online list that is garbage filters nothing") {
        sys.online("all of them");
        CHECK(performance_cores(range(0, 7), sys.root()) == Cpus{0, 1, 2, 3});
    }
    SECTION("no CPUs given") { CHECK_FALSE(performance_cores({}, sys.root())); }
}
