// kiln: generates text with a model, llama.cpp-style flags.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "engine/models/llama.h"
#include "engine/runtime/sampler.h"
#include "engine/runtime/thread_pool.h"
#include "formats/tokenizer/spm_tokenizer.h"
#include "formats/tokenizer/utf8.h"
#include "tools/common/cli.h"

namespace {

constexpr std::string_view kUsage = R"(usage: kiln -m MODEL [-p PROMPT | -f FILE] [options]

Generates text: the prompt is printed, then the continuation, token by token.
Timings go to stderr.

  -m, --model FILE          GGUF model (llama architecture)
  -p, --prompt TEXT         prompt (default: empty, generate from BOS alone)
  -f, --file FILE           read the prompt from a file
  -n, --n-predict N         tokens to generate (default 128); stops earlier at EOS
  -t, --threads N           threads (default: physical cores)
  -c, --ctx-size N          context size in tokens (default: the model's, at most 4096)
      --temp T              temperature (default 0.8; 0 = greedy)
      --top-k N             keep the N most likely tokens (default 40; 0 = off)
      --top-p P             keep the smallest set with probability >= P (default 0.95; 1 = off)
      --min-p P             drop tokens below P x the top probability (default 0.05; 0 = off)
      --repeat-penalty F    penalize recent tokens (default 1.0 = off)
      --repeat-last-n N     how many recent tokens to penalize (default 64; -1 = all)
  -s, --seed N              random seed (default: random, printed on stderr)
  -h, --help                show this help
)";

struct Options {
    std::string model;
    std::string prompt;
    int64_t n_predict = 128;
    int64_t threads = 0;
    int64_t ctx = 0;
    kiln::SamplerParams sampling;
    bool seed_given = false;
};

std::string read_text_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) kiln::fail("io", "cannot open '{}'", path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

Options parse(int argc, char** argv) {
    using namespace kiln::cli;
    Options o;
    Args args(argc, argv);
    bool prompt_given = false;
    while (!args.done()) {
        const std::string_view flag = args.next();
        if (flag == "-h" || flag == "--help") {
            fmt::print("{}", kUsage);
            std::exit(0);
        } else if (flag == "-m" || flag == "--model") {
            o.model = args.value(flag);
        } else if (flag == "-p" || flag == "--prompt") {
            o.prompt = args.value(flag);
            prompt_given = true;
        } else if (flag == "-f" || flag == "--file") {
            if (prompt_given) usage_error("give either -p or -f, not both");
            o.prompt = read_text_file(std::string(args.value(flag)));
            prompt_given = true;
        } else if (flag == "-n" || flag == "--n-predict") {
            o.n_predict = parse_int(flag, args.value(flag), 0, 1 << 24);
        } else if (flag == "-t" || flag == "--threads") {
            o.threads = parse_int(flag, args.value(flag), 1, 1024);
        } else if (flag == "-c" || flag == "--ctx-size") {
            o.ctx = parse_int(flag, args.value(flag), 1, 1 << 20);
        } else if (flag == "--temp") {
            o.sampling.temperature = static_cast<float>(parse_float(flag, args.value(flag), 0, 100));
        } else if (flag == "--top-k") {
            o.sampling.top_k = static_cast<int32_t>(parse_int(flag, args.value(flag), 0, 1 << 30));
        } else if (flag == "--top-p") {
            o.sampling.top_p = static_cast<float>(parse_float(flag, args.value(flag), 0, 1));
        } else if (flag == "--min-p") {
            o.sampling.min_p = static_cast<float>(parse_float(flag, args.value(flag), 0, 1));
        } else if (flag == "--repeat-penalty") {
            o.sampling.repeat_penalty = static_cast<float>(parse_float(flag, args.value(flag), 0.01, 100));
        } else if (flag == "--repeat-last-n") {
            o.sampling.repeat_last_n = static_cast<int32_t>(parse_int(flag, args.value(flag), -1, 1 << 24));
        } else if (flag == "-s" || flag == "--seed") {
            o.sampling.seed = static_cast<uint64_t>(parse_int(flag, args.value(flag), 0));
            o.seed_given = true;
        } else {
            usage_error("unknown argument '{}'", flag);
        }
    }
    if (o.model.empty()) usage_error("a model is required (-m MODEL)");
    return o;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int generate(const Options& o) {
    using clock = std::chrono::steady_clock;
    if (!kiln::utf8_valid(o.prompt)) kiln::fail("kiln", "the prompt is not valid UTF-8");

    const auto load_start = clock::now();
    auto file = std::make_shared<kiln::GgufFile>(kiln::GgufFile::open(o.model));
    const kiln::LlamaModel model(file);
    const kiln::SpmTokenizer tokenizer(*file);
    const int64_t n_ctx = o.ctx > 0 ? o.ctx : std::min<int64_t>(model.config().n_ctx_train, 4096);
    const int threads = o.threads > 0 ? static_cast<int>(o.threads) : kiln::ThreadPool::physical_cores();
    kiln::ThreadPool pool(threads);
    kiln::LlamaContext ctx(model, n_ctx);
    const double load_seconds = seconds_since(load_start);

    std::vector<int32_t> tokens = tokenizer.encode(o.prompt, /*add_bos=*/true);
    if (tokens.empty()) tokens.push_back(tokenizer.bos());
    if (static_cast<int64_t>(tokens.size()) > n_ctx)
        kiln::fail("kiln", "the prompt is {} tokens, longer than the context of {} (raise -c)", tokens.size(), n_ctx);
    if (static_cast<int64_t>(tokens.size()) + o.n_predict > n_ctx)
        kiln::fail("kiln", "the prompt ({} tokens) and -n {} do not fit the context of {} (raise -c or lower -n)",
                   tokens.size(), o.n_predict, n_ctx);

    kiln::SamplerParams sampling = o.sampling;
    if (!o.seed_given) sampling.seed = std::random_device{}();
    kiln::Sampler sampler(sampling);
    fmt::print(stderr, "kiln: {} ({} parameters, {:.1f} MiB), {} threads, context {}, seed {}\n", o.model,
               model.parameter_count(), model.weight_bytes() / 1048576.0, threads, n_ctx, sampling.seed);

    std::fputs(o.prompt.c_str(), stdout);
    std::fflush(stdout);
    const auto prompt_start = clock::now();
    const auto prompt_tokens = static_cast<int64_t>(tokens.size());
    std::span<const float> logits = ctx.eval(tokens, pool);
    const double prompt_seconds = seconds_since(prompt_start);

    kiln::Utf8Stream stream;
    const auto gen_start = clock::now();
    int64_t generated = 0;
    bool at_start = o.prompt.empty();
    while (generated < o.n_predict) {
        const int32_t next = sampler.sample(logits, tokens);
        if (next == tokenizer.eos()) break;
        tokens.push_back(next);
        ++generated;
        std::string piece = tokenizer.piece(next);
        // With no prompt, the first word's space prefix is the tokenizer's, not the text's.
        if (at_start && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
        at_start = at_start && piece.empty();
        std::fputs(stream.feed(piece).c_str(), stdout);
        std::fflush(stdout);
        if (generated < o.n_predict) logits = ctx.eval(std::span(&tokens.back(), 1), pool);
    }
    std::fputs(stream.flush().c_str(), stdout);
    std::fputs("\n", stdout);
    std::fflush(stdout);
    const double gen_seconds = seconds_since(gen_start);
    fmt::print(stderr, "kiln: load {:.3f} s | prompt {} tokens, {:.1f} tokens/s | generation {} tokens, {:.1f} tokens/s\n",
               load_seconds, prompt_tokens, prompt_tokens / prompt_seconds, generated,
               generated > 0 ? generated / gen_seconds : 0.0);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return kiln::cli::run_tool("kiln", [&] { return generate(parse(argc, argv)); });
}
