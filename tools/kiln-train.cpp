// kiln-train: trains a character-level GPT (gpt2 layout) on a text file, or
// the encoder-decoder on a generated task, with the engine's own graph,
// executor and thread pool, and writes a GGUF that kiln runs. One loop drives
// every model through the Trainer interface (engine/train/trainer.h);
// make_trainer picks the trainer.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "engine/runtime/cpu_budget.h"
#include "engine/runtime/thread_pool.h"
#include "engine/train/char_corpus.h"
#include "engine/train/gpt_gguf.h"
#include "engine/train/gpt_trainer.h"
#include "engine/train/llama_trainer.h"
#include "engine/train/seq2seq_trainer.h"
#include "engine/train/text_trainer.h"
#include "engine/train/train_log.h"
#include "formats/io/output_path.h"
#include "formats/io/regular_file.h"
#include "formats/tokenizer/tokenizer.h"
#include "formats/tokenizer/vocab_metadata.h"
#include "plot/loss_chart.h"
#include "tools/common/cli.h"
#include "tools/common/mpi_world.h"
#include "tools/common/version.h"

namespace {

namespace fs = std::filesystem;
using namespace kiln;
using namespace kiln::train;

constexpr std::string_view kUsage = R"(usage: kiln-train -f TEXT -o MODEL.gguf [options]
       kiln-train -f TEXT --arch llama [--vocab VOCAB.gguf] -o MODEL.gguf [options]
       kiln-train --task reverse -o MODEL.gguf [options]

Trains a character-level GPT (pre-LN, learned positions, GELU, tied head: the
gpt2 layout) on a text file, or with --arch llama a Llama (RMSNorm, RoPE,
SwiGLU, grouped-query attention: llama.cpp's llama layout, so llama.cpp runs
it too). The vocabulary is every character of the text, or with --vocab the
tokenizer of a GGUF file (SentencePiece or BPE, e.g. a vocabulary-only GGUF
of llama.cpp's); the first 90% of the tokens trains, the last 10% validates.
Writes MODEL.gguf (for kiln), MODEL.csv (one row per step), MODEL.png (loss
curve) and the checkpoint MODEL.ckpt.gguf (weights, AdamW moments, step, data
generator state).

  -f, --file FILE           training text (UTF-8)
      --arch A              the model for a text: gpt2 (default) or llama
      --vocab FILE.gguf     --arch llama: the tokenizer of this GGUF instead of characters
      --kv-heads N          --arch llama: key/value heads (default --heads; grouped-query
                            attention when fewer)
      --tie-embeddings      --arch llama: the head is the token embedding (no output.weight)
      --task reverse        instead of a text: train an encoder-decoder Transformer
                            (architecture "transformer") to reverse strings of up to
                            --max-length letters; at each evaluation reports the
                            held-out loss and the exact match on --held-out examples,
                            decoded by the inference engine greedily and with beam
                            search (as kiln --beams K decodes the model written with
                            --type at that step);
                            MODEL.csv gets greedy_exact_match and beam_exact_match
                            columns. --layers is per stack (the context follows from
                            --max-length; biases always). --resume needs the same task
                            and model flags. --context, --bias, --accumulation,
                            --decay-embeddings and --eval-batches are for texts only.
      --max-length N        longest string of the task (10)
      --held-out N          held-out examples (500)
      --eval-beams K        beams of the held-out beam-search evaluation (4)
      --post-ln             post-LN blocks (default pre-LN)
      --gelu                exact GELU feed-forward (default relu)
  -o, --output FILE         the final model
      --type T              final model matrices: f32 (default), f16, bf16, q8_0, q4_0
      --resume FILE         continue from a checkpoint (same text or task, and flags)
      --checkpoint FILE     checkpoint path (default: MODEL.ckpt.gguf)
      --checkpoint-interval N   steps between checkpoints (default: --eval-interval)
Model (for a text, ignored with --resume: the checkpoint's are used):
      --layers N            blocks (4)
      --heads N             attention heads (4)
      --width N             embedding width (128)
      --context N           tokens per window (64)
      --ffn N               feed-forward width (4 x width)
      --bias                linear layers with biases (default: none, as nanoGPT)
Optimization:
      --batch N             windows per micro-batch (12)
      --accumulation N      micro-batches per step (1)
      --iters N             optimizer steps (2000)
      --lr X                peak learning rate (1e-3)
      --min-lr X            final learning rate (1e-4)
      --warmup N            warmup steps (100)
      --decay-iters N       steps of cosine decay to --min-lr (default: --iters)
      --weight-decay X      AdamW decoupled weight decay of matrices (0.1)
      --decay-embeddings    also decay the embeddings
      --beta1 X, --beta2 X  AdamW betas (0.9, 0.99)
      --grad-clip X         clip the global gradient norm (1.0; 0 = off)
      --dropout X           dropout probability (0): residual and embedding dropout and
                            attention-probability dropout (also the feed-forward's
                            hidden layer of --task reverse)
      --seed N              initialization and data seed (1337)
Reporting:
      --eval-interval N     steps between train/validation evaluations (250)
      --eval-batches N      batches per evaluation (20)
  -t, --threads N           threads (default: the physical performance cores the
                            process may use)
  -h, --help                show this help
      --version             print the version, git commit, build and kernel sets
)";

struct Options {
    std::string text, output, checkpoint, resume, task, arch = "gpt2", vocab;
    int64_t kv_heads = 0;  // 0: --heads
    bool tie_embeddings = false;
    int64_t max_length = 10, held_out = 500, eval_beams = 4;
    bool post_ln = false, gelu = false;
    DType type = DType::F32;
    TrainOptions train;
    int64_t iters = 2000, decay_iters = -1, eval_interval = 250, eval_batches = 20, checkpoint_interval = -1;
    int64_t threads = 0;
    bool ffn_set = false;
};

Options parse(int argc, char** argv) {
    using namespace kiln::cli;
    Options o;
    GptConfig& m = o.train.model;
    Args args(argc, argv);
    std::vector<std::string> given;  // flags seen, to refuse those of the other kind of model
    while (!args.done()) {
        const std::string_view flag = args.next();
        given.emplace_back(flag);
        const auto integer = [&](int64_t min, int64_t max = 1 << 30) { return parse_int(flag, args.value(flag), min, max); };
        const auto number = [&](double min, double max) { return parse_float(flag, args.value(flag), min, max); };
        if (flag == "-h" || flag == "--help") {
            fmt::print("{}", kUsage);
            std::exit(0);
        } else if (flag == "--version") {
            kiln::cli::print_version("kiln-train");
            std::exit(0);
        } else if (flag == "-f" || flag == "--file") o.text = args.value(flag);
        else if (flag == "--task") {
            o.task = args.value(flag);
            if (o.task != "reverse") usage_error("--task must be 'reverse', got '{}'", o.task);
        } else if (flag == "--arch") {
            o.arch = args.value(flag);
            if (o.arch != "gpt2" && o.arch != "llama") usage_error("--arch must be gpt2 or llama, got '{}'", o.arch);
        } else if (flag == "--vocab") o.vocab = args.value(flag);
        else if (flag == "--kv-heads") o.kv_heads = integer(1, 1024);
        else if (flag == "--tie-embeddings") o.tie_embeddings = true;
        else if (flag == "--max-length") o.max_length = integer(1, 256);
        else if (flag == "--held-out") o.held_out = integer(1, 1 << 20);
        else if (flag == "--eval-beams") o.eval_beams = integer(1, 64);
        else if (flag == "--post-ln") o.post_ln = true;
        else if (flag == "--gelu") o.gelu = true;
        else if (flag == "-o" || flag == "--output") o.output = args.value(flag);
        else if (flag == "--type") {
            const std::string_view name = args.value(flag);
            const auto t = parse_dtype(name);
            if (!t || (*t != DType::F32 && *t != DType::F16 && *t != DType::BF16 && *t != DType::Q8_0 && *t != DType::Q4_0))
                usage_error("--type must be f32, f16, bf16, q8_0 or q4_0, got '{}'", name);
            o.type = *t;
        } else if (flag == "--resume") o.resume = args.value(flag);
        else if (flag == "--checkpoint") o.checkpoint = args.value(flag);
        else if (flag == "--checkpoint-interval") o.checkpoint_interval = integer(1);
        else if (flag == "--layers") m.layers = integer(1, 256);
        else if (flag == "--heads") m.heads = integer(1, 1024);
        else if (flag == "--width") m.width = integer(1, 1 << 16);
        else if (flag == "--context") m.context = integer(1, 1 << 16);
        else if (flag == "--ffn") m.ffn = integer(1, 1 << 18), o.ffn_set = true;
        else if (flag == "--bias") m.bias = true;
        else if (flag == "--batch") o.train.batch = integer(1, 1 << 16);
        else if (flag == "--accumulation") o.train.accumulation = integer(1, 1 << 16);
        else if (flag == "--iters") o.iters = integer(1);
        else if (flag == "--lr") o.train.schedule.lr = number(0, 10);
        else if (flag == "--min-lr") o.train.schedule.min_lr = number(0, 10);
        else if (flag == "--warmup") o.train.schedule.warmup = integer(0);
        else if (flag == "--decay-iters") o.decay_iters = integer(1);
        else if (flag == "--weight-decay") o.train.adam.weight_decay = static_cast<float>(number(0, 10));
        else if (flag == "--decay-embeddings") o.train.decay_embeddings = true;
        else if (flag == "--beta1") o.train.adam.beta1 = static_cast<float>(number(0, 0.999999));
        else if (flag == "--beta2") o.train.adam.beta2 = static_cast<float>(number(0, 0.999999));
        else if (flag == "--grad-clip") o.train.grad_clip = static_cast<float>(number(0, 1e9));
        else if (flag == "--dropout") o.train.dropout = static_cast<float>(number(0, 0.99));
        else if (flag == "--seed") o.train.seed = static_cast<uint64_t>(integer(0, std::numeric_limits<int64_t>::max()));
        else if (flag == "--eval-interval") o.eval_interval = integer(1);
        else if (flag == "--eval-batches") o.eval_batches = integer(1);
        else if (flag == "-t" || flag == "--threads") o.threads = integer(1, 1024);
        else usage_error("unknown argument '{}'", flag);
    }
    if (o.text.empty() && o.task.empty()) usage_error("a training text is required (-f FILE)");
    if (!o.text.empty() && !o.task.empty()) usage_error("-f and --task exclude each other");
    const auto refuse = [&](std::initializer_list<std::string_view> flags, std::string_view which) {
        for (std::string_view f : flags)
            if (std::find(given.begin(), given.end(), f) != given.end()) usage_error("{} is only for {}", f, which);
    };
    if (o.task.empty()) refuse({"--max-length", "--held-out", "--eval-beams", "--post-ln", "--gelu"}, "--task reverse");
    else refuse({"--context", "--bias", "--accumulation", "--decay-embeddings", "--eval-batches", "--arch"}, "a text (-f)");
    if (o.arch != "llama") refuse({"--vocab", "--kv-heads", "--tie-embeddings"}, "--arch llama");
    else refuse({"--bias"}, "--arch gpt2");
    if (o.kv_heads == 0) o.kv_heads = m.heads;
    if (m.heads % o.kv_heads != 0) usage_error("--heads {} is not a multiple of --kv-heads {}", m.heads, o.kv_heads);
    if (o.output.empty()) usage_error("an output path is required (-o MODEL.gguf)");
    if (!o.ffn_set) m.ffn = 4 * m.width;
    if (m.width % m.heads != 0) usage_error("--width {} is not divisible by --heads {}", m.width, m.heads);
    o.train.schedule.decay_steps = o.decay_iters > 0 ? o.decay_iters : o.iters;
    if (o.train.schedule.warmup > o.train.schedule.decay_steps)
        usage_error("--warmup {} is longer than the decay ({} steps)", o.train.schedule.warmup, o.train.schedule.decay_steps);
    if (o.checkpoint.empty()) o.checkpoint = fs::path(o.output).replace_extension(".ckpt.gguf").string();
    if (o.checkpoint_interval < 0) o.checkpoint_interval = o.eval_interval;
    return o;
}

// A failed step (NaN/inf loss, ...) as one line that also names the last good
// checkpoint, when there is one (the --resume file, or one this run wrote);
// e.what() already starts with "[component] ", which is dropped.
Error with_last_checkpoint(const Error& e, const std::optional<std::string>& checkpoint, int64_t step) {
    const std::string_view message = std::string_view(e.what()).substr(e.component().size() + 3);
    if (!checkpoint) return Error(e.component(), fmt::format("{}. No checkpoint was written yet.", message));
    return Error(e.component(), fmt::format("{}. The last good checkpoint is {} (step {}).", message, *checkpoint, step));
}

// Every file the run will write, checked before any work, so that a wrong path
// fails at once and nothing is written beside it.
void check_outputs(const Options& o) {
    check_output_path(o.output, "-o");
    check_output_path(o.checkpoint, "--checkpoint");
    check_output_path(fs::path(o.output).replace_extension(".csv"), "the log (MODEL.csv)");
    check_output_path(fs::path(o.output).replace_extension(".png"), "the loss curve (MODEL.png)");
}

// Every rank of a data-parallel run must train on the same bytes: the text,
// and the checkpoint and vocabulary files it starts from.
void require_same_inputs(const Options& o) {
    Collective& ranks = *o.train.collective;
    if (ranks.size() == 1) return;
    const auto hash_of = [](const std::string& bytes) {
        return content_hash(std::as_bytes(std::span(bytes.data(), bytes.size())));
    };
    if (!o.text.empty()) ranks.require_same(fmt::format("training text ({})", o.text), hash_of(read_regular_file(o.text)));
    if (!o.resume.empty())
        ranks.require_same(fmt::format("checkpoint ({})", o.resume), hash_of(read_regular_file(o.resume)));
    if (!o.vocab.empty()) ranks.require_same(fmt::format("vocabulary ({})", o.vocab), hash_of(read_regular_file(o.vocab)));
}

std::string read_training_text(const Options& o) { return read_regular_file(o.text); }

// The character GPT on a text: with --resume, the checkpoint's model and
// vocabulary (the model flags are ignored), else the flags' and the text's.
std::unique_ptr<Trainer> make_gpt_trainer(Options o, ThreadPool& pool) {
    const std::string text = read_training_text(o);
    std::optional<LoadedGpt> resumed;
    if (!o.resume.empty()) {
        resumed = read_gpt_checkpoint(o.resume, o.train.decay_embeddings);
        if (!resumed->training) fail("train", "{} is a model, not a training checkpoint (no optimizer state)", o.resume);
        o.train.model = resumed->config;
    }
    CharVocabulary vocabulary = resumed ? CharVocabulary(resumed->vocabulary) : CharVocabulary::from_text(text);
    CharCorpus corpus = CharCorpus::from_text(text, std::move(vocabulary), o.train.model.context);
    GptConfig& c = o.train.model;
    c.vocab = static_cast<int64_t>(corpus.vocabulary.size());
    auto gpt = std::make_unique<GptTrainer>(o.train, pool);
    if (resumed) gpt->restore(*resumed);
    ModelWriter writer = [&model = gpt->model(), tokens = corpus.vocabulary.tokens()](
                             const fs::path& path, DType type, const TrainingState* training) {
        write_gpt_model(path, model, tokens, type, training);
    };
    std::string data = fmt::format("{} characters ({} train, {} validation), vocabulary {}",
                                   corpus.train.size() + corpus.validation.size(), corpus.train.size(),
                                   corpus.validation.size(), c.vocab);
    return std::make_unique<TextTrainer>(
        std::move(gpt), TokenizedText{std::move(corpus.train), std::move(corpus.validation), std::move(data)},
        o.eval_batches, fmt::format("{} layers, {} heads, width {}, context {}", c.layers, c.heads, c.width, c.context),
        std::move(writer));
}

// The encoder-decoder on the reversal task: --layers per stack, the context
// from --max-length; --resume needs the same task and model flags.
std::unique_ptr<Trainer> make_reverse_trainer(const Options& o, ThreadPool& pool) {
    Seq2SeqTrainOptions s;
    s.model.context = o.max_length + 1;  // the longest string and </s>
    s.model.width = o.train.model.width;
    s.model.encoder_layers = s.model.decoder_layers = o.train.model.layers;
    s.model.heads = o.train.model.heads;
    s.model.ffn = o.train.model.ffn;
    s.model.norm_first = !o.post_ln;
    s.model.gelu = o.gelu;
    s.batch = o.train.batch;
    s.optimizer = o.train.optimizer();
    s.dropout = o.train.dropout;
    s.seed = o.train.seed;
    s.eval_beams = static_cast<int32_t>(o.eval_beams);
    s.eval_type = o.type;
    s.collective = o.train.collective;
    auto trainer = std::make_unique<Seq2SeqTrainer>(s, ReverseTask(o.max_length, o.held_out, s.seed), pool);
    if (!o.resume.empty()) trainer->restore(fs::path(o.resume));
    return trainer;
}

// A Llama on a text, with a character vocabulary or --vocab's tokenizer: with
// --resume, the checkpoint's model and tokenizer (the model and vocabulary
// flags are ignored), else the flags'.
std::unique_ptr<Trainer> make_llama_trainer(const Options& o, ThreadPool& pool) {
    const std::string text = read_training_text(o);
    LlamaTrainOptions options;
    static_cast<CausalTrainOptions&>(options) = o.train;
    std::optional<LoadedLlama> resumed;
    TrainedTokenizer tokenizer;
    if (!o.resume.empty()) {
        resumed = read_llama_checkpoint(o.resume, o.train.decay_embeddings);
        if (!resumed->training) fail("train", "{} is a model, not a training checkpoint (no optimizer state)", o.resume);
        options.model = resumed->params;
        options.tied = resumed->tied;
        tokenizer = resumed->tokenizer;
    } else {
        const GptConfig& m = o.train.model;
        options.model.name = "kiln-train llama";
        options.model.n_ctx_train = m.context;
        options.model.dim = m.width;
        options.model.n_layers = m.layers;
        options.model.n_heads = m.heads;
        options.model.n_kv_heads = o.kv_heads;
        options.model.ffn_dim = m.ffn;
        options.model.n_rot = m.width / m.heads;
        options.tied = o.tie_embeddings;
    }
    // The text in tokens: the tokenizer of the checkpoint or of --vocab, else the text's characters.
    TokenizedText data;
    const std::string source = resumed ? o.resume : o.vocab;  // empty: the text's characters
    std::optional<GgufFile> vocab_file;
    if (!source.empty()) vocab_file = GgufFile::open(source);
    if (!vocab_file || vocab::model_name(*vocab_file) == "char") {
        CharVocabulary vocabulary =
            vocab_file ? CharVocabulary(read_vocabulary(*vocab_file, source)) : CharVocabulary::from_text(text);
        CharCorpus corpus = CharCorpus::from_text(text, std::move(vocabulary), options.model.n_ctx_train);
        if (!resumed) tokenizer = char_tokenizer(corpus.vocabulary.tokens());
        data.train = std::move(corpus.train);
        data.validation = std::move(corpus.validation);
    } else {
        if (!resumed) tokenizer = gguf_tokenizer(*vocab_file);
        const std::unique_ptr<Tokenizer> encoder = load_tokenizer(*vocab_file);
        split_tokens(encoder->encode(text, kiln::EncodeOptions{.parse_special = false}), options.model.n_ctx_train, 0.9, "tokens", data.train, data.validation);
    }
    options.model.n_vocab = tokenizer.n_vocab;
    data.description = fmt::format("{} tokens ({} train, {} validation), vocabulary {}",
                                   data.train.size() + data.validation.size(), data.train.size(), data.validation.size(),
                                   tokenizer.n_vocab);
    auto llama = std::make_unique<LlamaTrainer>(options, pool);
    if (resumed) llama->restore(*resumed);
    ModelWriter writer = [&model = llama->model(), tokenizer](const fs::path& path, DType type,
                                                               const TrainingState* training) {
        write_llama_model(path, model, tokenizer, type, training);
    };
    const arch::LlamaParams& p = options.model;
    return std::make_unique<TextTrainer>(
        std::move(llama), std::move(data), o.eval_batches,
        fmt::format("llama, {} layers, {} heads ({} key/value), width {}, context {}", p.n_layers, p.n_heads,
                    p.n_kv_heads, p.dim, p.n_ctx_train),
        std::move(writer));
}

std::unique_ptr<Trainer> make_trainer(const Options& o, ThreadPool& pool) {
    if (o.task == "reverse") return make_reverse_trainer(o, pool);
    if (o.arch == "llama") return make_llama_trainer(o, pool);
    return make_gpt_trainer(o, pool);
}

// The one training loop: a progress line, an evaluation every
// --eval-interval steps and at the end, MODEL.csv and MODEL.png rewritten with
// each checkpoint, --resume continuing the log, the model written at the end.
// Under mpirun every rank runs it on its share of each batch (TrainerCore);
// rank 0 alone prints and writes files.
int run(Options o, mpi::World& world) {
    const bool leader = world.leader();
    if (leader) check_outputs(o);
    o.train.collective = &world;
    require_same_inputs(o);
    ThreadPool pool(o.threads > 0 ? static_cast<int>(o.threads) : default_thread_count());
    const std::unique_ptr<Trainer> trainer = make_trainer(o, pool);
    TrainLog log(trainer->logs_accuracy());
    const fs::path csv = fs::path(o.output).replace_extension(".csv");
    const fs::path chart = fs::path(o.output).replace_extension(".png");
    if (!o.resume.empty()) {
        if (leader) log = TrainLog::read_csv(csv, trainer->steps_done(), trainer->logs_accuracy());
        if (trainer->steps_done() >= o.iters)
            throw CollectiveError("train", fmt::format("the checkpoint is at step {}, not before --iters {}",
                                                       trainer->steps_done(), o.iters));
    }
    size_t n_params = 0;
    for (const ParamTensor& t : trainer->parameters().tensors()) n_params += t.segment.count;
    if (leader)
        fmt::print(stderr, "kiln-train: {}: {:.2f}M parameters; {} threads{}{}\n", trainer->description(),
                   static_cast<double>(n_params) / 1e6, pool.size(),
                   world.size() > 1 ? fmt::format(" on each of {} ranks", world.size()) : "",
                   o.resume.empty() ? "" : fmt::format("; resuming at step {}", trainer->steps_done()));

    const bool tty = leader && isatty(fileno(stderr)) != 0;
    const int64_t tokens_per_step = trainer->tokens_per_step();
    const int64_t first_step = trainer->steps_done();
    const auto started = std::chrono::steady_clock::now();
    Evaluation last_eval;
    // The --resume file is good until this run writes a newer one.
    std::optional<std::string> last_checkpoint_path;
    if (!o.resume.empty()) last_checkpoint_path = o.resume;
    int64_t last_checkpoint = first_step;
    while (trainer->steps_done() < o.iters) {
        const auto t0 = std::chrono::steady_clock::now();
        StepResult r;
        try {
            r = trainer->step();
        } catch (const Error& e) {
            if (tty) fmt::print(stderr, "\n");
            const Error error = with_last_checkpoint(e, last_checkpoint_path, last_checkpoint);
            // A failed step is a non-finite loss or norm of the summed
            // gradients: every rank finds the same one.
            if (world.size() > 1) throw CollectiveError(error.component(), std::string_view(error.what()).substr(error.component().size() + 3));
            throw error;
        }
        const auto t1 = std::chrono::steady_clock::now();
        const double seconds = std::chrono::duration<double>(t1 - t0).count();
        const int64_t step = trainer->steps_done();
        LogRow row{step, r.loss, r.lr, r.grad_norm, static_cast<double>(tokens_per_step) / seconds, {}, {}, {}, {}};
        if (tty) {
            const double elapsed = std::chrono::duration<double>(t1 - started).count();
            const double eta = elapsed / static_cast<double>(step - first_step) * static_cast<double>(o.iters - step);
            fmt::print(stderr, "\rstep {}/{}  loss {:.4f}  lr {:.2e}  {:.0f} tok/s  ETA {}   ", step, o.iters, r.loss,
                       r.lr, row.tokens_per_s, format_duration(eta));
        }
        const bool last = step == o.iters;
        if (step % o.eval_interval == 0 || last) {
            last_eval = trainer->evaluate();
            row.eval_train = last_eval.train_loss;
            row.eval_val = last_eval.val_loss;
            row.greedy_match = last_eval.greedy_match;
            row.beam_match = last_eval.beam_match;
            if (tty) fmt::print(stderr, "\r\x1b[K");
            if (leader) fmt::print(stderr, "step {}: {}\n", step, trainer->evaluation_line(last_eval, r.loss));
        }
        log.rows().push_back(row);
        if (step % o.checkpoint_interval == 0 || last) {
            if (leader) {
                const TrainingState state = trainer->training_state();
                trainer->write(o.checkpoint, DType::F32, &state);
                log.write_csv(csv);
                plot::draw_loss_chart(chart, log);
            }
            last_checkpoint = step;
            last_checkpoint_path = o.checkpoint;
        }
    }
    if (!leader) return 0;
    trainer->write(o.output, o.type);
    if (const GradientSync::Stats* sync = trainer->sync_stats(); sync != nullptr && sync->steps > 0) {
        const auto steps = static_cast<double>(sync->steps);
        fmt::print(stderr, "kiln-train: gradient sums over {} ranks: {:.2f} MiB per step in {} buckets; {:.2f} ms per "
                   "step left to wait after backward ({:.1f}% of the {:.2f} ms that the last micro-batch and the sums took)\n", world.size(),
                   static_cast<double>(sync->bytes) / 1048576.0, sync->buckets, 1e3 * sync->wait_seconds / steps,
                   100.0 * sync->wait_seconds / sync->run_seconds, 1e3 * sync->run_seconds / steps);
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    fmt::print(stderr, "kiln-train: wrote {} ({}); {}\n", o.output, dtype_name(o.type),
               trainer->outcome(last_eval, (o.iters - first_step) * tokens_per_step, elapsed));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return kiln::mpi::run_on_ranks("kiln-train", [&](kiln::mpi::World& world) { return run(parse(argc, argv), world); });
}
