#pragma once
// What every kiln command-line program shares: flag parsing with clear errors,
// and one way to turn failures into one line on stderr and an exit status
// (1 for errors, 2 for usage errors).
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/error.h"
#include "engine/models/kv_cache_types.h"

namespace kiln::cli {

class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void usage_error(fmt::format_string<Args...> format, Args&&... args) {
    throw UsageError(fmt::format(format, std::forward<Args>(args)...));
}

// This process's place in a job that mpirun (Open MPI) or another PMI
// launcher started, from the environment it sets: {0, 1} when run alone.
struct LaunchedRank {
    int rank = 0, size = 1;
};
inline LaunchedRank launched_rank() {
    const auto number = [](const char* name) -> int {
        const char* text = std::getenv(name);
        if (text == nullptr) return -1;
        int value = -1;
        const auto [end, ec] = std::from_chars(text, text + std::strlen(text), value);
        return ec == std::errc() && *end == '\0' ? value : -1;
    };
    for (const auto& [rank, size] : {std::pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                     std::pair{"PMI_RANK", "PMI_SIZE"}}) {
        const int r = number(rank), n = number(size);
        if (n > 1 && r >= 0 && r < n) return {r, n};
    }
    return {};
}

// Runs a tool's body; every failure becomes "<tool>: <message>" on stderr.
// A tool that runs on one process refuses to be one of several ranks: N
// copies of the same job would each write the same files.
inline int run_tool(std::string_view tool, const std::function<int()>& body) {
    if (const LaunchedRank launched = launched_rank(); launched.size > 1) {
        if (launched.rank == 0)
            fmt::print(stderr, "{}: launched as one of {} ranks (mpirun), but {} runs on one process: run it without "
                       "mpirun\n", tool, launched.size, tool);
        return 2;
    }
    try {
        return body();
    } catch (const UsageError& e) {
        fmt::print(stderr, "{}: {} (try --help)\n", tool, e.what());
        return 2;
    } catch (const kiln::Error& e) {
        fmt::print(stderr, "{}: {}\n", tool, e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        fmt::print(stderr, "{}: out of memory\n", tool);
        return 1;
    } catch (const std::exception& e) {
        fmt::print(stderr, "{}: unexpected error: {}\n", tool, e.what());
        return 1;
    }
}

// Walks argv; flags take their value from the next argument.
class Args {
public:
    Args(int argc, char** argv) : argc_(argc), argv_(argv) {}
    bool done() const { return index_ >= argc_; }
    std::string_view next() { return argv_[index_++]; }
    // The next argument without taking it ("" at the end).
    std::string_view peek() const { return done() ? std::string_view() : std::string_view(argv_[index_]); }
    std::string_view value(std::string_view flag) {
        if (done()) usage_error("{} needs a value", flag);
        return next();
    }

private:
    int argc_;
    char** argv_;
    int index_ = 1;
};

inline int64_t parse_int(std::string_view flag, std::string_view text, int64_t min,
                         int64_t max = std::numeric_limits<int64_t>::max()) {
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size())
        usage_error("{} expects an integer, got '{}'", flag, text);
    if (value < min || value > max) {
        if (max == std::numeric_limits<int64_t>::max()) usage_error("{} must be at least {}, got {}", flag, min, value);
        usage_error("{} must be between {} and {}, got {}", flag, min, max, value);
    }
    return value;
}

// A comma-separated flag value's items ("1,2,4" -> "1", "2", "4"; "" -> one empty item).
inline std::vector<std::string_view> split_list(std::string_view list) {
    std::vector<std::string_view> items;
    for (;;) {
        const size_t comma = list.find(',');
        items.push_back(list.substr(0, comma));
        if (comma == std::string_view::npos) break;
        list = list.substr(comma + 1);
    }
    return items;
}

// A comma-separated list of integers in [min, max], each checked by parse_int.
inline std::vector<int64_t> parse_int_list(std::string_view flag, std::string_view list, int64_t min,
                                           int64_t max = std::numeric_limits<int64_t>::max()) {
    std::vector<int64_t> values;
    for (std::string_view item : split_list(list)) values.push_back(parse_int(flag, item, min, max));
    return values;
}

// -ctk/--cache-type-k and -ctv/--cache-type-v, spelled as llama.cpp spells
// them, each on its own: f32, f16 (the default, as llama.cpp's), bf16, q8_0
// or q4_0.
class CacheTypeFlags {
public:
    static constexpr DType kDefault = DType::F16;
    static constexpr const char* kNames = "f32, f16, bf16, q8_0 or q4_0";

    // Takes the flag (and its value) if it is one of these; false otherwise.
    bool parse(std::string_view flag, Args& args) {
        const bool is_k = flag == "-ctk" || flag == "--cache-type-k";
        if (!is_k && flag != "-ctv" && flag != "--cache-type-v") return false;
        const std::string_view text = args.value(flag);
        const std::optional<DType> type = parse_dtype(text);
        if (!type || !kv_cache_type_supported(*type)) usage_error("{} must be {}, got '{}'", flag, kNames, text);
        (is_k ? k_ : v_) = *type;
        return true;
    }
    CacheTypes types() const { return {k_.value_or(kDefault), v_.value_or(kDefault)}; }
    // For a tool that keeps keys and values in one type: the flags must agree.
    DType type() const {
        const CacheTypes t = types();
        if (t.k != t.v)
            usage_error("-ctk {} and -ctv {} differ: this tool keeps keys and values in one type", dtype_name(t.k),
                        dtype_name(t.v));
        return t.k;
    }
    // Whether either flag was given.
    bool given() const noexcept { return k_.has_value() || v_.has_value(); }

private:
    std::optional<DType> k_, v_;
};

inline double parse_float(std::string_view flag, std::string_view text, double min, double max) {
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
        usage_error("{} expects a number, got '{}'", flag, text);
    if (value < min || value > max) usage_error("{} must be between {} and {}, got {}", flag, min, max, value);
    return value;
}

}  // namespace kiln::cli
