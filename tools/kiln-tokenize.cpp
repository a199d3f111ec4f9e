// kiln-tokenize: shows the token ids a model's tokenizer gives a text.
//
//   kiln-tokenize -m MODEL (-p TEXT | -f FILE) [--no-bos] [--no-special] [--show-pieces]
//
// Prints the ids on one line, separated by spaces; with --show-pieces, one
// "id<TAB>piece" line per token instead, the piece as the vocabulary spells it
// (escaped, so a newline token cannot break the line format).
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "engine/core/printable.h"
#include "formats/gguf/gguf_file.h"
#include "formats/io/regular_file.h"
#include "formats/tokenizer/tokenizer.h"
#include "tools/common/cli.h"
#include "tools/common/version.h"

namespace {

constexpr std::string_view kTool = "kiln-tokenize";

constexpr std::string_view kHelp = R"(usage: kiln-tokenize -m MODEL (-p TEXT | -f FILE) [--no-bos] [--no-special] [--show-pieces]

Tokenizes a text with the vocabulary of a GGUF model and prints the token
ids. tokenizer.ggml.model picks the tokenizer: "llama" (SentencePiece-style
BPE), "gpt2" (byte-level BPE, split as tokenizer.ggml.pre says) or "char"
(one token per character). Special tokens written in the text ("<s>",
"<|im_end|>") become their ids unless --no-special is given.

  -m, --model FILE    GGUF model or vocabulary-only GGUF file
  -p, --prompt TEXT   the text to tokenize
  -f, --file FILE     read the text from FILE instead (its bytes as they are,
                      a final newline included)
  --no-bos            do not put the BOS token in front (by default it goes
                      in front when the vocabulary says so:
                      tokenizer.ggml.add_bos_token, true for "llama",
                      false for "gpt2" and "char" unless set; the EOS
                      at the end likewise, by tokenizer.ggml.add_eos_token)
  --no-special        take special tokens written in the text as plain text
  --show-pieces       print one "id<TAB>piece" line per token instead of the
                      ids on one line; pieces are shown as the vocabulary
                      spells them ("▁" for a space and <0xNN> for byte
                      tokens in "llama", "Ġ" for a space in "gpt2")
  -h, --help          show this help
      --version       print the version, git commit, build and kernel sets

Text that is not valid UTF-8: "llama" spells the bad bytes as byte tokens
(byte fallback), "gpt2" reads each as U+FFFD (as llama.cpp does), "char"
reports an error.
Exit status: 0 on success, 1 on errors (e.g. a missing or unsuitable model),
2 on usage errors.
)";

struct Options {
    std::string model;
    std::optional<std::string> prompt;
    std::optional<std::string> file;
    bool bos = true;
    bool parse_special = true;
    bool show_pieces = false;
    bool help = false;
};

Options parse(int argc, char** argv) {
    Options options;
    kiln::cli::Args args(argc, argv);
    while (!args.done()) {
        const std::string_view flag = args.next();
        if (flag == "-h" || flag == "--help") options.help = true;
        else if (flag == "--version") {
            kiln::cli::print_version("kiln-tokenize");
            std::exit(0);
        }
        else if (flag == "-m" || flag == "--model") options.model = args.value(flag);
        else if (flag == "-p" || flag == "--prompt") options.prompt = std::string(args.value(flag));
        else if (flag == "-f" || flag == "--file") options.file = std::string(args.value(flag));
        else if (flag == "--no-bos") options.bos = false;
        else if (flag == "--no-special") options.parse_special = false;
        else if (flag == "--show-pieces") options.show_pieces = true;
        else kiln::cli::usage_error("unknown argument '{}'", kiln::printable(flag));
    }
    if (options.help) return options;
    if (options.model.empty()) kiln::cli::usage_error("a model is required (-m MODEL)");
    if (options.prompt && options.file) kiln::cli::usage_error("give the text either with -p or with -f, not both");
    if (!options.prompt && !options.file) kiln::cli::usage_error("a text is required (-p TEXT or -f FILE)");
    return options;
}

int run(int argc, char** argv) {
    const Options options = parse(argc, argv);
    if (options.help) {
        fmt::print("{}", kHelp);
        return 0;
    }
    const kiln::GgufFile file = kiln::GgufFile::open(options.model);
    const std::unique_ptr<kiln::Tokenizer> tokenizer = kiln::load_tokenizer(file);
    const std::string text = options.file ? kiln::read_regular_file(*options.file) : *options.prompt;
    const std::vector<int32_t> ids = tokenizer->encode(
        text, kiln::EncodeOptions{.add_bos = options.bos && tokenizer->add_bos(),
                                  .add_eos = options.bos && tokenizer->add_eos(),
                                  .parse_special = options.parse_special});

    // Everything is formatted first and written at once, so a failure never
    // leaves half an answer on stdout.
    std::string out;
    if (options.show_pieces) {
        for (const int32_t id : ids)
            out += fmt::format("{}\t{}\n", id, kiln::printable(tokenizer->token_text(id)));
    } else {
        out = fmt::format("{}\n", fmt::join(ids, " "));
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    if (std::fflush(stdout) != 0) kiln::fail("io", "writing to stdout failed ({})", std::strerror(errno));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return kiln::cli::run_tool(kTool, [&] { return run(argc, argv); });
}
