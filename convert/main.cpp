// kiln-convert: turns checkpoints into GGUF files and inspects them.
#include <fmt/format.h>

#include <cstdio>
#include <string_view>

#include "convert/convert.h"
#include "convert/inspect.h"
#include "tools/common/cli.h"
#include "tools/common/version.h"

namespace {

constexpr std::string_view kUsage = R"(usage: kiln-convert INPUT -o OUT.gguf [--type TYPE] [--tokenizer FILE | --no-tokenizer] [--name NAME]
       kiln-convert INPUT -o FOLDER --to safetensors
       kiln-convert inspect FILE

Converts a checkpoint into one GGUF file (the input format is told from the
file's content, not its name):
  GGUF                  re-quantize an existing file (e.g. f32 -> q8_0)
  llama2.c .bin         legacy and ak42 v1/v2
  PyTorch .pt/.pth      torch.save archives (whitelist unpickler) of llama2.c's model.py,
                        nanoGPT's GPT and torch.nn.Transformer seq2seq models (their
                        "itos" list is embedded); a folder holding model.pt (what --to
                        safetensors writes for an encoder-decoder) reads that file
  Hugging Face folder   config.json + model.safetensors (or sharded), by "architectures":
                          LlamaForCausalLM, MistralForCausalLM -> llama (rope_scaling
                            linear, yarn, llama3 -> rope_freqs; head_dim; attention/mlp
                            biases; Mistral's sliding_window is ignored, as llama.cpp does)
                          Qwen2ForCausalLM -> qwen2 (q/k/v biases)
                          Phi3ForCausalLM -> phi3 (fused qkv and gate/up, longrope/su
                            factors, sliding_window)
                          GemmaForCausalLM, Gemma2ForCausalLM -> gemma, gemma2 (norms
                            stored +1; query_pre_attn_scalar must be kiln's)
                          GPT2LMHeadModel -> gpt2
                        the folder's tokenizer.model (SentencePiece: llama, mistral,
                        phi3, gemma) or tokenizer.json (gpt2) is embedded; --tokenizer
                        gives one otherwise

  -o, --output FILE     the GGUF file to write (written atomically: an error or
                        Ctrl-C never leaves a partial file there)
  --type MIX            a llama-quantize mix: f32, f16, bf16, q8_0, q4_0, q4_1,
                        q5_0, q5_1, q2_k, q3_k_s, q3_k_m (q3_k), q3_k_l, q4_k_s,
                        q4_k_m (q4_k), q5_k_s, q5_k_m (q5_k), q6_k, iq4_nl, iq4_xs.
                        Each tensor's type follows llama-quantize's rules (no
                        importance matrix): output.weight, attn_v and some
                        ffn_down layers get more bits, rows that are not whole
                        blocks take a smaller-block type; norms and 1-D tensors
                        stay f32. Where llama-quantize refuses (rows that no
                        type of the mix fits), kiln writes f16 and says so.
                        A quantized input is dequantized first.
                        Default: keep each tensor's type.
  --tokenizer FILE      the vocabulary to embed, for any input without one: llama2.c's
                        tokenizer.bin, a SentencePiece tokenizer.model, a Hugging Face
                        tokenizer.json, nanoGPT's meta.pkl, or a GGUF file to copy the
                        vocabulary from (told apart by content); its size must equal
                        the model's embedding rows
  --no-tokenizer        write a model that has no vocabulary (otherwise refused: neither
                        kiln nor llama.cpp can run text through it)
  --name NAME           general.name of the output
  --to safetensors      write a Hugging Face folder (config.json + model.safetensors)
                        instead, for PyTorch: llama -> LlamaForCausalLM, qwen2 ->
                        Qwen2ForCausalLM, phi3 -> Phi3ForCausalLM, gemma/gemma2 ->
                        GemmaForCausalLM/Gemma2ForCausalLM, gpt2 -> GPT2LMHeadModel
                        (Conv1D weights, tied or untied head); float tensors keep their
                        bytes (Gemma's norms less 1), quantized ones are written as f32.
                        The vocabulary goes along: tokenizer.model (SentencePiece) or
                        tokenizer.json (byte-level BPE; pre types gpt-2, llama-bpe,
                        qwen2, smollm), tokenizer_config.json (chat template, special
                        tokens, add_bos/eos) and the special ids in config.json and
                        generation_config.json; a char vocabulary is left out (noted).
                        transformer (encoder-decoder) -> FOLDER/model.pt, the
                        torch.nn.Transformer checkpoint kiln reads ("model" state dict,
                        "model_args", "itos", "specials"), and config.json.
                        FOLDER must be new or empty; an error leaves no folder

inspect FILE            print a GGUF file's metadata, its tensors (name, type,
                        shape, bytes) and a one-line summary

exit status: 0 on success, 1 when a file cannot be read or is malformed,
2 on a usage error.
)";

int run(int argc, char** argv) {
    using namespace kiln::cli;
    Args args(argc, argv);
    if (args.done()) usage_error("expected INPUT -o OUT.gguf, or a command");
    kiln::convert::ConvertOptions options;
    bool have_output = false;
    while (!args.done()) {
        const std::string_view arg = args.next();
        if (arg == "-h" || arg == "--help") {
            fmt::print("{}", kUsage);
            return 0;
        } else if (arg == "--version") {
            kiln::cli::print_version("kiln-convert");
            return 0;
        } else if (arg == "inspect" && options.input.empty()) {
            if (args.done()) usage_error("inspect takes exactly one FILE");
            const std::string_view file = args.next();
            if (file == "-h" || file == "--help") {
                fmt::print("{}", kUsage);
                return 0;
            }
            if (!args.done()) usage_error("inspect takes exactly one FILE");
            kiln::convert::inspect(std::filesystem::path(file), stdout);
            return 0;
        } else if (arg == "-o" || arg == "--output") {
            options.output = args.value(arg);
            have_output = true;
        } else if (arg == "--type") {
            const std::string_view name = args.value(arg);
            options.mix = kiln::convert::find_quant_mix(name);
            if (!options.mix) usage_error("--type must be one of {}, got '{}'", kiln::convert::quant_mix_names(), name);
        } else if (arg == "--tokenizer") {
            options.tokenizer = std::filesystem::path(args.value(arg));
        } else if (arg == "--no-tokenizer") {
            options.no_tokenizer = true;
        } else if (arg == "--to") {
            const std::string_view to = args.value(arg);
            if (to == "safetensors") options.to_safetensors = true;
            else if (to != "gguf") usage_error("--to must be gguf or safetensors, got '{}'", to);
        } else if (arg == "--name") {
            options.name = std::string(args.value(arg));
        } else if (!arg.empty() && arg[0] == '-') {
            usage_error("unknown option '{}'", arg);
        } else if (options.input.empty()) {
            options.input = arg;
        } else {
            usage_error("unexpected argument '{}' (one INPUT at a time)", arg);
        }
    }
    if (options.input.empty()) usage_error("expected an INPUT checkpoint");
    if (!have_output) usage_error("expected -o OUT.gguf");
    kiln::convert::convert(options, stderr);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return kiln::cli::run_tool("kiln-convert", [&] { return run(argc, argv); });
}
