// kiln-perplexity: how well a model predicts a text, llama-perplexity style.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "engine/models/llama.h"
#include "engine/runtime/thread_pool.h"
#include "formats/tokenizer/spm_tokenizer.h"
#include "tools/common/cli.h"

namespace {

constexpr std::string_view kUsage = R"(usage: kiln-perplexity -m MODEL -f TEXT [-c N] [-t N]

Tokenizes the file (no BOS), cuts it into consecutive windows of N tokens,
evaluates each window as one batch, and scores positions 1..N-1 of every window:
the mean negative log-likelihood of each next token. Prints PPL = exp(mean).

  -m, --model FILE      GGUF model
  -f, --file FILE       text to score
  -c, --ctx-size N      window length in tokens (default 512)
      --chunks N        score only the first N windows (default: all)
  -t, --threads N       threads (default: physical cores)
  -h, --help            show this help
)";

struct Options {
    std::string model, text;
    int64_t ctx = 512, chunks = 0, threads = 0;
};

Options parse(int argc, char** argv) {
    using namespace kiln::cli;
    Options o;
    Args args(argc, argv);
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
        } else if (flag == "-t" || flag == "--threads") {
            o.threads = parse_int(flag, args.value(flag), 1, 1024);
        } else {
            usage_error("unknown argument '{}'", flag);
        }
    }
    if (o.model.empty()) usage_error("a model is required (-m MODEL)");
    if (o.text.empty()) usage_error("a text file is required (-f FILE)");
    return o;
}

// -log softmax(logits)[target], computed stably in double.
double negative_log_likelihood(std::span<const float> logits, int32_t target) {
    double top = logits[0];
    for (float l : logits) top = std::max(top, double(l));
    double sum = 0;
    for (float l : logits) sum += std::exp(double(l) - top);
    return std::log(sum) + top - logits[static_cast<size_t>(target)];
}

int run(const Options& o) {
    std::ifstream in(o.text, std::ios::binary);
    if (!in) kiln::fail("io", "cannot open '{}'", o.text);
    std::ostringstream text;
    text << in.rdbuf();

    auto file = std::make_shared<kiln::GgufFile>(kiln::GgufFile::open(o.model));
    const kiln::LlamaModel model(file);
    const kiln::SpmTokenizer tokenizer(*file);
    const std::vector<int32_t> tokens = tokenizer.encode(text.str(), /*add_bos=*/false);
    int64_t windows = static_cast<int64_t>(tokens.size()) / o.ctx;
    if (windows == 0)
        kiln::fail("kiln-perplexity", "{} has {} tokens, fewer than one window of {} (lower -c)", o.text,
                   tokens.size(), o.ctx);
    if (o.chunks > 0) windows = std::min(windows, o.chunks);

    const int threads = o.threads > 0 ? static_cast<int>(o.threads) : kiln::ThreadPool::physical_cores();
    kiln::ThreadPool pool(threads);
    kiln::LlamaContext ctx(model, o.ctx);
    const auto vocab = static_cast<size_t>(model.config().n_vocab);
    fmt::print(stderr, "kiln-perplexity: {} tokens, {} windows of {}, {} threads\n", tokens.size(), windows, o.ctx,
               threads);

    const auto start = std::chrono::steady_clock::now();
    double nll = 0;
    int64_t scored = 0;
    for (int64_t w = 0; w < windows; ++w) {
        const std::span<const int32_t> window(tokens.data() + w * o.ctx, static_cast<size_t>(o.ctx));
        ctx.reset();
        const auto logits = ctx.eval(window, pool, /*all_logits=*/true);
        // Position i's logits predict token i + 1: score tokens 1..N-1 of the window.
        for (int64_t i = 0; i + 1 < o.ctx; ++i) {
            nll += negative_log_likelihood(logits.subspan(static_cast<size_t>(i) * vocab, vocab),
                                           window[static_cast<size_t>(i + 1)]);
            ++scored;
        }
        if (isatty(2)) fmt::print(stderr, "\r[{}/{}] PPL so far {:.4f}", w + 1, windows, std::exp(nll / scored));
    }
    if (isatty(2)) fmt::print(stderr, "\n");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print("PPL = {:.4f} over {} scored tokens ({} windows of {})\n", std::exp(nll / scored), scored, windows,
               o.ctx);
    fmt::print(stderr, "kiln-perplexity: {:.2f} s, {:.1f} tokens/s\n", seconds, windows * o.ctx / seconds);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return kiln::cli::run_tool("kiln-perplexity", [&] { return run(parse(argc, argv)); });
}
