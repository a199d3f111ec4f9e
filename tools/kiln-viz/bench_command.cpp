// kiln-viz bench: kiln-bench's (and llama-bench's) results as tokens/s
// against the swept variable, one line per model, engine and test, so that a
// comparison with llama.cpp is one picture.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/core/printable.h"
#include "formats/io/output_path.h"
#include "formats/io/regular_file.h"
#include "plot/colour_map.h"
#include "plot/line_chart.h"
#include "tools/common/cli.h"
#include "tools/kiln-viz/commands.h"

namespace kiln::viz {

namespace {

constexpr std::string_view kHelp = R"(usage: kiln-viz bench RESULTS.json[l]... -o CHART.png [--x FIELD] [--title TEXT]

Draws benchmark results as tokens/s (avg_ts) against the variable the run
swept: the first of n_depth, n_threads, type_k, type_v, n_ubatch, n_batch
whose values differ (else the test's own size: n_prompt for pp, n_gen for
tg). Reads kiln-bench's and llama-bench's -o jsonl (one object per line) and
-o json (an array) output; several files may be given. Each model file,
engine (kiln when the result has kiln's `kernels` field, else llama.cpp) and
test (pp, tg, pp+tg) is one line; fields that vary besides the swept one are
added to the line's name. A log axis is used when the rates span more than
20x.

  -o, --output FILE   the PNG to write
      --x FIELD       the field to put on the x axis
      --title TEXT    the chart's title
  -h, --help          show this help
)";

using nlohmann::json;

std::vector<json> read_results(const std::string& path) {
    const std::string text = read_regular_file(path);
    std::vector<json> results;
    const auto take = [&](const json& j, size_t line) {
        if (!j.is_object() || !j.contains("avg_ts") || !j["avg_ts"].is_number())
            fail("bench", "{}{}: not a benchmark result (an object with avg_ts)", path,
                 line > 0 ? fmt::format(" line {}", line) : "");
        results.push_back(j);
    };
    const size_t start = text.find_first_not_of(" \t\r\n");
    if (start == std::string::npos) fail("bench", "{} is empty", path);
    try {
        if (text[start] == '[') {
            for (const json& j : json::parse(text)) take(j, 0);
        } else {
            std::istringstream in(text);
            std::string line;
            for (size_t n = 1; std::getline(in, line); ++n)
                if (line.find_first_not_of(" \t\r") != std::string::npos) take(json::parse(line), n);
        }
    } catch (const json::exception& e) {
        fail("bench", "{} is not kiln-bench or llama-bench JSON: {}", path, e.what());
    }
    return results;
}

std::string field_text(const json& j, const std::string& field) {
    if (!j.contains(field)) return "";
    const json& v = j[field];
    return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string test_name(const json& j) {
    const auto number = [&](const char* f) { return j.contains(f) && j[f].is_number() ? j[f].get<int64_t>() : 0; };
    if (number("n_gen") == 0) return "pp";
    if (number("n_prompt") == 0) return "tg";
    return "pp+tg";
}

}  // namespace

int bench_command(int argc, char** argv) {
    std::vector<std::string> inputs;
    std::string output, x_field, title;
    cli::Args args(argc, argv);
    while (!args.done()) {
        const std::string_view flag = args.next();
        if (flag == "-h" || flag == "--help") {
            fmt::print("{}", kHelp);
            return 0;
        }
        if (flag == "-o" || flag == "--output") output = args.value(flag);
        else if (flag == "--x") x_field = args.value(flag);
        else if (flag == "--title") title = args.value(flag);
        else if (!flag.empty() && flag[0] != '-') inputs.emplace_back(flag);
        else cli::usage_error("unknown argument '{}'", printable(flag));
    }
    if (inputs.empty()) cli::usage_error("a results file is required (kiln-viz bench RESULTS.jsonl -o CHART.png)");
    if (output.empty()) cli::usage_error("an output is required (-o CHART.png)");
    check_output_path(output, "-o");
    std::vector<json> results;
    for (const std::string& path : inputs)
        for (json& j : read_results(path)) results.push_back(std::move(j));

    static const std::vector<std::string> kSwept{"n_depth", "n_threads", "type_k", "type_v", "n_ubatch", "n_batch"};
    const auto distinct = [&](const std::string& field) {
        std::set<std::string> values;
        for (const json& j : results) values.insert(field_text(j, field));
        return values.size();
    };
    if (x_field.empty())
        for (const std::string& f : kSwept)
            if (distinct(f) > 1) {
                x_field = f;
                break;
            }
    const bool own_size = x_field.empty();  // pp against n_prompt, tg against n_gen
    if (!own_size)
        for (const json& j : results)
            if (!j.contains(x_field)) fail("bench", "a result has no field '{}' to put on the x axis", printable(x_field));

    // Categories when the x values are not all numbers (cache types).
    bool numeric = true;
    for (const json& j : results)
        if (!own_size && !j[x_field].is_number()) numeric = false;
    std::vector<std::string> categories;
    if (!numeric) {
        for (const json& j : results) {
            const std::string v = field_text(j, x_field);
            if (std::find(categories.begin(), categories.end(), v) == categories.end()) categories.push_back(v);
        }
    }
    std::vector<std::string> other;  // swept fields besides x: part of the line's name
    for (const std::string& f : kSwept)
        if (f != x_field && distinct(f) > 1) other.push_back(f);

    std::map<std::string, plot::Series> lines;
    std::vector<std::string> order;
    double lo = 1e300, hi = 0;
    for (const json& j : results) {
        const std::string model = std::filesystem::path(field_text(j, "model_filename")).filename().string();
        const std::string engine = j.contains("kernels") ? "kiln" : "llama.cpp";
        std::string name = fmt::format("{} {} {}", model.empty() ? field_text(j, "model_type") : model, engine, test_name(j));
        for (const std::string& f : other) name += fmt::format(" {}={}", f, field_text(j, f));
        double x = 0;
        if (own_size) x = j.value(test_name(j) == "tg" ? "n_gen" : "n_prompt", 0.0);
        else if (numeric) x = j[x_field].get<double>();
        else x = static_cast<double>(std::find(categories.begin(), categories.end(), field_text(j, x_field)) - categories.begin());
        const double y = j["avg_ts"].get<double>();
        if (!lines.contains(name)) {
            order.push_back(name);
            lines[name] = plot::Series{name, {}, {}, plot::series_colour(static_cast<int>(order.size()) - 1), 2.0, true};
        }
        lines[name].x.push_back(x);
        lines[name].y.push_back(y);
        if (y > 0) lo = std::min(lo, y), hi = std::max(hi, y);
    }
    plot::LineChart chart;
    chart.title = title.empty() ? "tokens per second" : title;
    chart.x_label = own_size ? "tokens (prompt for pp, generated for tg)" : x_field;
    chart.y_label = "tokens/s";
    chart.x_categories = categories;
    chart.log_y = hi > 20 * lo;
    if (chart.log_y) chart.y_label += " (log scale)";
    for (const std::string& name : order) {
        plot::Series s = lines[name];
        // Points in x order, so that a line never doubles back.
        std::vector<size_t> idx(s.x.size());
        for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
        std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return s.x[a] < s.x[b]; });
        plot::Series sorted = s;
        for (size_t i = 0; i < idx.size(); ++i) sorted.x[i] = s.x[idx[i]], sorted.y[i] = s.y[idx[i]];
        chart.series.push_back(sorted);
    }
    plot::draw_line_chart(chart).save(output);
    return 0;
}

}  // namespace kiln::viz
