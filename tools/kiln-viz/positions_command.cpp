// kiln-viz positions: the position signal a model uses, as a picture and as
// numbers: the sinusoidal table of an encoder-decoder, the learned position
// embeddings of a GPT, or the RoPE rotation frequencies of the Llama family
// (with Llama 3.1's rope_freqs factors and linear or YaRN scaling).
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/printable.h"
#include "engine/kernels/rope_spec.h"
#include "engine/models/architectures.h"
#include "engine/models/transformer.h"
#include "formats/checkpoint/npz_writer.h"
#include "formats/gguf/gguf_file.h"
#include "formats/io/output_path.h"
#include "plot/colour_map.h"
#include "plot/heatmap.h"
#include "plot/line_chart.h"
#include "tools/common/cli.h"
#include "tools/kiln-viz/commands.h"

namespace kiln::viz {

namespace {

constexpr std::string_view kHelp = R"(usage: kiln-viz positions -m MODEL -o PE.png [--npz PE.npz]

Draws the position signal of a model:
  transformer  the sinusoidal table PE[pos, 2i] = sin(pos / 10000^(2i/d)),
               PE[pos, 2i+1] = cos(...), positions down, dimensions across
               (as in "Attention Is All You Need"); npz: `table` [n_ctx, dim]
  gpt2         the learned position embeddings position_embd.weight, the same
               way; npz: `table` [n_ctx, dim]
  llama family the RoPE rotation frequency of every rotated pair (radians per
               position, log scale): the base frequencies base^(-2i/n_rot), and
               the ones the model uses after linear or YaRN scaling and Llama
               3.1's rope_freqs factors (npz: `base`, `scaled` [n_rot/2]), or
               Phi-3's LongRoPE factor sets (npz: `short`, `long`)

  -m, --model FILE    GGUF model
  -o, --output FILE   the PNG to write
      --npz FILE      also the numbers
  -h, --help          show this help
)";

std::vector<float> tensor_floats(const GgufTensor& t) {
    const TypeTraits& traits = type_traits(t.type);
    if (traits.to_float == nullptr) fail("positions", "{} is {}, which kiln cannot read as numbers", t.name, traits.name);
    std::vector<float> out(t.elements);
    traits.to_float(t.data.data(), out.data(), static_cast<int64_t>(t.elements));
    return out;
}

void write_table(const std::string& npz_path, const std::vector<float>& table, int64_t rows, int64_t cols) {
    if (npz_path.empty()) return;
    NpzWriter npz(npz_path);
    const int64_t shape[] = {rows, cols};
    npz.add_float32("table", shape, table);
    npz.commit();
}

// Draws the table (before any file is written), then writes the npz and the picture.
void table_outputs(const std::string& output, const std::string& npz_path, const std::vector<float>& table, int64_t rows,
                   int64_t cols, const std::string& title) {
    const plot::Picture picture =
        plot::draw_heatmap(plot::Matrix{rows, cols, table}, {title, "position", "dimension", {}, {}, plot::Scale::Signed});
    write_table(npz_path, table, rows, cols);
    picture.save(output);
}

double number_or(const GgufFile& f, const std::string& key, double fallback) {
    return f.find(key) != nullptr ? f.get_number(key) : fallback;
}

int rope_frequencies(const GgufFile& file, const std::string& arch, const std::string& output, const std::string& npz_path,
                     const std::string& name) {
    const int64_t dim = file.get_int(arch + ".embedding_length");
    const int64_t heads = file.get_int(arch + ".attention.head_count");
    const int64_t head_dim = file.find(arch + ".attention.key_length") != nullptr
                                 ? file.get_int(arch + ".attention.key_length")
                                 : dim / heads;
    kernels::RopeSpec s;
    s.head_dim = head_dim;
    s.n_rot = file.find(arch + ".rope.dimension_count") != nullptr ? file.get_int(arch + ".rope.dimension_count") : head_dim;
    s.freq_base = static_cast<float>(number_or(file, arch + ".rope.freq_base", 10000.0));
    std::string scaling = "none";
    if (file.find(arch + ".rope.scaling.type") != nullptr) scaling = file.get_string(arch + ".rope.scaling.type");
    if (scaling != "none") {
        if (scaling != "linear" && scaling != "yarn") fail("positions", "rope scaling '{}' is not one kiln runs", printable(scaling));
        s.freq_scale = static_cast<float>(1.0 / file.get_number(arch + ".rope.scaling.factor"));
        if (scaling == "yarn") {
            s.ext_factor = 1.0f;
            s.n_ctx_orig = file.get_int(arch + ".rope.scaling.original_context_length");
        }
    }
    // The frequencies as the model uses them: each divided by its factor where
    // the file has factors (Llama 3.1's rope_freqs; Phi-3's LongRoPE short and
    // long sets, the long one once the context passes the trained one), then
    // scaled as the rope keys say.
    struct FactorSet {
        const char* tensor;
        const char* array;  // its npz name
        const char* legend;
    };
    static constexpr FactorSet kSets[] = {
        {"rope_freqs.weight", "scaled", "as the model uses them"},
        {"rope_factors_short.weight", "short", "LongRoPE short factors"},
        {"rope_factors_long.weight", "long", "LongRoPE long factors"},
    };
    const int64_t pairs = s.n_rot / 2;
    const kernels::YarnRange range = kernels::yarn_range(s);
    const auto frequencies = [&](const std::vector<float>& factors) {
        std::vector<float> out;
        for (int64_t i = 0; i < pairs; ++i) {
            const double theta =
                std::pow(static_cast<double>(s.freq_base), -2.0 * static_cast<double>(i) / static_cast<double>(s.n_rot));
            const double factor = factors.empty() ? 1.0 : factors[static_cast<size_t>(i)];
            out.push_back(static_cast<float>(kernels::scaled_rope_angle(s, range, i, theta / factor)));
        }
        return out;
    };
    const auto series = [&](const std::string& legend, const std::vector<float>& values, int colour) {
        plot::Series line{legend, {}, {}, plot::series_colour(colour), 2.0};
        for (int64_t i = 0; i < pairs; ++i)
            line.x.push_back(static_cast<double>(i)), line.y.push_back(values[static_cast<size_t>(i)]);
        return line;
    };
    std::vector<std::pair<std::string, std::vector<float>>> arrays;
    std::vector<float> base;
    for (int64_t i = 0; i < pairs; ++i)
        base.push_back(static_cast<float>(
            std::pow(static_cast<double>(s.freq_base), -2.0 * static_cast<double>(i) / static_cast<double>(s.n_rot))));
    arrays.emplace_back("base", base);
    plot::LineChart chart;
    chart.series.push_back(series("base^(-2i/n_rot)", base, 0));
    std::string sets;
    for (const FactorSet& set : kSets) {
        const GgufTensor* t = file.find_tensor(set.tensor);
        if (t == nullptr) continue;
        const std::vector<float> factors = tensor_floats(*t);
        if (static_cast<int64_t>(factors.size()) != pairs)
            fail("positions", "{} has {} factors for {} rotated pairs", set.tensor, factors.size(), pairs);
        arrays.emplace_back(set.array, frequencies(factors));
        chart.series.push_back(series(set.legend, arrays.back().second, static_cast<int>(chart.series.size())));
        const std::string what = std::string_view(set.array) == "scaled" ? ", rope_freqs" : ", LongRoPE factors";
        if (sets.find(what) == std::string::npos) sets += what;
    }
    if (arrays.size() == 1) {  // no factors: the scaled frequencies, drawn when the scaling changes them
        arrays.emplace_back("scaled", frequencies({}));
        if (arrays.back().second != base) chart.series.push_back(series("as the model uses them", arrays.back().second, 1));
    }
    chart.title = fmt::format("{}: RoPE frequencies, base {:g}, {} rotated dimensions{}{}", name, s.freq_base, s.n_rot,
                              sets, scaling == "none" ? "" : ", " + scaling + " scaling");
    chart.x_label = "rotated pair i";
    chart.y_label = "radians per position (log scale)";
    chart.log_y = true;
    const plot::Picture picture = plot::draw_line_chart(chart);
    if (!npz_path.empty()) {
        NpzWriter npz(npz_path);
        const int64_t shape[] = {pairs};
        for (const auto& [array, values] : arrays) npz.add_float32(array, shape, values);
        npz.commit();
    }
    picture.save(output);
    return 0;
}

}  // namespace

int positions_command(int argc, char** argv) {
    std::string model, output, npz_path;
    cli::Args args(argc, argv);
    while (!args.done()) {
        const std::string_view flag = args.next();
        if (flag == "-h" || flag == "--help") {
            fmt::print("{}", kHelp);
            return 0;
        }
        if (flag == "-m" || flag == "--model") model = args.value(flag);
        else if (flag == "-o" || flag == "--output") output = args.value(flag);
        else if (flag == "--npz") npz_path = args.value(flag);
        else cli::usage_error("unknown argument '{}'", printable(flag));
    }
    if (model.empty()) cli::usage_error("a model is required (-m MODEL)");
    if (output.empty()) cli::usage_error("an output is required (-o PE.png)");
    check_output_path(output, "-o");
    if (!npz_path.empty()) check_output_path(npz_path, "--npz");
    const auto file = std::make_shared<const GgufFile>(GgufFile::open(model));
    const std::string name = std::filesystem::path(model).filename().string();
    const std::string arch = check_model(*file);
    if (arch == "transformer") {
        const std::unique_ptr<TransformerModel> m = load_seq2seq(file);
        const TransformerConfig& c = m->config();
        table_outputs(output, npz_path, m->positions_table(), c.n_ctx, c.dim,
                   fmt::format("{}: sinusoidal positions, {} positions x {} dimensions", name, c.n_ctx, c.dim));
        return 0;
    }
    if (const GgufTensor* t = file->find_tensor("position_embd.weight")) {
        if (t->dims.size() != 2) fail("positions", "position_embd.weight has {} dimensions, not 2", t->dims.size());
        const auto cols = static_cast<int64_t>(t->dims[0]), rows = static_cast<int64_t>(t->dims[1]);
        const std::vector<float> table = tensor_floats(*t);
        table_outputs(output, npz_path, table, rows, cols,
                   fmt::format("{}: learned position embeddings, {} positions x {} dimensions", name, rows, cols));
        return 0;
    }
    if (file->find(arch + ".rope.freq_base") != nullptr || file->find(arch + ".rope.dimension_count") != nullptr ||
        arch == "llama" || arch == "qwen2" || arch == "gemma" || arch == "gemma2" || arch == "phi3" || arch == "minicpm")
        return rope_frequencies(*file, arch, output, npz_path, name);
    fail("positions", "{} ({}) has no position signal kiln-viz knows", model, arch);
}

}  // namespace kiln::viz
