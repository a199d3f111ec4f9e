#include "tools/server/server_options.h"

#include <fmt/format.h>

#include <cstdlib>
#include <sstream>

#include "formats/chat/named_templates.h"
#include "formats/io/regular_file.h"
#include "tools/common/batch_flags.h"
#include "tools/common/cli.h"
#include "tools/common/gpu_flags.h"
#include "tools/common/placement_flags.h"
#include "tools/common/sampling_flags.h"
#include "tools/common/version.h"

namespace kiln::server {

namespace {

constexpr std::string_view kUsage = R"(usage: kiln-server -m MODEL [options]

Serves a decoder-only model over HTTP with OpenAI's API (POST
/v1/chat/completions, /v1/completions; GET /v1/models), llama-server's extra
endpoints (/health, /tokenize, /detokenize, /apply-template, /slots) and a chat
page at /. Requests in -np slots advance together, one batched step at a time
(continuous batching); more requests wait in a queue.

  -m, --model FILE            GGUF model (llama, qwen2, gemma, phi3, gpt2, ...)
      --host ADDR             address to listen on (default 127.0.0.1: this machine only)
      --port N                port (default 8080; 0 picks a free one, printed on stderr)
  -c, --ctx-size N            context of all slots together; each slot gets N / np tokens
                              (default: the model's, at most 4096, for each slot)
  -np, --parallel N           slots: requests generated at the same time (default 1)
  -t, --threads N             threads of the engine (default: physical performance cores)
      --threads-http N        threads serving connections (default: 2 x np + 16)
  -b, --batch-size N          logical batch (default 2048); -ub, --ubatch-size N: physical batch
                              (default 512). A step evaluates at most min(-b, -ub) prompt tokens
                              over all slots: long prompts go in chunks so replies keep flowing
  -n, --n-predict N           max_tokens of a request that gives none (default -1: until the
                              slot's context is full)
  --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n, --presence-penalty,
  --frequency-penalty, -l/--logit-bias ID+B, -s/--seed N
                              what a request that leaves the field out gets (llama-server's
                              defaults: 0.8, 40, 0.95, 0.05, 1.0, 64, 0, 0, none, random)
      --api-key KEY           require "Authorization: Bearer KEY" on every endpoint but /health
                              and the chat page (may repeat: any of the keys)
      --api-key-file FILE     the same, one key per line
  -cb, --cont-batching        accepted: batching is always continuous (-nocb is refused)
      --no-webui              no chat page at /
  -to, --timeout N            a connection's read and write timeout in seconds (default 600)
      --chat-template T       chat template instead of the model's: a name llama.cpp knows
                              (chatml, llama3, gemma, phi3, ...; kiln --help lists them) or a
                              Jinja template text
      --chat-template-file F  Jinja chat template from a file instead of the model's
      --no-warmup             accepted: kiln runs no warm-up pass
  -fa, --flash-attn, --jinja  accepted: one attention kernel; chat templates are always Jinja
  -ngl, -mg, -sm, -ts         llama.cpp's GPU flags: accepted and ignored with a note (CPU only)
  -ctk, --cache-type-k TYPE   KV cache type: f32, f16, bf16, q8_0 or q4_0 (default f16); keys
  -ctv, --cache-type-v TYPE   and values share one type, so -ctk and -ctv must agree
  -a, --alias NAME            model id reported by /v1/models (default: the file's name)
      --max-body-bytes N      largest request body accepted (default 8388608); larger: 413
      --no-mmap               read the weights into memory instead of computing from the file mapping
      --mlock                 keep the weights in RAM, never paged out (warns when RLIMIT_MEMLOCK refuses)
      --version               print the version, git commit, build and kernel sets
  -h, --help                  show this help
)";

}  // namespace

ServerOptions parse_server_options(int argc, char** argv) {
    using namespace kiln::cli;
    ServerOptions o;
    Args args(argc, argv);
    CacheTypeFlags cache_type;
    GpuFlags gpu;
    BatchFlags batch;
    std::string chat_template_value;
    SamplingFlags sampling(SamplerParams{});
    while (!args.done()) {
        const std::string_view flag = args.next();
        if (flag == "-h" || flag == "--help") {
            fmt::print("{}", kUsage);
            std::exit(0);
        } else if (flag == "--version") {
            print_version("kiln-server");
            std::exit(0);
        } else if (flag == "-m" || flag == "--model") {
            o.model = args.value(flag);
        } else if (flag == "--host") {
            o.host = args.value(flag);
        } else if (flag == "--port") {
            o.port = static_cast<int>(parse_int(flag, args.value(flag), 0, 65535));
        } else if (flag == "-c" || flag == "--ctx-size") {
            o.ctx = parse_int(flag, args.value(flag), 0, 1 << 24);
        } else if (flag == "-np" || flag == "--parallel") {
            o.parallel = parse_int(flag, args.value(flag), 1, 256);
        } else if (flag == "-t" || flag == "--threads") {
            o.threads = parse_int(flag, args.value(flag), 1, 1024);
        } else if (flag == "--threads-http") {
            o.http_threads = parse_int(flag, args.value(flag), 1, 1024);
        } else if (flag == "-n" || flag == "--n-predict") {
            o.n_predict = parse_int(flag, args.value(flag), -1, 1 << 24);
        } else if (flag == "--api-key") {
            o.api_keys.emplace_back(args.value(flag));
            if (o.api_keys.back().empty()) usage_error("--api-key must not be empty");
        } else if (flag == "--api-key-file") {
            // One key per line, as llama-server's; blank lines are skipped.
            const std::string path(args.value(flag));
            std::istringstream lines(kiln::read_regular_file(path));
            const size_t before = o.api_keys.size();
            for (std::string line; std::getline(lines, line);) {
                while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
                if (!line.empty()) o.api_keys.push_back(line);
            }
            if (o.api_keys.size() == before) usage_error("--api-key-file {} holds no key", path);
        } else if (flag == "-cb" || flag == "--cont-batching") {
            // Always on: every step advances all the slots' requests together.
        } else if (flag == "-nocb" || flag == "--no-cont-batching") {
            usage_error("{}: kiln-server always batches continuously (use -np 1 for one request at a time)", flag);
        } else if (flag == "--no-webui") {
            o.web_ui = false;
        } else if (flag == "-to" || flag == "--timeout") {
            o.timeout_seconds = parse_int(flag, args.value(flag), 1, 86400);
        } else if (flag == "--chat-template-file") {
            o.chat_template_file = args.value(flag);
        } else if (flag == "-a" || flag == "--alias") {
            o.alias = args.value(flag);
        } else if (flag == "--max-body-bytes") {
            o.max_body_bytes = static_cast<size_t>(parse_int(flag, args.value(flag), 1024, int64_t(1) << 32));
        } else if (flag == "--chat-template") {
            chat_template_value = args.value(flag);
        } else if (flag == "--no-warmup" || flag == "-fa" || flag == "--flash-attn" || flag == "--jinja") {
            // No effect in kiln: no warm-up pass, one attention kernel, and chat templates are always Jinja.
        } else if (cache_type.parse(flag, args) || gpu.parse(flag, args) || batch.parse(flag, args) ||
                   sampling.parse(flag, args) ||
                   parse_placement_flag(flag, o.placement)) {
        } else {
            usage_error("unknown argument '{}'", flag);
        }
    }
    if (o.model.empty()) usage_error("a model is required (-m MODEL)");
    if (o.ctx > 0 && o.ctx < o.parallel)
        usage_error("-c {} is less than one token for each of the {} slots (-np)", o.ctx, o.parallel);
    o.cache_type = cache_type.type();
    o.sampling = sampling.params();
    o.seed_given = sampling.seed_given();
    o.batch = batch.tokens_per_eval();
    if (!chat_template_value.empty()) {
        if (!o.chat_template_file.empty()) usage_error("give either --chat-template or --chat-template-file, not both");
        o.chat_template = kiln::chat_template_from_flag(chat_template_value);
    }
    gpu.note("kiln-server");
    return o;
}

}  // namespace kiln::server
