// kiln-perplexity: how well a model predicts a text, llama-perplexity style.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "engine/models/causal_lm.h"
#include "engine/runtime/thread_pool.h"
#include "formats/tokenizer/tokenizer.h"
#include "tools/common/cli.h"
#include "tools/common/kl_base.h"

namespace {

constexpr std::string_view kUsage = R"(usage: kiln-perplexity -m MODEL -f TEXT [-c N] [-t N] [--kl-base FILE [--kl-divergence]]

Tokenizes the file (no BOS), cuts it into consecutive windows of N tokens,
evaluates each window as one batch, and scores positions 1..N-1 of every window:
the mean negative log-likelihood of each next token. Prints PPL = exp(mean).

Quantization quality, as llama-perplexity measures it: run the base model (e.g.
F32) with --kl-base FILE to save its logits, then the quantized model with
--kl-base FILE --kl-divergence (same text, -c and --chunks) to print the
perplexity ratio, the KL divergence from the base distribution to the model's
(mean, max) and how often both put the same token first.

  -m, --model FILE      GGUF model
  -f, --file FILE       text to score
  -c, --ctx-size N      window length in tokens (default 512)
      --chunks N        score only the first N windows (default: all)
      --kl-base FILE    without --kl-divergence: save this model's logits to FILE
      --kl-divergence   compare this model with the base logits in --kl-base FILE
  -t, --threads N       threads (default: physical cores)
  -ctk, --cache-type-k TYPE  KV cache type, f32 or f16 (default f32); keys and values
  -ctv, --cache-type-v TYPE  share one type, so -ctk and -ctv must agree
  -h, --help            show this help
)";

struct Options {
    std::string model, text;
    int64_t ctx = 512, chunks = 0, threads = 0;
    std::string kl_base;
    bool kl_divergence = false;
    kiln::DType cache_type = kiln::DType::F32;
};

Options parse(int argc, char** argv) {
    using namespace kiln::cli;
    Options o;
    Args args(argc, argv);
    CacheTypeFlags cache_type;
    while (!args.done()) {
        const std::string_view flag = args.next();
        if (flag == "-h" || flag == "--help") {
            fmt::print("{}", kUsage);
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
        } else if (flag == "--kl-divergence") {
            o.kl_divergence = true;
        } else if (flag == "-t" || flag == "--threads") {
            o.threads = parse_int(flag, args.value(flag), 1, 1024);
        } else if (cache_type.parse(flag, args)) {
        } else {
            usage_error("unknown argument '{}'", flag);
        }
    }
    if (o.model.empty()) usage_error("a model is required (-m MODEL)");
    if (o.text.empty()) usage_error("a text file is required (-f FILE)");
    if (o.kl_divergence && o.kl_base.empty()) usage_error("--kl-divergence needs the base logits (--kl-base FILE)");
    o.cache_type = cache_type.type();
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

size_t argmax(std::span<const float> v) {
    return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// The comparison with a base model, position by position.
struct Divergence {
    double base_nll = 0, kl_sum = 0, kl_sq_sum = 0, kl_max = 0;
    int64_t same_top = 0, positions = 0;

    // KL(base || model) = sum_i p_base(i) (log p_base(i) - log p_model(i)).
    void add(std::span<const float> base, std::span<const float> model, int32_t target) {
        log_softmax(base, base_logp_);
        log_softmax(model, model_logp_);
        double kl = 0;
        for (size_t i = 0; i < base_logp_.size(); ++i)
            kl += std::exp(base_logp_[i]) * (base_logp_[i] - model_logp_[i]);
        kl = std::max(kl, 0.0);  // rounding can leave -1e-17 for identical rows
        kl_sum += kl;
        kl_sq_sum += kl * kl;
        kl_max = std::max(kl_max, kl);
        base_nll -= base_logp_[static_cast<size_t>(target)];
        same_top += argmax(base) == argmax(model) ? 1 : 0;
        ++positions;
    }
    double mean_kl() const { return kl_sum / static_cast<double>(positions); }
    // Standard error of the mean KL.
    double mean_kl_error() const {
        const double n = static_cast<double>(positions);
        if (positions < 2) return 0.0;
        const double var = (kl_sq_sum / n - mean_kl() * mean_kl()) * n / (n - 1);
        return std::sqrt(std::max(var, 0.0) / n);
    }

private:
    std::vector<double> base_logp_, model_logp_;
};

int run(const Options& o) {
    std::ifstream in(o.text, std::ios::binary);
    if (!in) kiln::fail("io", "cannot open '{}'", o.text);
    std::ostringstream text;
    text << in.rdbuf();

    auto file = std::make_shared<kiln::GgufFile>(kiln::GgufFile::open(o.model));
    const auto model = kiln::load_causal_lm(file);
    const auto tokenizer = kiln::load_tokenizer(*file);
    const std::vector<int32_t> tokens = tokenizer->encode(text.str(), /*add_bos=*/false);
    int64_t windows = static_cast<int64_t>(tokens.size()) / o.ctx;
    if (windows == 0)
        kiln::fail("kiln-perplexity", "{} has {} tokens, fewer than one window of {} (lower -c)", o.text,
                   tokens.size(), o.ctx);
    if (o.chunks > 0) windows = std::min(windows, o.chunks);
    const auto vocab = static_cast<size_t>(model->info().n_vocab);
    const kiln::tools::KlBaseShape shape{vocab, static_cast<uint64_t>(o.ctx), static_cast<uint64_t>(windows)};

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
                       base->name(), b.windows, b.ctx, b.n_vocab, windows, o.ctx, vocab);
        for (uint64_t i = 0; i < shape.token_count(); ++i)
            if (base->token(i) != tokens[i])
                kiln::fail("kl-base", "{} was computed on other tokens (token {} is {} there, {} here): not the same "
                           "text or tokenizer", base->name(), i, base->token(i), tokens[i]);
    } else if (!o.kl_base.empty()) {
        writer = std::make_unique<kiln::tools::KlBaseWriter>(o.kl_base, shape, tokens);
    }

    const int threads = o.threads > 0 ? static_cast<int>(o.threads) : kiln::ThreadPool::physical_cores();
    kiln::ThreadPool pool(threads);
    const auto session = model->new_session(o.ctx, 1, kiln::Executor::Mode::Fast, o.cache_type);
    fmt::print(stderr, "kiln-perplexity: {} tokens, {} windows of {}, {} threads\n", tokens.size(), windows, o.ctx,
               threads);

    const auto start = std::chrono::steady_clock::now();
    double nll = 0;
    int64_t scored = 0;
    Divergence divergence;
    std::vector<float> base_logits;
    std::vector<double> logp;
    for (int64_t w = 0; w < windows; ++w) {
        const std::span<const int32_t> window(tokens.data() + w * o.ctx, static_cast<size_t>(o.ctx));
        session->reset();
        const auto logits = session->eval(window, pool, /*all_logits=*/true);
        if (writer) writer->add_window(logits);
        if (base) base->window_logits(static_cast<uint64_t>(w), base_logits);
        // Position i's logits predict token i + 1: score tokens 1..N-1 of the window.
        for (int64_t i = 0; i + 1 < o.ctx; ++i) {
            const auto row = logits.subspan(static_cast<size_t>(i) * vocab, vocab);
            const int32_t target = window[static_cast<size_t>(i + 1)];
            log_softmax(row, logp);
            nll -= logp[static_cast<size_t>(target)];
            ++scored;
            if (base) divergence.add(std::span(base_logits).subspan(static_cast<size_t>(i) * vocab, vocab), row, target);
        }
        if (isatty(2)) fmt::print(stderr, "\r[{}/{}] PPL so far {:.4f}", w + 1, windows, std::exp(nll / scored));
    }
    if (isatty(2)) fmt::print(stderr, "\n");
    if (writer) writer->finish();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double ppl = std::exp(nll / scored);
    fmt::print("PPL = {:.4f} over {} scored tokens ({} windows of {})\n", ppl, scored, windows, o.ctx);
    if (writer) fmt::print("saved the logits of {} windows to {}\n", windows, o.kl_base);
    if (base) {
        const double base_ppl = std::exp(divergence.base_nll / scored);
        fmt::print("base PPL = {:.4f}\n", base_ppl);
        fmt::print("PPL ratio = {:.6f}\n", ppl / base_ppl);
        fmt::print("mean KL divergence = {:.6e} ± {:.2e}\n", divergence.mean_kl(), divergence.mean_kl_error());
        fmt::print("max KL divergence = {:.6e}\n", divergence.kl_max);
        fmt::print("top-1 agreement = {:.4f}% ({} of {})\n",
                   100.0 * static_cast<double>(divergence.same_top) / static_cast<double>(scored), divergence.same_top,
                   scored);
    }
    fmt::print(stderr, "kiln-perplexity: {:.2f} s, {:.1f} tokens/s\n", seconds, windows * o.ctx / seconds);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return kiln::cli::run_tool("kiln-perplexity", [&] { return run(parse(argc, argv)); });
}
