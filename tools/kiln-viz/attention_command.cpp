// kiln-viz attention: runs a prompt (and -n greedily generated tokens) and
// draws the attention probabilities of every layer and head, or of one.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "engine/core/printable.h"
#include "engine/models/architectures.h"
#include "engine/models/attention_weights.h"
#include "engine/models/decoder_lm.h"
#include "engine/models/transformer.h"
#include "engine/runtime/cpu_budget.h"
#include "engine/runtime/thread_pool.h"
#include "formats/checkpoint/npz_writer.h"
#include "formats/gguf/gguf_file.h"
#include "formats/io/output_path.h"
#include "formats/tokenizer/tokenizer.h"
#include "formats/tokenizer/utf8.h"
#include "plot/heatmap.h"
#include "tools/common/cli.h"
#include "tools/common/vocabulary_fit.h"
#include "tools/kiln-viz/commands.h"
#include "tools/kiln-viz/token_labels.h"

namespace kiln::viz {

namespace {

constexpr std::string_view kHelp = R"(usage: kiln-viz attention -m MODEL -p PROMPT [-n N] -o MAP.png [--npz WEIGHTS.npz]
                          [--layer L --head H [--kind K]] [-c N] [-t N]

Runs the prompt, then N greedily generated tokens, and records the attention
probabilities of every layer and head over the whole sequence (one pass; each
token attends as it did when it was generated). The PNG is a grid of maps,
one per layer (rows) and head (columns); with --layer and --head, one large
map with the tokens along both axes (queries down, keys across). Masked
positions (a causal map's upper triangle, outside a sliding window) are
exactly 0 and drawn white; every row sums to 1.

For an encoder-decoder model (architecture "transformer") the prompt is the
source (EOS appended, as kiln does); the decoder starts from BOS and
generates N tokens greedily (default: until EOS). The grid shows the
encoder's, the decoder's and the cross-attention; --kind picks one of
encoder, decoder or cross (default cross) for --layer/--head.

  -m, --model FILE    GGUF model
  -p, --prompt TEXT   the prompt (or the source)
  -n N                tokens to generate greedily (default 0 for decoder-only
                      models; until EOS for an encoder-decoder)
  -o, --output FILE   the PNG to write
      --npz FILE      also the numbers: float32 arrays [layers, heads, queries,
                      keys] named `self` (decoder-only) or `encoder`, `decoder`
                      and `cross`, and the token strings as Unicode arrays
                      `tokens` (or `source_tokens` and `target_tokens`)
      --layer L       one map: layer L (from 0) ...
      --head H        ... head H (from 0)
      --kind K        encoder-decoder: encoder, decoder or cross (default cross)
  -c, --ctx-size N    the context (default: the model's, at most 4096)
  -t, --threads N     threads (default: the physical performance cores)
  -h, --help          show this help
)";

struct Options {
    std::string model, prompt, output, npz, kind;
    bool prompt_given = false;
    int64_t n_predict = -1;  // -1: the default
    std::optional<int64_t> layer, head;
    int64_t ctx = 0, threads = 0;
};

Options parse(int argc, char** argv) {
    Options o;
    cli::Args args(argc, argv);
    while (!args.done()) {
        const std::string_view flag = args.next();
        if (flag == "-h" || flag == "--help") {
            fmt::print("{}", kHelp);
            std::exit(0);
        }
        if (flag == "-m" || flag == "--model") o.model = args.value(flag);
        else if (flag == "-p" || flag == "--prompt") o.prompt = args.value(flag), o.prompt_given = true;
        else if (flag == "-n" || flag == "--n-predict") o.n_predict = cli::parse_int(flag, args.value(flag), 0, 1 << 20);
        else if (flag == "-o" || flag == "--output") o.output = args.value(flag);
        else if (flag == "--npz") o.npz = args.value(flag);
        else if (flag == "--layer") o.layer = cli::parse_int(flag, args.value(flag), 0);
        else if (flag == "--head") o.head = cli::parse_int(flag, args.value(flag), 0);
        else if (flag == "--kind") o.kind = args.value(flag);
        else if (flag == "-c" || flag == "--ctx-size") o.ctx = cli::parse_int(flag, args.value(flag), 1);
        else if (flag == "-t" || flag == "--threads") o.threads = cli::parse_int(flag, args.value(flag), 1, 1024);
        else cli::usage_error("unknown argument '{}'", printable(flag));
    }
    if (o.model.empty()) cli::usage_error("a model is required (-m MODEL)");
    if (!o.prompt_given) cli::usage_error("a prompt is required (-p PROMPT)");
    if (o.output.empty()) cli::usage_error("an output is required (-o MAP.png)");
    if (o.layer.has_value() != o.head.has_value()) cli::usage_error("--layer and --head go together");
    if (!o.kind.empty() && o.kind != "encoder" && o.kind != "decoder" && o.kind != "cross")
        cli::usage_error("--kind must be encoder, decoder or cross, got '{}'", printable(o.kind));
    if (!utf8_valid(o.prompt)) fail("attention", "the prompt is not valid UTF-8");
    return o;
}

void check_map_choice(const Options& o, int64_t layers, int64_t heads, const char* what) {
    if (!o.layer) return;
    if (*o.layer >= layers) fail("attention", "--layer {} is out of range: the {} has layers 0..{}", *o.layer, what, layers - 1);
    if (*o.head >= heads) fail("attention", "--head {} is out of range: the {} has heads 0..{}", *o.head, what, heads - 1);
}

// The probabilities are kept whole (layers x heads x queries x keys floats):
// refuse, before any work, a sequence whose maps would not fit in 2 GiB.
void check_record_size(int64_t layers, int64_t heads, int64_t queries, int64_t keys) {
    constexpr double kLimit = 2.0 * 1024 * 1024 * 1024;
    const double bytes = 4.0 * static_cast<double>(layers) * static_cast<double>(heads) * static_cast<double>(queries) *
                         static_cast<double>(keys);
    if (bytes > kLimit)
        fail("attention", "{} layers x {} heads x {} x {} probabilities need {:.1f} GiB (at most 2): use a shorter prompt or -n",
             layers, heads, queries, keys, bytes / (1024.0 * 1024 * 1024));
}

std::vector<int64_t> shape_of(const AttentionMaps& m) { return {m.layers, m.heads, m.queries, m.keys}; }

plot::Matrix one_map(const AttentionMaps& m, int64_t layer, int64_t head) {
    plot::Matrix out{m.queries, m.keys, {}};
    const auto first = m.p.begin() + (layer * m.heads + head) * m.queries * m.keys;
    out.values.assign(first, first + m.queries * m.keys);
    return out;
}

plot::MapGrid grid_of(const AttentionMaps& m, std::string title) {
    plot::MapGrid grid{std::move(title), m.layers, m.heads, {}, {}};
    for (int64_t l = 0; l < m.layers; ++l)
        for (int64_t h = 0; h < m.heads; ++h) {
            grid.maps.push_back(one_map(m, l, h));
            grid.labels.push_back(fmt::format("L{} H{}", l, h));
        }
    return grid;
}

int32_t argmax(std::span<const float> logits) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

int run_decoder(const Options& o, const std::shared_ptr<const GgufFile>& file, ThreadPool& pool) {
    const std::unique_ptr<CausalLm> loaded = load_causal_lm(file);
    const auto* lm = dynamic_cast<const DecoderLm*>(loaded.get());
    if (lm == nullptr) fail("attention", "{} is not a decoder-only model kiln can record", o.model);
    const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(*file);
    tools::check_vocabulary_fits(*tokenizer, lm->info().n_vocab, file->name());
    const DecoderShape& shape = lm->arch().shape();
    const int64_t n_ctx = o.ctx > 0 ? o.ctx : std::min<int64_t>(shape.n_ctx_train, 4096);
    const int64_t n_heads = file->get_int(lm->arch().name() + ".attention.head_count");
    check_map_choice(o, shape.n_layers, n_heads, "model");
    std::vector<int32_t> tokens = tokenizer->encode(o.prompt, tokenizer->prompt_options());
    if (tokens.empty()) {
        if (tokenizer->bos() < 0) fail("attention", "the prompt is empty and the vocabulary has no BOS token to start from");
        tokens.push_back(tokenizer->bos());
    }
    const int64_t n_predict = std::max<int64_t>(o.n_predict, 0);
    if (static_cast<int64_t>(tokens.size()) + n_predict > n_ctx)
        fail("attention", "the prompt ({} tokens) and -n {} do not fit the context of {}", tokens.size(), n_predict, n_ctx);
    const auto n_total = static_cast<int64_t>(tokens.size()) + n_predict;
    check_record_size(shape.n_layers, n_heads, n_total, n_total);
    if (n_predict > 0) {
        const std::unique_ptr<CausalSession> session = lm->new_session(n_ctx, 1, Executor::Mode::Fast, {DType::F32, DType::F32});
        std::span<const float> logits = session->eval(tokens, pool);
        for (int64_t i = 0; i < n_predict; ++i) {
            const int32_t next = argmax(logits);
            tokens.push_back(next);
            if (tokenizer->is_eog(next) || i + 1 == n_predict) break;
            logits = session->eval(std::span(&tokens.back(), 1), pool);
        }
    }
    const AttentionMaps maps = record_decoder_attention(*lm, tokens, pool);
    const std::vector<std::string> texts = token_texts(*tokenizer, tokens);
    // The picture is drawn before any file is written, so a failure writes nothing.
    const std::string name = std::filesystem::path(o.model).filename().string();
    const std::vector<std::string> labels = display_labels(texts);
    const plot::Picture picture =
        o.layer ? plot::draw_heatmap(one_map(maps, *o.layer, *o.head),
                                     {fmt::format("{}: attention, layer {}, head {}", name, *o.layer, *o.head), "query",
                                      "key", labels, labels, plot::Scale::Probability})
                : plot::draw_heatmap_grids(fmt::format("{}: attention of {} tokens, {} layers x {} heads (rows: layers)",
                                                       name, tokens.size(), maps.layers, maps.heads),
                                           {grid_of(maps, "")});
    if (!o.npz.empty()) {
        NpzWriter npz(o.npz);
        const std::vector<int64_t> dims = shape_of(maps);
        npz.add_float32("self", dims, maps.p);
        npz.add_strings("tokens", texts);
        npz.commit();
    }
    picture.save(o.output);
    return 0;
}

int run_seq2seq(const Options& o, const std::shared_ptr<const GgufFile>& file, ThreadPool& pool) {
    const std::unique_ptr<TransformerModel> model = load_seq2seq(file);
    const TransformerConfig& c = model->config();
    const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(*file);
    tools::check_vocabulary_fits(*tokenizer, c.n_vocab, file->name());
    const std::string kind = o.kind.empty() ? "cross" : o.kind;
    check_map_choice(o, kind == "encoder" ? c.n_encoder_layers : c.n_decoder_layers, c.n_heads,
                     kind == "encoder" ? "encoder" : "decoder");
    if (o.prompt.empty()) fail("attention", "the prompt is empty: an encoder-decoder model needs a source text");
    std::vector<int32_t> source = tokenizer->encode(o.prompt, EncodeOptions{});
    source.push_back(c.eos);
    const int64_t n_ctx = o.ctx > 0 ? std::min(o.ctx, c.n_ctx) : c.n_ctx;
    if (static_cast<int64_t>(source.size()) > n_ctx)
        fail("attention", "the source is {} tokens with its EOS, longer than the context of {}", source.size(), n_ctx);
    if (o.n_predict + 1 > n_ctx) fail("attention", "-n {} does not fit the decoder's context of {}", o.n_predict, n_ctx);
    const int64_t n_predict = o.n_predict >= 0 ? o.n_predict : n_ctx - 1;
    const auto n_source = static_cast<int64_t>(source.size());
    check_record_size(std::max(c.n_encoder_layers, c.n_decoder_layers), c.n_heads, std::max(n_source, n_predict + 1),
                      2 * n_source + n_predict + 1);
    std::vector<int32_t> target{c.bos};
    if (n_predict > 0) {
        TransformerSession session(*model, 1, static_cast<int64_t>(source.size()), 1, n_predict + 1);
        const std::vector<std::vector<int32_t>> sources{source};
        session.encode(sources, pool);
        const int32_t slot = 0;
        std::span<const float> logits = session.decode(std::span(&target.back(), 1), std::span(&slot, 1), pool);
        for (int64_t i = 0; i < n_predict; ++i) {
            const int32_t next = argmax(logits);
            target.push_back(next);
            if (next == c.eos || i + 1 == n_predict) break;
            logits = session.decode(std::span(&target.back(), 1), std::span(&slot, 1), pool);
        }
    }
    const Seq2SeqAttention maps = record_seq2seq_attention(*model, source, target, pool);
    const std::vector<std::string> source_texts = token_texts(*tokenizer, source);
    const std::vector<std::string> target_texts = token_texts(*tokenizer, target);
    const std::string name = std::filesystem::path(o.model).filename().string();
    plot::Picture picture;
    if (o.layer) {
        const AttentionMaps& m = kind == "encoder" ? maps.encoder : kind == "decoder" ? maps.decoder : maps.cross;
        const std::vector<std::string> rows = display_labels(kind == "encoder" ? source_texts : target_texts);
        const std::vector<std::string> cols = display_labels(kind == "decoder" ? target_texts : source_texts);
        picture = plot::draw_heatmap(one_map(m, *o.layer, *o.head),
                                     {fmt::format("{}: {} attention, layer {}, head {}", name, kind, *o.layer, *o.head),
                                      kind == "encoder" ? "source (query)" : "target (query)",
                                      kind == "decoder" ? "target (key)" : "source (key)", rows, cols,
                                      plot::Scale::Probability});
    } else {
        picture = plot::draw_heatmap_grids(fmt::format("{}: {} source and {} target tokens, {} heads (rows: layers)", name,
                                                       source.size(), target.size(), c.n_heads),
                                           {grid_of(maps.encoder, "encoder self-attention (source x source)"),
                                            grid_of(maps.decoder, "decoder self-attention (target x target)"),
                                            grid_of(maps.cross, "cross-attention (target x source)")});
    }
    if (!o.npz.empty()) {
        NpzWriter npz(o.npz);
        for (const auto& [array, m] : {std::pair{"encoder", &maps.encoder}, {"decoder", &maps.decoder}, {"cross", &maps.cross}})
            npz.add_float32(array, shape_of(*m), m->p);
        npz.add_strings("source_tokens", source_texts);
        npz.add_strings("target_tokens", target_texts);
        npz.commit();
    }
    picture.save(o.output);
    return 0;
}

}  // namespace

int attention_command(int argc, char** argv) {
    const Options o = parse(argc, argv);
    check_output_path(o.output, "-o");
    if (!o.npz.empty()) check_output_path(o.npz, "--npz");
    const auto file = std::make_shared<const GgufFile>(GgufFile::open(o.model));
    ThreadPool pool(o.threads > 0 ? static_cast<int>(o.threads) : default_thread_count());
    return is_seq2seq(*file) ? run_seq2seq(o, file, pool) : run_decoder(o, file, pool);
}

}  // namespace kiln::viz
