#pragma once
// What every kiln command-line program shares: flag parsing with clear errors,
// and one way to turn failures into one line on stderr and an exit status
// (1 for errors, 2 for usage errors).
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
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

// Runs a tool's body; every failure becomes "<tool>: <message>" on stderr.
inline int run_tool(std::string_view tool, const std::function<int()>& body) {
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
