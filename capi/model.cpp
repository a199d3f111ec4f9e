// kiln.h: loading a model, its description, and its tokenizer.
#include <algorithm>
#include <string_view>

#include "capi/boundary.h"
#include "capi/handles.h"
#include "engine/models/architectures.h"

using namespace kiln::capi;

namespace {

const kiln::Tokenizer& tokenizer_of(const kiln_model* model) { return *require(model, "model").loaded->tokenizer; }

void check_token(const kiln_model* model, kiln_token token) {
    const auto n_vocab = static_cast<int64_t>(tokenizer_of(model).vocab_size());
    if (token < 0 || token >= n_vocab)
        reject(KILN_ERROR_INVALID_ARGUMENT, "token id {} is outside the vocabulary (0..{})", token, n_vocab - 1);
}

}  // namespace

extern "C" {

const char* kiln_version(void) { return KILN_VERSION_STRING; }

kiln_model_params kiln_model_default_params(void) {
    kiln_model_params p{};
    p.use_mmap = 1;
    p.use_mlock = 0;
    return p;
}

kiln_status kiln_model_load(const char* path, kiln_model** out) { return kiln_model_load_with_params(path, nullptr, out); }

kiln_status kiln_model_load_with_params(const char* path, const kiln_model_params* params, kiln_model** out) {
    if (out != nullptr) *out = nullptr;
    return guard(__func__, [&] {
        require(out, "out");
        require(path, "path");
        const kiln_model_params p = params != nullptr ? *params : kiln_model_default_params();
        kiln::WeightPlacement placement;
        placement.mmap = p.use_mmap != 0;
        placement.mlock = p.use_mlock != 0;
        auto loaded = std::make_shared<LoadedModel>();
        loaded->file = std::make_shared<const kiln::GgufFile>(kiln::GgufFile::open(path));
        loaded->lm = kiln::load_causal_lm(loaded->file, placement);
        loaded->tokenizer = kiln::load_tokenizer(*loaded->file);
        *out = new kiln_model{std::move(loaded)};
    });
}

void kiln_model_free(kiln_model* model) { delete model; }

kiln_status kiln_model_get_info(const kiln_model* model, kiln_model_info* out) {
    return guard(__func__, [&] {
        const LoadedModel& m = *require(model, "model").loaded;
        require(out, "out");
        const kiln::ModelInfo& info = m.lm->info();
        const kiln::GgufValue* chat_template = m.file->find("tokenizer.chat_template");
        const std::string* text = chat_template != nullptr ? chat_template->as_string() : nullptr;
        out->architecture = info.architecture.c_str();
        out->n_vocab = static_cast<int32_t>(info.n_vocab);
        out->n_ctx_train = static_cast<int32_t>(std::min<int64_t>(info.n_ctx_train, INT32_MAX));
        out->n_params = info.parameters;
        out->has_chat_template = text != nullptr && !text->empty() ? 1 : 0;
        out->bos = m.tokenizer->bos();
        out->eos = m.tokenizer->eos();
    });
}

kiln_status kiln_tokenize(const kiln_model* model, const char* text, int64_t text_len, int32_t add_special,
                          int32_t parse_special, kiln_token* tokens, int32_t capacity, int32_t* n_tokens) {
    return guard(__func__, [&] {
        const kiln::Tokenizer& tokenizer = tokenizer_of(model);
        require(text, "text");
        const std::string_view view = text_len < 0 ? std::string_view(text) : std::string_view(text, text_len);
        kiln::EncodeOptions options = tokenizer.prompt_options(parse_special != 0);
        if (add_special == 0) options.add_bos = options.add_eos = false;
        const std::vector<int32_t> ids = tokenizer.encode(view, options);
        write_tokens(ids.data(), ids.size(), tokens, capacity, n_tokens);
    });
}

kiln_status kiln_detokenize(const kiln_model* model, const kiln_token* tokens, int32_t n_tokens, int32_t from_start,
                            char* buf, size_t capacity, size_t* n_bytes) {
    return guard(__func__, [&] {
        if (n_tokens < 0) reject(KILN_ERROR_INVALID_ARGUMENT, "n_tokens is {}", n_tokens);
        if (n_tokens > 0) require(tokens, "tokens");
        for (int32_t i = 0; i < n_tokens; ++i) check_token(model, tokens[i]);
        const std::span<const int32_t> ids(tokens, static_cast<size_t>(n_tokens));
        write_text(tokenizer_of(model).decode(ids, from_start != 0), buf, capacity, n_bytes);
    });
}

kiln_status kiln_token_piece(const kiln_model* model, kiln_token token, char* buf, size_t capacity,
                             size_t* n_bytes) {
    return guard(__func__, [&] {
        check_token(model, token);
        write_text(tokenizer_of(model).piece(token), buf, capacity, n_bytes);
    });
}

int32_t kiln_token_is_eog(const kiln_model* model, kiln_token token) {
    if (model == nullptr) return 0;
    const kiln::Tokenizer& tokenizer = *model->loaded->tokenizer;
    if (token < 0 || static_cast<size_t>(token) >= tokenizer.vocab_size()) return 0;
    return tokenizer.is_eog(token) ? 1 : 0;
}

}  // extern "C"
