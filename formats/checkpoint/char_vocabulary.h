#pragma once
// Character-level vocabularies (docs/architectures.md, char vocabulary, tokenizer.ggml.model "char"),
// from the two places tutorial-sized models keep them:
//  * nanoGPT's meta.pkl (data/shakespeare_char/prepare.py):
//    pickle.dump({"vocab_size": N, "itos": {id: ch}, "stoi": {ch: id}}), read
//    with the whitelist unpickler (never run); itos is used, or stoi inverted;
//  * a list of token strings saved beside the weights (e.g. "itos" in a
//    seq2seq checkpoint), with named special tokens ("<s>", "</s>", "<pad>").
// Every normal token must be exactly one UTF-8 character (a multi-character
// token would never be produced by the char tokenizer); special tokens become
// control tokens (token_type 3), the others normal (1). Ids must be 0..N-1
// with no gaps or repeats, and N must equal the model's vocabulary size.
// Errors are kiln::Error("tokenizer", "<where>: ...").
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "formats/checkpoint/checkpoint.h"

namespace kiln {

struct CharVocabulary {
    std::vector<std::string> tokens;  // by id
    std::vector<bool> control;        // by id
    std::optional<uint32_t> bos, eos, pad, unk;
};

// Reads nanoGPT's meta.pkl.
CharVocabulary read_nanogpt_meta(const std::filesystem::path& path);

// Checks `v` (see above; `where` starts messages) and appends tokenizer.ggml.*
// entries: model "char", tokens, token_type, the special ids present, and
// add_bos_token false.
void add_char_tokenizer(Checkpoint& checkpoint, const CharVocabulary& v, uint64_t vocab_size, const std::string& where);

// True for a pickle (not a torch.save zip): its first byte is PROTO (0x80).
bool looks_like_pickle(const std::filesystem::path& path);

}  // namespace kiln
