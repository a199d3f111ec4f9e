// kiln-perplexity: how well a model predicts a text, llama-perplexity style.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "engine/models/architectures.h"
#include "engine/runtime/cpu_budget.h"
#include "engine/runtime/thread_pool.h"
#include "formats/io/regular_file.h"
#include "formats/tokenizer/tokenizer.h"
#include "tools/common/batch_flags.h"
#include "tools/common/check_tensors.h"
#include "tools/common/cli.h"
#include "tools/common/gpu_flags.h"
#include "tools/common/prompt_file.h"
#include "tools/common/kl_base.h"
#include "tools/common/kl_stats.h"
#include "tools/common/layer_split_flag.h"
#include "tools/common/mpi_world.h"
#include "engine/distributed/layer_pipeline.h"
#include "tools/common/placement_flags.h"
#include "tools/common/vocabulary_fit.h"
#include "tools/common/version.h"

namespace {

constexpr std::string_view kUsage = R"(usage: kiln-perplexity -m MODEL -f TEXT [-c N] [-t N] [--score-all] [--kl-base FILE [--kl-divergence]]

Scores a text the way llama-perplexity does: tokenizes it whole (with BOS when
the vocabulary adds one), cuts it into windows of N tokens, puts BOS in place
of each window's first token (when the vocabulary adds one), evaluates each
window from an empty cache and scores only its second half: positions N/2 ..
N-2 predicting the next token, which all see at least N/2 tokens of context.
Prints the running estimate after each window ([1]12.3456,[2]...) on stdout
and "Final estimate: PPL = x +/- y" on stderr, y from the spread of the
negative log-likelihoods (as llama-perplexity), then "PPL = ..." on stdout.

  --score-all           kiln's earlier method instead: no BOS, and positions
                        1..N-1 of every window are scored (more tokens scored,
                        but the first ones with little context)

Quantization quality, as llama-perplexity measures it: run the base model (e.g.
F32) with --kl-base FILE to save its logits, then the quantized model with
--kl-base FILE --kl-divergence (same text, -c, --chunks and --score-all) to
print llama-perplexity's statistics: mean PPL(Q), PPL(base), their ratio and
ln ratio with uncertainties, mean KL divergence from the base distribution to
the model's with percentiles, the probability difference of the right token
(Δp) with percentiles and RMS, and how often both put the same token first.

  -m, --model FILE      GGUF model
  -f, --file FILE       text to score ("-": standard input)
  -c, --ctx-size N      window length in tokens (default 512, as llama-perplexity, or the
                        model's context when it is shorter)
  -b, --batch-size N    logical batch (default 2048); -ub, --ubatch-size N: physical batch
                        (default 512); each window is evaluated in pieces of min(-b, -ub) tokens
      --chunks N        score only the first N windows (default: all)
      --kl-base FILE    without --kl-divergence: save this model's logits to FILE
      --kl-divergence   compare this model with the base logits in --kl-base FILE
  -t, --threads N       threads (default: the physical performance cores the
                        process may use)
      --check-tensors   check every tensor's data first (NaN/inf values or
                        block scales), as llama.cpp's --check-tensors
  -ctk, --cache-type-k TYPE  type of the cached keys: f32, f16, bf16, q8_0 or q4_0
                             (default f16, as llama.cpp's)
  -ctv, --cache-type-v TYPE  type of the cached values, the same choices (default f16)
      --no-warmup       accepted: kiln runs no warm-up pass
  -fa, --flash-attn     accepted: kiln has one attention kernel
  -ngl, -mg, -sm, -ts   llama.cpp's GPU flags: accepted and ignored with a note (CPU only)
      --no-mmap         read the weights into memory instead of computing from the file mapping
      --mlock           keep the weights in RAM, never paged out (warns when RLIMIT_MEMLOCK refuses)
Under mpirun -np N the windows are split across the ranks; rank 0 prints the
same figures, to the last digit, as one process (docs/distributed.md).

      --layer-split [P,...]  under mpirun: split the model's blocks across the
                        ranks instead (for a model too big for one machine):
                        each rank holds its blocks' weights and KV cache only,
                        in proportion to P (one number per rank; default: equal
                        bytes per rank)

  -h, --help            show this help
      --version         print the version, git commit, build and kernel sets
)";

constexpr int64_t kDefaultCtx = 512;  // llama-perplexity's

struct Options {
    std::string model, text;
    int64_t ctx = 0, chunks = 0, threads = 0;  // ctx 0: kDefaultCtx, or the model's context when shorter
    int64_t tokens_per_eval = kiln::cli::BatchFlags::kDefaultUbatch;
    std::string kl_base;
    bool kl_divergence = false;
    bool score_all = false;
    bool check_tensors = false;
    kiln::CacheTypes cache_types;
    kiln::WeightPlacement placement;
    kiln::cli::LayerSplitFlag layer_split;
};

Options parse(int argc, char** argv) {
    using namespace kiln::cli;
    Options o;
    Args args(argc, argv);
    CacheTypeFlags cache_type;
    GpuFlags gpu;
    BatchFlags batch;
    while (!args.done()) {
        const std::string_view flag = args.next();
        if (flag == "-h" || flag == "--help") {
            fmt::print("{}", kUsage);
            std::exit(0);
        } else if (flag == "--version") {
            kiln::cli::print_version("kiln-perplexity");
            std::exit(0);
        } else if (flag == "-m" || flag == "--model") {
            o.model = args.value(flag);
        } else if (flag == "-f" || flag == "--file") {
            o.text = args.value(flag);
        } else if (flag == "-c" || flag == "--ctx-size") {
            o.ctx = parse_int(flag, args.value(flag), 2, 1 << 20);
        } else if (flag == "--chunks") {
            o.chunks = parse_int(flag, args.value(flag), 1);
        } else if (flag == "--kl-base") {
            o.kl_base = args.value(flag);
        } else if (flag == "--check-tensors") {
            o.check_tensors = true;
        } else if (flag == "--score-all") {
            o.score_all = true;
        } else if (flag == "--kl-divergence") {
            o.kl_divergence = true;
        } else if (flag == "-t" || flag == "--threads") {
            o.threads = parse_int(flag, args.value(flag), 1, 1024);
        } else if (flag == "--no-warmup" || flag == "-fa" || flag == "--flash-attn") {
            // No effect in kiln: no warm-up pass, one attention kernel.
        } else if (o.layer_split.parse(flag, args)) {
        } else if (cache_type.parse(flag, args) || gpu.parse(flag, args) || batch.parse(flag, args) ||
                   parse_placement_flag(flag, o.placement)) {
        } else {
            usage_error("unknown argument '{}'", flag);
        }
    }
    if (o.model.empty()) usage_error("a model is required (-m MODEL)");
    if (o.text.empty()) usage_error("a text file is required (-f FILE)");
    if (o.kl_divergence && o.kl_base.empty()) usage_error("--kl-divergence needs the base logits (--kl-base FILE)");
    o.cache_types = cache_type.types();
    o.tokens_per_eval = batch.tokens_per_eval();
    gpu.note("kiln-perplexity");
    return o;
}

// log-softmax of a row, in double: log p_i = l_i - max - log(sum exp(l_j - max)).
void log_softmax(std::span<const float> logits, std::vector<double>& out) {
    double top = logits[0];
    for (float l : logits) top = std::max(top, double(l));
    double sum = 0;
    for (float l : logits) sum += std::exp(double(l) - top);
    const double log_sum = std::log(sum) + top;
    out.resize(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) out[i] = double(logits[i]) - log_sum;
}

int run(const Options& o, kiln::mpi::World& world) {
    const bool leader = world.leader();
    if (world.size() > 1 && !o.layer_split.on && (o.kl_divergence || !o.kl_base.empty()))
        throw kiln::cli::UsageError("--kl-base needs the logits on one process: run it alone, or with --layer-split");
    auto file = std::make_shared<kiln::GgufFile>(kiln::GgufFile::open(o.model));
    if (o.check_tensors) kiln::cli::check_tensors(*file);
    // A layer split: rank 0 runs everything below through the stages; the
    // other ranks evaluate their blocks when asked, until rank 0's model is
    // gone. They never see the text.
    const bool split_layers = o.layer_split.on && world.size() > 1;
    const std::string text = !split_layers || leader ? kiln::cli::read_prompt_file(o.text) : std::string();
    if (world.size() > 1) {
        // Every rank must score the same text with the same model.
        world.require_same(fmt::format("model file ({})", o.model), kiln::file_content_hash(o.model));
        if (!split_layers)
            world.require_same(fmt::format("text ({})", o.text), kiln::content_hash(std::as_bytes(std::span(text))));
    }

    std::string plan;
    const std::unique_ptr<kiln::CausalLm> model =
        split_layers ? kiln::load_layer_split(file, o.placement, world, o.layer_split.weights, &plan)
                     : kiln::load_causal_lm(file, o.placement);
    if (split_layers && !leader) {
        kiln::ThreadPool pool(o.threads > 0 ? static_cast<int>(o.threads) : kiln::default_thread_count());
        kiln::serve_layer_split(*model, world, pool);
        return 0;
    }
    if (split_layers)
        fmt::print(stderr, "kiln-perplexity: layer split: {}\n",
                   plan);
    // llama-perplexity's 512, or the model's whole context when it is shorter.
    const int64_t n_ctx_train = model->info().n_ctx_train;
    const int64_t ctx = o.ctx > 0 ? o.ctx : n_ctx_train > 0 ? std::min<int64_t>(kDefaultCtx, n_ctx_train) : kDefaultCtx;
    if (leader && o.ctx == 0 && ctx < kDefaultCtx)
        fmt::print(stderr, "kiln-perplexity: windows of {} tokens, the model's context (-c sets another)\n", ctx);
    if (!o.score_all && ctx / 2 + 1 >= ctx)
        kiln::fail("kiln-perplexity", "-c {} leaves no position to score in the second half of a window; use -c 3 or "
                   "more, or --score-all", ctx);
    const auto tokenizer = kiln::load_tokenizer(*file);
    kiln::tools::check_vocabulary_fits(*tokenizer, model->info().n_vocab, file->name());
    // llama-perplexity's method tokenizes with BOS (when the vocabulary adds
    // one) and later puts BOS at the start of every window.
    const bool with_bos = !o.score_all && tokenizer->add_bos() && tokenizer->bos() >= 0;
    std::vector<int32_t> tokens = tokenizer->encode(text, kiln::EncodeOptions{.add_bos = with_bos, .parse_special = false});
    int64_t windows = static_cast<int64_t>(tokens.size()) / ctx;
    if (o.score_all && windows == 0)
        kiln::fail("kiln-perplexity", "{} has {} tokens, fewer than one window of {} (lower -c)", o.text,
                   tokens.size(), ctx);
    // As llama-perplexity, which refuses fewer than two windows' worth.
    if (!o.score_all && static_cast<int64_t>(tokens.size()) < 2 * ctx)
        kiln::fail("kiln-perplexity", "{} has {} tokens, fewer than two windows of {} (lower -c)", o.text,
                   tokens.size(), ctx);
    if (o.chunks > 0) windows = std::min(windows, o.chunks);
    // The windows as evaluated: BOS replaces each one's first token. Targets
    // are never position 0, so the replaced tokens are never scored.
    if (with_bos)
        for (int64_t w = 0; w < windows; ++w) tokens[static_cast<size_t>(w * ctx)] = tokenizer->bos();
    // Scored rows: row i's logits predict token i + 1.
    const int64_t first_row = o.score_all ? 0 : ctx / 2;
    const auto vocab = static_cast<size_t>(model->info().n_vocab);
    const kiln::tools::KlBaseShape shape{vocab, static_cast<uint64_t>(ctx), static_cast<uint64_t>(windows)};

    // The base must have been computed on exactly these windows.
    std::unique_ptr<kiln::tools::KlBase> base;
    std::unique_ptr<kiln::tools::KlBaseWriter> writer;
    if (o.kl_divergence) {
        base = std::make_unique<kiln::tools::KlBase>(o.kl_base);
        const auto& b = base->shape();
        if (b.n_vocab != shape.n_vocab || b.ctx != shape.ctx || b.windows != shape.windows)
            kiln::fail("kl-base",
                       "{} holds {} windows of {} over a vocabulary of {}; this run has {} windows of {} over {} "
                       "(use the same text, -c and --chunks as the base run)",
                       base->name(), b.windows, b.ctx, b.n_vocab, windows, ctx, vocab);
        for (uint64_t i = 0; i < shape.token_count(); ++i)
            if (base->token(i) != tokens[i])
                kiln::fail("kl-base", "{} was computed on other tokens (token {} is {} there, {} here): not the same "
                           "text, tokenizer or --score-all", base->name(), i, base->token(i), tokens[i]);
    } else if (!o.kl_base.empty()) {
        writer = std::make_unique<kiln::tools::KlBaseWriter>(o.kl_base, shape, tokens);
    }

    const int threads = o.threads > 0 ? static_cast<int>(o.threads) : kiln::default_thread_count();
    kiln::ThreadPool pool(threads, kiln::LoadAdaptation::follow_free_cpus);
    const auto session = model->new_session(ctx, 1, kiln::Executor::Mode::Fast, o.cache_types);
    if (leader)
        fmt::print(stderr, "kiln-perplexity: {} tokens, {} windows of {}, {} threads{}, KV cache {}/{}\n", tokens.size(),
                   windows, ctx, threads, world.size() > 1 ? fmt::format(" on each of {} ranks", world.size()) : "",
                   kiln::dtype_name(o.cache_types.k), kiln::dtype_name(o.cache_types.v));

    const auto start = std::chrono::steady_clock::now();
    double nll = 0, nll2 = 0;
    int64_t scored = 0;
    kiln::tools::KlStats divergence;
    std::vector<float> base_logits, window_logits;
    const int64_t piece = o.tokens_per_eval;
    std::vector<double> logp, base_logp;
    const auto per_window = static_cast<size_t>(ctx - 1 - first_row);  // scored tokens of a window
    // Window w's scored tokens' log-probabilities, added in order: the sums
    // (and so every printed digit) are the same whichever rank computed them.
    const auto account = [&](int64_t w, std::span<const double> target_logp) {
        for (const double lp : target_logp) {
            nll -= lp;
            nll2 += lp * lp;
            ++scored;
        }
        if (!o.score_all && !base) {
            fmt::print("[{}]{:.4f},", w + 1, std::exp(nll / static_cast<double>(scored)));
            std::fflush(stdout);
        } else if (isatty(2)) {
            fmt::print(stderr, "\r[{}/{}] PPL so far {:.4f}", w + 1, windows, std::exp(nll / scored));
        }
    };
    // Under mpirun, this rank's windows; their log-probabilities go to rank 0.
    const int shares = split_layers ? 1 : world.size();  // ranks that score windows
    const kiln::Share mine = kiln::share_of(windows, split_layers ? 0 : world.rank(), shares);
    std::vector<double> my_logp;
    my_logp.reserve(static_cast<size_t>(mine.size()) * per_window);
    std::vector<double> window_logp;
    for (int64_t w = mine.begin; w < mine.end; ++w) {
        const std::span<const int32_t> window(tokens.data() + w * ctx, static_cast<size_t>(ctx));
        session->reset();
        std::span<const float> logits;
        if (piece >= ctx) {
            logits = session->eval(window, pool, /*all_logits=*/true);
        } else {
            // -b/-ub smaller than the window: its logits gathered piece by piece.
            window_logits.resize(static_cast<size_t>(ctx) * vocab);
            for (size_t at = 0; at < window.size(); at += static_cast<size_t>(piece)) {
                const size_t n = std::min(static_cast<size_t>(piece), window.size() - at);
                const auto part = session->eval(window.subspan(at, n), pool, /*all_logits=*/true);
                std::copy(part.begin(), part.end(), window_logits.begin() + static_cast<std::ptrdiff_t>(at * vocab));
            }
            logits = window_logits;
        }
        if (writer) writer->add_window(logits);
        if (base) base->window_logits(static_cast<uint64_t>(w), base_logits);
        window_logp.clear();
        for (int64_t i = first_row; i + 1 < ctx; ++i) {
            const auto row = logits.subspan(static_cast<size_t>(i) * vocab, vocab);
            const auto target = static_cast<size_t>(window[static_cast<size_t>(i + 1)]);
            log_softmax(row, logp);
            window_logp.push_back(logp[target]);
            if (base) {
                log_softmax(std::span(base_logits).subspan(static_cast<size_t>(i) * vocab, vocab), base_logp);
                divergence.add(base_logp, logp, target);
            }
        }
        if (shares == 1) account(w, window_logp);
        else my_logp.insert(my_logp.end(), window_logp.begin(), window_logp.end());
    }
    if (shares > 1) {
        if (!leader) {
            world.send(std::as_bytes(std::span(my_logp)), 0);
            return 0;
        }
        std::vector<double> all(static_cast<size_t>(windows) * per_window);
        std::copy(my_logp.begin(), my_logp.end(), all.begin());
        for (int r = 1; r < world.size(); ++r) {
            const kiln::Share theirs = kiln::share_of(windows, r, world.size());
            world.receive(std::as_writable_bytes(std::span(all).subspan(static_cast<size_t>(theirs.begin) * per_window,
                                                                        static_cast<size_t>(theirs.size()) * per_window)),
                          r);
        }
        for (int64_t w = 0; w < windows; ++w)
            account(w, std::span(all).subspan(static_cast<size_t>(w) * per_window, per_window));
    }
    if (!o.score_all && !base) fmt::print("\n");
    else if (isatty(2)) fmt::print(stderr, "\n");
    if (writer) writer->finish();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // llama-perplexity's uncertainty: the standard error of the mean
    // negative log-likelihood, carried through exp.
    const double n = static_cast<double>(scored);
    const double mean = nll / n, var = nll2 / n - mean * mean;
    const double ppl = std::exp(mean);
    const double ppl_error = var > 0 && scored > 1 ? ppl * std::sqrt(var / (n - 1)) : 0.0;
    if (!o.score_all) fmt::print(stderr, "Final estimate: PPL = {:.4f} +/- {:.5f}\n", ppl, ppl_error);
    fmt::print("PPL = {:.4f} +/- {:.5f} over {} scored tokens ({} windows of {})\n", ppl, ppl_error, scored, windows,
               ctx);
    if (writer) fmt::print("saved the logits of {} windows to {}\n", windows, o.kl_base);
    if (base) divergence.print(stdout);
    fmt::print(stderr, "kiln-perplexity: {:.2f} s, {:.1f} tokens/s\n", seconds, windows * ctx / seconds);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return kiln::mpi::run_on_ranks("kiln-perplexity",
                                   [&](kiln::mpi::World& world) { return run(parse(argc, argv), world); });
}
