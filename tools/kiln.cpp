// kiln: generates text with a model, llama.cpp-style flags. Decoder-only
// models (llama, gpt2) continue the prompt; encoder-decoder models
// (transformer) read the prompt as the source and print its output.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <cmath>
#include <limits>
#include <optional>
#include <numeric>
#include <random>
#include <sstream>

#include "engine/models/architectures.h"
#include "engine/models/transformer.h"
#include "engine/runtime/beam_search.h"
#include "engine/runtime/reply_stream.h"
#include "engine/runtime/sampler.h"
#include "engine/runtime/cpu_budget.h"
#include "engine/runtime/thread_pool.h"
#include "formats/io/regular_file.h"
#include "formats/tokenizer/tokenizer.h"
#include "formats/tokenizer/utf8.h"
#include "formats/chat/conversation.h"
#include "formats/chat/named_templates.h"
#include "formats/session/prompt_cache.h"
#include "tools/common/batch_flags.h"
#include "tools/common/sampling_flags.h"
#include "tools/common/check_tensors.h"
#include "tools/common/cli.h"
#include "tools/common/escapes.h"
#include "tools/common/gpu_flags.h"
#include "tools/common/prompt_file.h"
#include "tools/common/layer_split_flag.h"
#include "tools/common/load_report.h"
#include "tools/common/mpi_world.h"
#include "engine/distributed/layer_pipeline.h"
#include "tools/common/placement_flags.h"
#include "tools/common/vocabulary_fit.h"
#include "tools/kiln/conversation_mode.h"
#include "tools/common/version.h"

namespace {

constexpr std::string_view kUsage = R"(usage: kiln -m MODEL [-p PROMPT | -f FILE] [options]
       kiln -m MODEL -cnv [-sys SYSTEM] [options]

Generates text. A decoder-only model (llama, qwen2, gemma, phi3, gpt2, ...)
continues the prompt: the prompt is printed, then the continuation, token by
token. In conversation mode (-cnv; the default for a model with a chat
template when no prompt is given) it chats: each line you type is a user
message, rendered with the model's chat template, and the reply streams back.
Without a terminal, it reads one message per input line and prints one reply
per line. An encoder-decoder model (transformer) translates the prompt: it
prints "source: <prompt>" and "output: <decoded text>"; its decoding is greedy
unless --temp or --beams is given. Timings go to stderr.

  -m, --model FILE          GGUF model (any architecture kiln runs: README)
  -p, --prompt TEXT         prompt (default: empty, generate from BOS alone)
  -f, --file FILE           read the prompt from a file ("-": standard input); one final newline
                            is dropped, as llama-cli drops it
  -e, --escape              turn \n, \r, \t, \', \", \\ and \xHH in the prompt and -r texts into
                            the characters they name (the default, as llama-cli's)
      --no-escape           take the prompt and -r texts as written
  -n, --n-predict N         tokens to generate (default 128; -1 = no limit, the default per reply
                            in conversation mode; -2 = until the context is full); stops earlier
                            at an end-of-generation token. When the context is full, generation
                            goes on from its last half (but not with -2)
      --ignore-eos          do not stop at end-of-generation tokens (they are never sampled)
  -cnv, --conversation      conversation mode (see above); -no-cnv, --no-conversation: never
  -sys, --system-prompt TEXT  the system message of the conversation
  -r, --reverse-prompt TEXT a reply ends where TEXT appears (TEXT not shown); may repeat
      --chat-template T     the chat template instead of the model's own: a name llama.cpp
                            knows (chatml, llama3, gemma, phi3, ...: --help lists them) or a
                            Jinja template text
      --chat-template-file FILE  a Jinja chat template from a file instead of the model's own
  -t, --threads N           threads (default: the physical performance cores the
                            process may use)
      --check-tensors       check every tensor's data first (NaN/inf values or
                            block scales), as llama.cpp's --check-tensors
  -c, --ctx-size N          context size in tokens (default: the model's, at most 4096)
      --prompt-cache FILE   save the KV cache after the prompt in FILE; a later run whose prompt
                            starts with the same tokens loads it and evaluates only the rest (a
                            file made with another model, -ctk/-ctv or damaged is ignored, noted)
      --prompt-cache-ro     with --prompt-cache: use the file, never write it
  -b, --batch-size N        logical batch: prompt tokens handed to the model at once (default 2048)
  -ub, --ubatch-size N      physical batch: prompt tokens computed at once (default 512); the
                            prompt is evaluated in pieces of min(-b, -ub) tokens
      --no-warmup           accepted: kiln runs no warm-up pass (llama-cli's empty first run)
  -fa, --flash-attn, --jinja  accepted: kiln has one attention kernel and always renders the
                            chat template as Jinja
  -ngl, -mg, -sm, -ts       llama.cpp's GPU flags: accepted and ignored with a note (CPU only)
      --temp T              temperature (default 0.8; 0 = greedy)
      --top-k N             keep the N most likely tokens (default 40; 0 = off)
      --top-p P             keep the smallest set with probability >= P (default 0.95; 1 = off)
      --min-p P             drop tokens below P x the top probability (default 0.05; 0 = off)
      --repeat-penalty F    penalize recent tokens (default 1.0 = off)
      --repeat-last-n N     how many recent tokens to penalize (default 64; -1 = all)
      --presence-penalty F  subtract F from each recent token's logit (default 0 = off)
      --frequency-penalty F subtract F per occurrence among the recent tokens (default 0 = off)
  -l, --logit-bias ID+B     add B to token ID's logit (ID-B subtracts; ID-inf bans it); may repeat
  -s, --seed N              random seed (default or -1: random, printed on stderr)
      --beams K             beam search with K beams instead of sampling (K = 1 is greedy)
      --length-penalty A    beam scores are log-probability / length^A (default 1.0)
      --n-best              with --beams: print every finished hypothesis with its scores
      --no-special          take special tokens written in the prompt ("<|im_end|>") as plain text
  -ctk, --cache-type-k TYPE type of the cached keys: f32, f16, bf16, q8_0 or q4_0 (default f16;
                            decoder-only models; q8_0/q4_0 need a head size that is a multiple of 32)
  -ctv, --cache-type-v TYPE type of the cached values, the same choices (default f16)
      --no-mmap             read the weights into memory instead of computing from the file mapping
      --mlock               keep the weights in RAM, never paged out (warns when RLIMIT_MEMLOCK refuses)
  -v, --verbose             print the load time, peak memory and where the weights are (each copy)
      --layer-split [P,...] under mpirun -np N: split the model's blocks across the ranks, for a
                            model too big for one machine's memory (each rank holds its blocks'
                            weights and KV cache only; rank 0 reads the prompt and prints), in
                            proportion to P (one number per rank; default: equal bytes per rank).
                            Text generation of one sequence (no --beams, --prompt-cache or
                            conversation mode); docs/distributed.md
  -h, --help                show this help
      --version             print the version, git commit, build and kernel sets

Chat template names: )";

struct Options {
    std::string model;
    std::string prompt;
    bool prompt_given = false;
    int64_t n_predict = 128;  // -1: no limit
    bool n_predict_given = false;
    enum class Conversation { Auto, On, Off } conversation = Conversation::Auto;
    std::string system_prompt;
    std::vector<std::string> reverse_prompts;
    std::string chat_template_file;
    std::string chat_template;  // --chat-template: a name resolved to its text, or a text
    bool escape = true;
    int64_t tokens_per_eval = kiln::cli::BatchFlags::kDefaultUbatch;
    bool ignore_eos = false;
    std::string prompt_cache;
    bool prompt_cache_read_only = false;
    int64_t threads = 0;
    int64_t ctx = 0;
    kiln::SamplerParams sampling;
    bool seed_given = false;
    bool temp_given = false;
    int64_t beams = 0;  // 0: sample
    double length_penalty = 1.0;
    bool n_best = false;
    kiln::CacheTypes cache_types{kiln::cli::CacheTypeFlags::kDefault};
    bool cache_types_given = false;
    bool check_tensors = false;
    bool parse_special = true;
    kiln::WeightPlacement placement;
    bool verbose = false;
    kiln::cli::LayerSplitFlag layer_split;
};


Options parse(int argc, char** argv) {
    using namespace kiln::cli;
    Options o;
    Args args(argc, argv);
    bool length_penalty_given = false;
    SamplingFlags sampling(o.sampling);
    bool& prompt_given = o.prompt_given;
    CacheTypeFlags cache_type;
    GpuFlags gpu;
    BatchFlags batch;
    std::string chat_template_value;
    while (!args.done()) {
        const std::string_view flag = args.next();
        if (flag == "-h" || flag == "--help") {
            fmt::print("{}{}\n", kUsage, kiln::named_chat_template_names());
            std::exit(0);
        } else if (flag == "--version") {
            kiln::cli::print_version("kiln");
            std::exit(0);
        } else if (flag == "-m" || flag == "--model") {
            o.model = args.value(flag);
        } else if (flag == "-p" || flag == "--prompt") {
            if (prompt_given) usage_error("give either -p or -f, not both");
            o.prompt = args.value(flag);
            prompt_given = true;
        } else if (flag == "-f" || flag == "--file") {
            if (prompt_given) usage_error("give either -p or -f, not both");
            // Under mpirun (--layer-split) rank 0 alone reads the prompt: the
            // others never see it, and may not have the file or the input.
            const std::string_view file = args.value(flag);
            if (kiln::cli::launched_rank().rank == 0) o.prompt = read_prompt_file(file);
            if (!o.prompt.empty() && o.prompt.back() == '\n') o.prompt.pop_back();
            prompt_given = true;
        } else if (flag == "-e" || flag == "--escape") {
            o.escape = true;
        } else if (flag == "--no-escape") {
            o.escape = false;
        } else if (flag == "--no-warmup" || flag == "-fa" || flag == "--flash-attn" || flag == "--jinja") {
            // No effect in kiln: no warm-up pass, one attention kernel, and chat templates are always Jinja.
        } else if (gpu.parse(flag, args) || batch.parse(flag, args) || sampling.parse(flag, args)) {
        } else if (flag == "-n" || flag == "--n-predict") {
            o.n_predict = parse_int(flag, args.value(flag), -2, 1 << 24);
            o.n_predict_given = true;
        } else if (flag == "--ignore-eos") {
            o.ignore_eos = true;
        } else if (flag == "-cnv" || flag == "--conversation") {
            o.conversation = Options::Conversation::On;
        } else if (flag == "-no-cnv" || flag == "--no-conversation") {
            o.conversation = Options::Conversation::Off;
        } else if (flag == "-sys" || flag == "--system-prompt") {
            o.system_prompt = args.value(flag);
        } else if (flag == "-r" || flag == "--reverse-prompt") {
            o.reverse_prompts.emplace_back(args.value(flag));
            if (o.reverse_prompts.back().empty()) usage_error("-r needs a non-empty text");
        } else if (flag == "--chat-template-file") {
            o.chat_template_file = args.value(flag);
        } else if (flag == "--chat-template") {
            chat_template_value = args.value(flag);
        } else if (flag == "-t" || flag == "--threads") {
            o.threads = parse_int(flag, args.value(flag), 1, 1024);
        } else if (flag == "--check-tensors") {
            o.check_tensors = true;
        } else if (flag == "--prompt-cache") {
            o.prompt_cache = args.value(flag);
            if (o.prompt_cache.empty()) usage_error("--prompt-cache needs a file name");
        } else if (flag == "--prompt-cache-ro") {
            o.prompt_cache_read_only = true;
        } else if (flag == "-c" || flag == "--ctx-size") {
            o.ctx = parse_int(flag, args.value(flag), 1, 1 << 20);
        } else if (flag == "--beams") {
            o.beams = parse_int(flag, args.value(flag), 1, 256);
        } else if (flag == "--length-penalty") {
            o.length_penalty = parse_float(flag, args.value(flag), -10, 10);
            length_penalty_given = true;
        } else if (flag == "--n-best") {
            o.n_best = true;
        } else if (flag == "--no-special") {
            o.parse_special = false;
        } else if (cache_type.parse(flag, args)) {
        } else if (parse_placement_flag(flag, o.placement)) {
        } else if (flag == "-v" || flag == "--verbose") {
            o.verbose = true;
        } else if (o.layer_split.parse(flag, args)) {
        } else {
            usage_error("unknown argument '{}'", flag);
        }
    }
    if (o.model.empty()) usage_error("a model is required (-m MODEL)");
    if (!chat_template_value.empty()) {
        if (!o.chat_template_file.empty()) usage_error("give either --chat-template or --chat-template-file, not both");
        o.chat_template = kiln::chat_template_from_flag(chat_template_value);
    }
    if (o.escape) {
        o.prompt = process_escapes(o.prompt);
        for (std::string& r : o.reverse_prompts) r = process_escapes(r);
    }
    o.tokens_per_eval = batch.tokens_per_eval();
    gpu.note("kiln");
    if (o.prompt_cache_read_only && o.prompt_cache.empty()) usage_error("--prompt-cache-ro needs --prompt-cache FILE");
    if (!o.prompt_cache.empty() && o.conversation == Options::Conversation::On)
        usage_error("--prompt-cache applies to text generation (-p), not to conversation mode");
    if (o.beams == 0 && (o.n_best || length_penalty_given)) usage_error("--n-best and --length-penalty need --beams K");
    o.sampling = sampling.params();
    o.seed_given = sampling.seed_given();
    o.temp_given = sampling.temperature_given();
    if (o.beams > 0 && sampling.penalty_given())
        usage_error("--repeat-penalty, --presence-penalty, --frequency-penalty and --logit-bias apply to sampling; "
                    "--beams does not use them");
    if (o.beams > 0 && o.n_predict < 0) usage_error("--beams needs a number of tokens (-n N), not -n {}", o.n_predict);
    const bool chat_flags = !o.system_prompt.empty() || !o.chat_template_file.empty() || !o.chat_template.empty();
    if (chat_flags && o.conversation == Options::Conversation::Off)
        usage_error("-sys, --chat-template and --chat-template-file apply to conversation mode, which -no-cnv turns off");
    if (chat_flags && o.conversation == Options::Conversation::Auto) o.conversation = Options::Conversation::On;
    if (o.conversation == Options::Conversation::On && o.beams > 0) usage_error("conversation mode samples; --beams does not apply");
    if (o.conversation == Options::Conversation::On && !o.parse_special)
        usage_error("--no-special does not apply to conversation mode: the chat template's special tokens must stay special");
    if (o.layer_split.on) {
        if (o.beams > 0) usage_error("--layer-split evaluates one sequence: --beams does not apply");
        if (!o.prompt_cache.empty()) usage_error("--layer-split does not keep a prompt cache (--prompt-cache)");
        if (o.conversation == Options::Conversation::On) usage_error("--layer-split runs text generation (-p), not conversation mode");
        o.conversation = Options::Conversation::Off;
    }
    o.cache_types = cache_type.types();
    o.cache_types_given = cache_type.given();
    return o;
}

// Every byte of the text, a NUL too (fputs would stop at it).
void write_stdout(std::string_view text) { std::fwrite(text.data(), 1, text.size(), stdout); }

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int thread_count(const Options& o) {
    return o.threads > 0 ? static_cast<int>(o.threads) : kiln::default_thread_count();
}

// Prints beam search results: the best continuation, or with --n-best all of them.
void print_beams(const std::vector<kiln::Hypothesis>& found, const kiln::Tokenizer& tokenizer, const Options& o,
                 const std::string& before, bool from_start) {
    auto text_of = [&](const kiln::Hypothesis& h) {
        std::vector<int32_t> ids = h.tokens;
        if (h.ended_by_eos) ids.pop_back();
        return tokenizer.decode(ids, from_start);
    };
    if (found.empty()) {
        fmt::print("{}\n", before);
        return;
    }
    if (!o.n_best) {
        fmt::print("{}{}\n", before, text_of(found.front()));
        return;
    }
    for (size_t i = 0; i < found.size(); ++i)
        fmt::print("[{}] score {:.6f} log-prob {:.6f} tokens {}{}: {}{}\n", i + 1, found[i].score, found[i].log_prob,
                   found[i].tokens.size(), found[i].ended_by_eos ? " (eos)" : "", before, text_of(found[i]));
}

int generate_causal(const Options& o, std::shared_ptr<const kiln::GgufFile> file, kiln::mpi::World& world) {
    using clock = std::chrono::steady_clock;
    const auto load_start = clock::now();
    // --layer-split: rank 0 generates through the stages; the others serve
    // their blocks until rank 0's model is gone.
    const bool split_layers = o.layer_split.on && world.size() > 1;
    std::string plan;
    const std::unique_ptr<kiln::CausalLm> lm = split_layers
                                                   ? kiln::load_layer_split(file, o.placement, world, o.layer_split.weights, &plan)
                                                   : kiln::load_causal_lm(file, o.placement);
    const int threads = thread_count(o);
    kiln::ThreadPool pool(threads, kiln::LoadAdaptation::follow_free_cpus);
    if (split_layers && !world.leader()) {
        kiln::serve_layer_split(*lm, world, pool);
        if (o.verbose) kiln::cli::print_load_report(fmt::format("kiln (rank {})", world.rank()), seconds_since(load_start), lm->weight_residence());
        return 0;
    }
    if (split_layers)
        fmt::print(stderr, "kiln: layer split: {}\n",
                   plan);
    const auto tokenizer = kiln::load_tokenizer(*file);
    kiln::tools::check_vocabulary_fits(*tokenizer, lm->info().n_vocab, file->name());
    kiln::tools::check_logit_bias_tokens(o.sampling, lm->info().n_vocab);
    const int64_t n_ctx = o.ctx > 0 ? o.ctx : std::min<int64_t>(lm->info().n_ctx_train, 4096);

    std::vector<int32_t> tokens = tokenizer->encode(o.prompt, tokenizer->prompt_options(o.parse_special));
    if (tokens.empty()) {
        if (tokenizer->bos() < 0)
            kiln::fail("kiln", "the prompt is empty and the vocabulary has no BOS token to start from (give -p)");
        tokens.push_back(tokenizer->bos());
    }
    if (static_cast<int64_t>(tokens.size()) > n_ctx)
        kiln::fail("kiln", "the prompt is {} tokens, longer than the context of {} (raise -c)", tokens.size(), n_ctx);
    const int64_t beams = o.beams;
    if (beams > 0 && static_cast<int64_t>(tokens.size()) + o.n_predict > n_ctx)
        kiln::fail("kiln", "the prompt ({} tokens) and -n {} do not fit the context of {} (raise -c or lower -n)",
                   tokens.size(), o.n_predict, n_ctx);
    // Beams need a cache per hypothesis; only as long as this generation can get.
    const int64_t session_ctx = beams > 0 ? static_cast<int64_t>(tokens.size()) + o.n_predict : n_ctx;
    auto session = lm->new_session(std::max<int64_t>(session_ctx, 1), std::max<int64_t>(beams, 1),
                                   kiln::Executor::Mode::Fast, o.cache_types);
    const double load_seconds = seconds_since(load_start);
    if (o.verbose) kiln::cli::print_load_report("kiln", load_seconds, lm->weight_residence());

    kiln::SamplerParams sampling = o.sampling;
    if (!o.seed_given) sampling.seed = std::random_device{}();
    fmt::print(stderr, "kiln: {} ({}, {} parameters, {:.1f} MiB), {} threads, context {}, {}\n", o.model,
               lm->info().architecture, lm->info().parameters, lm->info().weight_bytes / 1048576.0, threads, n_ctx,
               beams > 0 ? fmt::format("{} beams", beams) : fmt::format("seed {}", sampling.seed));

    const auto prompt_start = clock::now();
    const auto prompt_tokens = static_cast<int64_t>(tokens.size());
    // --prompt-cache: the cached prefix is loaded, never its last token, whose
    // logits the first sampled token needs.
    size_t reused = 0, common = 0;
    const kiln::CausalSession::CacheShape cache_shape = session->cache_shape();
    const kiln::PromptCacheShape cache_file_shape{cache_shape.n_layers, cache_shape.kv_dim, cache_shape.types.k,
                                                  cache_shape.types.v, cache_shape.row_bytes};
    std::optional<kiln::ModelFingerprint> fingerprint;
    if (!o.prompt_cache.empty()) {
        fingerprint = kiln::model_fingerprint(*file);
        std::string why_not;
        const auto cached = kiln::load_prompt_cache(o.prompt_cache, *fingerprint, cache_file_shape,
                                                         session->n_ctx(), lm->info().n_vocab, why_not);
        if (cached) {
            common = kiln::common_prefix(cached->tokens, tokens);
            reused = std::min(common, tokens.size() - 1);
            session->restore_slot(0, cached->rows, static_cast<int64_t>(cached->tokens.size()),
                                  static_cast<int64_t>(reused));
        } else if (!why_not.empty()) {
            fmt::print(stderr, "kiln: ignoring the prompt cache {}: {}\n", o.prompt_cache, why_not);
        }
        fmt::print(stderr, "kiln: prompt cache {}: {} of {} prompt tokens reused\n", o.prompt_cache, reused,
                   tokens.size());
    }
    std::span<const float> logits =
        session->eval_in_pieces(std::span(tokens).subspan(reused), o.tokens_per_eval, pool);
    if (fingerprint && !o.prompt_cache_read_only && common < tokens.size()) {
        // The file did not hold this whole prompt (as llama-cli decides): now it does.
        kiln::save_prompt_cache(o.prompt_cache, *fingerprint, cache_file_shape,
                                      {tokens, session->save_slot(0)});
    }
    const double prompt_seconds = seconds_since(prompt_start);
    const auto gen_start = clock::now();
    int64_t generated = 0;

    if (beams > 0) {
        kiln::BeamParams params;
        params.beams = static_cast<int32_t>(beams);
        params.length_penalty = o.length_penalty;
        params.max_tokens = o.n_predict;
        params.eos = tokenizer->eos();
        for (int32_t id = 0; id < static_cast<int32_t>(tokenizer->vocab_size()); ++id)
            if (id != params.eos && tokenizer->is_eog(id)) params.other_ends.push_back(id);
        std::vector<int32_t> slots;
        const auto found = kiln::beam_search(logits, lm->info().n_vocab, params, [&](auto parents, auto next) {
            session->reorder(parents);
            slots.resize(next.size());
            std::iota(slots.begin(), slots.end(), 0);
            generated += static_cast<int64_t>(next.size());
            return session->eval_slots(next, slots, pool);
        });
        print_beams(found, *tokenizer, o, o.prompt, o.prompt.empty());
    } else {
        kiln::Sampler sampler(sampling);
        write_stdout(o.prompt);
        std::fflush(stdout);
        kiln::ReplyStream stream(o.reverse_prompts);
        bool at_start = o.prompt.empty() && tokenizer->add_space_prefix();
        bool window_note = false;
        std::vector<int32_t> end_of_generation;  // masked out with --ignore-eos
        if (o.ignore_eos)
            for (int32_t id = 0; id < static_cast<int32_t>(tokenizer->vocab_size()); ++id)
                if (tokenizer->is_eog(id)) end_of_generation.push_back(id);
        std::vector<float> masked;
        // -2: until the context is full; -1: no limit (the context window slides).
        const int64_t limit = o.n_predict == -2 ? n_ctx - prompt_tokens
                              : o.n_predict < 0 ? std::numeric_limits<int64_t>::max()
                                                : o.n_predict;
        while (generated < limit) {
            if (!end_of_generation.empty()) {
                masked.assign(logits.begin(), logits.end());
                for (int32_t id : end_of_generation) masked[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
                logits = masked;
            }
            const int32_t next = sampler.sample(logits, tokens);
            if (!o.ignore_eos && tokenizer->is_eog(next)) break;
            tokens.push_back(next);
            ++generated;
            std::string piece = tokenizer->piece(next);
            // With no prompt, the first word's space prefix is the tokenizer's, not the text's.
            if (at_start && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
            at_start = at_start && piece.empty();
            write_stdout(stream.feed(piece));
            std::fflush(stdout);
            if (stream.stopped()) break;
            if (generated == limit) break;
            if (session->n_past() == n_ctx) {
                // The context is full: continue from its last half, recomputed from position 0
                // (what nanoGPT's sampling does with its window; needed for learned positions).
                const auto keep = static_cast<size_t>(std::max<int64_t>(n_ctx / 2, 1));
                if (!window_note) fmt::print(stderr, "\nkiln: the context of {} is full: continuing from the last {} tokens\n", n_ctx, keep);
                window_note = true;
                session->reset();
                logits = session->eval(std::span(tokens).last(keep), pool);
            } else {
                logits = session->eval(std::span(&tokens.back(), 1), pool);
            }
        }
        write_stdout(stream.flush());
        std::fputs("\n", stdout);
    }
    std::fflush(stdout);
    const double gen_seconds = seconds_since(gen_start);
    // Tokens restored from the prompt cache were not evaluated: the rate counts the others.
    const auto evaluated = prompt_tokens - static_cast<int64_t>(reused);
    const std::string prompt_figures =
        reused > 0 ? fmt::format("prompt {} tokens ({} from the prompt cache), {} evaluated at {:.1f} tokens/s",
                                 prompt_tokens, reused, evaluated, evaluated / prompt_seconds)
                   : fmt::format("prompt {} tokens, {:.1f} tokens/s", prompt_tokens, prompt_tokens / prompt_seconds);
    fmt::print(stderr, "kiln: load {:.3f} s | {} | generation {} tokens, {:.1f} tokens/s\n", load_seconds,
               prompt_figures, generated, generated > 0 ? generated / gen_seconds : 0.0);
    if (o.verbose && pool.active() != pool.size())
        fmt::print(stderr, "kiln: ended on {} of {} threads: the others' CPUs were busy with other work\n", pool.active(),
                   pool.size());
    return 0;
}

int generate_seq2seq(const Options& o, std::shared_ptr<const kiln::GgufFile> file) {
    using clock = std::chrono::steady_clock;
    const auto load_start = clock::now();
    const std::unique_ptr<kiln::TransformerModel> loaded = kiln::load_seq2seq(file, o.placement);
    const kiln::TransformerModel& model = *loaded;
    const kiln::TransformerConfig& c = model.config();
    const auto tokenizer = kiln::load_tokenizer(*file);
    kiln::tools::check_vocabulary_fits(*tokenizer, c.n_vocab, file->name());
    kiln::tools::check_logit_bias_tokens(o.sampling, c.n_vocab);
    if (o.prompt.empty()) kiln::fail("kiln", "the prompt is empty: an encoder-decoder model needs a source text (-p)");
    std::vector<int32_t> source = tokenizer->encode(o.prompt, kiln::EncodeOptions{.parse_special = o.parse_special});
    source.push_back(c.eos);
    const int64_t n_ctx = o.ctx > 0 ? std::min(o.ctx, c.n_ctx) : c.n_ctx;
    if (static_cast<int64_t>(source.size()) > n_ctx)
        kiln::fail("kiln", "the source is {} tokens with its EOS, longer than the encoder's context of {}", source.size(),
                   n_ctx);
    // The target holds BOS and at most -n generated tokens, of which the last needs no cache row.
    const int64_t n_predict = o.n_predict < 0 ? n_ctx : o.n_predict;  // -1, -2: as long as the decoder's context allows
    const int64_t max_target = std::min<int64_t>(n_predict + 1, n_ctx);
    const int64_t beams = o.beams;
    const int threads = thread_count(o);
    kiln::ThreadPool pool(threads);
    kiln::TransformerSession session(model, 1, static_cast<int64_t>(source.size()), std::max<int64_t>(beams, 1),
                                     max_target);
    const double load_seconds = seconds_since(load_start);
    if (o.verbose) kiln::cli::print_load_report("kiln", load_seconds, model.weight_residence());
    kiln::SamplerParams sampling = o.sampling;
    if (!o.temp_given) sampling.temperature = 0;  // documented: greedy unless asked
    if (!o.seed_given) sampling.seed = std::random_device{}();
    fmt::print(stderr, "kiln: {} (transformer, {} parameters, {:.1f} MiB), {} threads, {}\n", o.model,
               model.info().parameters, model.info().weight_bytes / 1048576.0, threads,
               beams > 0 ? fmt::format("{} beams", beams)
                         : sampling.temperature == 0 ? std::string("greedy") : fmt::format("seed {}", sampling.seed));

    const auto start = clock::now();
    const std::vector<std::vector<int32_t>> sources{source};
    session.encode(sources, pool);
    const int32_t bos = c.bos, zero = 0;
    std::span<const float> logits = session.decode(std::span(&bos, 1), std::span(&zero, 1), pool);
    const int64_t n_max = std::min<int64_t>(n_predict, max_target);
    fmt::print("source: {}\n", o.prompt);
    int64_t generated = 0;
    if (beams > 0) {
        kiln::BeamParams params;
        params.beams = static_cast<int32_t>(beams);
        params.length_penalty = o.length_penalty;
        params.max_tokens = n_max;
        params.eos = c.eos;
        std::vector<int32_t> slots;
        const auto found = kiln::beam_search(logits, c.n_vocab, params, [&](auto parents, auto next) {
            session.reorder(parents);
            slots.resize(next.size());
            std::iota(slots.begin(), slots.end(), 0);
            generated += static_cast<int64_t>(next.size());
            return session.decode(next, slots, pool);
        });
        print_beams(found, *tokenizer, o, "output: ", true);
    } else {
        kiln::Sampler sampler(sampling);
        std::vector<int32_t> output;
        while (generated < n_max) {
            const int32_t next = sampler.sample(logits, output);
            if (next == c.eos && !o.ignore_eos) break;
            output.push_back(next);
            ++generated;
            if (generated < n_max) logits = session.decode(std::span(&output.back(), 1), std::span(&zero, 1), pool);
        }
        fmt::print("output: {}\n", tokenizer->decode(output, true));
    }
    std::fflush(stdout);
    const double seconds = seconds_since(start);
    fmt::print(stderr, "kiln: load {:.3f} s | source {} tokens | {} decoder tokens in {:.3f} s\n", load_seconds,
               source.size(), generated, seconds);
    return 0;
}

// -cnv, or a model with a chat template and no prompt: what llama-cli does.
bool wants_conversation(const Options& o, const kiln::GgufFile& file) {
    if (o.conversation != Options::Conversation::Auto) return o.conversation == Options::Conversation::On;
    if (o.prompt_given) return false;
    const kiln::GgufValue* chat_template = file.find("tokenizer.chat_template");
    const std::string* text = chat_template ? chat_template->as_string() : nullptr;
    return text != nullptr && !text->empty();
}

kiln::tool::ConversationOptions conversation_options(const Options& o) {
    kiln::tool::ConversationOptions c;
    c.model_path = o.model;
    c.system_prompt = o.system_prompt;
    c.first_message = o.prompt;
    c.has_first_message = o.prompt_given && !o.prompt.empty();
    c.chat_template_file = o.chat_template_file;
    c.chat_template = o.chat_template;
    c.tokens_per_eval = o.tokens_per_eval;
    c.stop_strings = o.reverse_prompts;
    c.n_predict = o.n_predict_given ? o.n_predict : -1;
    c.ignore_eos = o.ignore_eos;
    c.threads = thread_count(o);
    c.ctx = o.ctx;
    c.sampling = o.sampling;
    if (!o.seed_given) c.sampling.seed = std::random_device{}();
    c.cache_types = o.cache_types;
    c.placement = o.placement;
    c.verbose = o.verbose;
    return c;
}

int generate(const Options& o, kiln::mpi::World& world) {
    if (world.size() > 1 && !o.layer_split.on)
        throw kiln::cli::UsageError(fmt::format("under mpirun ({} ranks) kiln needs --layer-split: otherwise every rank "
                                                "would generate the same text", world.size()));
    if (world.size() > 1)
        world.require_same(fmt::format("model file ({})", o.model), kiln::file_content_hash(o.model));
    if (!kiln::utf8_valid(o.prompt)) kiln::fail("kiln", "the prompt is not valid UTF-8");
    auto file = std::make_shared<kiln::GgufFile>(kiln::GgufFile::open(o.model));
    if (o.check_tensors) kiln::cli::check_tensors(*file);
    if (o.layer_split.on && kiln::is_seq2seq(*file))
        throw kiln::CollectiveError("kiln", fmt::format("--layer-split splits decoder-only models; {} is an encoder-decoder",
                                                        o.model));
    if (kiln::is_seq2seq(*file)) {
        if (o.conversation == Options::Conversation::On)
            kiln::fail("kiln", "conversation mode needs a decoder-only model; {} is an encoder-decoder (give -p)", o.model);
        if (o.cache_types_given && o.cache_types != kiln::CacheTypes{kiln::DType::F32})
            kiln::fail("kiln", "-ctk/-ctv apply to decoder-only models; the transformer's caches are f32");
        return generate_seq2seq(o, file);
    }
    if (wants_conversation(o, *file)) return kiln::tool::run_conversation(conversation_options(o), file);
    return generate_causal(o, file, world);
}

}  // namespace

int main(int argc, char** argv) {
    return kiln::mpi::run_on_ranks("kiln", [&](kiln::mpi::World& world) { return generate(parse(argc, argv), world); });
}
