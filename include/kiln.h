/*
 * kiln.h: kiln's C API, for programs in C or any language with a C foreign
 * function interface (Python's ctypes: examples/python_ctypes.py).
 *
 * The shape of a program:
 *
 *   kiln_model* model;
 *   if (kiln_model_load("model.gguf", &model) != KILN_OK) {
 *       fprintf(stderr, "%s\n", kiln_last_error());
 *       return 1;
 *   }
 *   kiln_context_params cp = kiln_context_default_params();
 *   kiln_context* ctx;
 *   kiln_context_new(model, &cp, &ctx);
 *   kiln_token tokens[256];
 *   int32_t n;
 *   kiln_tokenize(model, "Once upon a time", -1, 1, 1, tokens, 256, &n);
 *   kiln_decode(ctx, tokens, NULL, n);           // every token into slot 0
 *   const float* logits = kiln_logits(ctx, n - 1); // the last token's row
 *   ... pick a token (kiln_sampler_sample), kiln_token_is_eog, decode it, repeat ...
 *   kiln_context_free(ctx);
 *   kiln_model_free(model);
 *
 * Errors. Every function that can fail returns a kiln_status; KILN_OK (0) is
 * success. On failure, kiln_last_error() returns one line saying what went
 * wrong. No C++ exception ever crosses this boundary: out of memory included,
 * every failure becomes a status.
 *
 * Ownership. Objects made by kiln_*_new / kiln_model_load belong to the caller
 * and are released by the matching kiln_*_free (which accepts NULL). Strings
 * and arrays kiln returns by pointer are owned by kiln; each function says how
 * long they stay valid. Buffers the caller passes stay the caller's: kiln
 * writes into them and keeps no pointer to them.
 *
 * Threads. A model may be shared by contexts on different threads. A context
 * or a sampler must be used by one thread at a time. kiln_last_error() is per
 * thread.
 *
 * Buffers. Functions that write text or tokens into a caller's buffer take its
 * capacity and report, through an out-parameter, the size the full result
 * needs. When the buffer is too small they return KILN_ERROR_BUFFER_TOO_SMALL
 * and write nothing; call again with a buffer of the reported size.
 */
#ifndef KILN_H
#define KILN_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status and errors ------------------------------------------------- */

typedef enum kiln_status {
    KILN_OK = 0,
    KILN_ERROR_INVALID_ARGUMENT = 1, /* a NULL pointer, a token or slot out of range, ... */
    KILN_ERROR_BUFFER_TOO_SMALL = 2, /* the needed size was reported; nothing was written */
    KILN_ERROR_MODEL = 3,            /* the file is missing, not a model kiln runs, malformed, ... */
    KILN_ERROR_CONTEXT_FULL = 4,     /* the tokens do not fit the slot's remaining positions */
    KILN_ERROR_OUT_OF_MEMORY = 5,
    KILN_ERROR_FAILED = 6            /* anything else (the message says what) */
} kiln_status;

/* The message of this thread's last failure: one line, never NULL ("" before
 * any failure). Owned by kiln; valid until the next kiln call on this thread
 * that fails. */
KILN_API const char* kiln_last_error(void);

/* kiln's version, e.g. "0.1.0". A static string. */
KILN_API const char* kiln_version(void);

/* ---- models ------------------------------------------------------------ */

typedef int32_t kiln_token;
typedef struct kiln_model kiln_model;

/* Loads a decoder-only GGUF model (llama, qwen2, gemma, gemma2, phi3, minicpm,
 * gpt2) and its tokenizer, with the default kiln_model_params. On success *out
 * is a new model; free it with kiln_model_free. On failure *out is NULL. */
KILN_API kiln_status kiln_model_load(const char* path, kiln_model** out);

/* Where the weights live (llama.h's use_mmap and use_mlock). */
typedef struct kiln_model_params {
    int32_t use_mmap;  /* 1 (default): compute from the file mapping (only tensors the kernels read
                          rearranged are copied); 0: read every weight into memory (kiln --no-mmap) */
    int32_t use_mlock; /* 1: lock the weights in RAM (kiln --mlock); a refusal (RLIMIT_MEMLOCK) is
                          one warning on stderr and the model runs unlocked. Default 0 */
} kiln_model_params;

KILN_API kiln_model_params kiln_model_default_params(void);

/* kiln_model_load with params (NULL: the defaults). */
KILN_API kiln_status kiln_model_load_with_params(const char* path, const kiln_model_params* params, kiln_model** out);

/* Frees a model. Contexts made from it may outlive it: each keeps what it
 * needs until it is freed itself. NULL is allowed. */
KILN_API void kiln_model_free(kiln_model* model);

typedef struct kiln_model_info {
    const char* architecture;  /* general.architecture; owned by the model, valid until kiln_model_free */
    int32_t n_vocab;           /* rows of logits, and the valid token ids 0..n_vocab-1 */
    int32_t n_ctx_train;       /* the longest context the model was built for */
    uint64_t n_params;
    int32_t has_chat_template; /* 1 when the file has tokenizer.chat_template */
    kiln_token bos;            /* -1: none */
    kiln_token eos;            /* -1: none */
} kiln_model_info;

KILN_API kiln_status kiln_model_get_info(const kiln_model* model, kiln_model_info* out);

/* ---- tokens ------------------------------------------------------------ */

/* The token ids of text (text_len bytes, or up to its NUL when text_len < 0).
 * add_special: BOS/EOS as the vocabulary asks for a prompt. parse_special:
 * special tokens written in the text ("<|im_end|>") become their ids.
 * Writes at most capacity ids to tokens; *n_tokens is the full count. */
KILN_API kiln_status kiln_tokenize(const kiln_model* model, const char* text, int64_t text_len, int32_t add_special,
                                   int32_t parse_special, kiln_token* tokens, int32_t capacity, int32_t* n_tokens);

/* The text of tokens[0..n_tokens) into buf, NUL-terminated. from_start: the
 * tokens begin a text (a SentencePiece vocabulary then drops the space its
 * encoder put in front). *n_bytes is the text's length without the NUL; the
 * buffer needs *n_bytes + 1 bytes. */
KILN_API kiln_status kiln_detokenize(const kiln_model* model, const kiln_token* tokens, int32_t n_tokens,
                                     int32_t from_start, char* buf, size_t capacity, size_t* n_bytes);

/* The bytes one token adds to a text (a piece may cut a UTF-8 character in
 * two: concatenate pieces before printing them as text), NUL-terminated like
 * kiln_detokenize's. */
KILN_API kiln_status kiln_token_piece(const kiln_model* model, kiln_token token, char* buf, size_t capacity,
                                      size_t* n_bytes);

/* 1 when generation should stop at token (EOS, end-of-turn tokens), else 0
 * (also for an id outside the vocabulary or a NULL model). */
KILN_API int32_t kiln_token_is_eog(const kiln_model* model, kiln_token token);

/* ---- chat templates ---------------------------------------------------- */

typedef struct kiln_chat_message {
    const char* role;    /* "system", "user", "assistant", ... */
    const char* content;
} kiln_chat_message;

/* Renders messages with a Jinja chat template: tmpl, or the model's own when
 * tmpl is NULL (ChatML when the model has none). add_generation_prompt: end
 * with the opening of the assistant's reply. Writes the text to buf like
 * kiln_detokenize. */
KILN_API kiln_status kiln_chat_apply(const kiln_model* model, const char* tmpl, const kiln_chat_message* messages,
                                     size_t n_messages, int32_t add_generation_prompt, char* buf, size_t capacity,
                                     size_t* n_bytes);

/* The tokens of a rendered chat prompt: special tokens written by the template
 * become their ids, and the prompt starts with exactly one BOS when the
 * vocabulary asks for one. Writes like kiln_tokenize. */
KILN_API kiln_status kiln_chat_tokenize(const kiln_model* model, const char* rendered, kiln_token* tokens,
                                        int32_t capacity, int32_t* n_tokens);

/* ---- contexts: a KV cache with sequence slots -------------------------- */

typedef struct kiln_context kiln_context;

typedef enum kiln_cache_type {
    KILN_CACHE_F32 = 0,
    KILN_CACHE_F16 = 1  /* half the memory and the bytes read per generated token */
} kiln_cache_type;

typedef struct kiln_context_params {
    int32_t n_ctx;      /* positions per slot; 0: the model's, at most 4096 */
    int32_t n_slots;    /* independent sequences (default 1) */
    int32_t n_threads;  /* 0: the physical performance cores the process may use */
    kiln_cache_type cache_type;
} kiln_context_params;

KILN_API kiln_context_params kiln_context_default_params(void);

/* A context of the model: n_slots sequences of up to n_ctx tokens each.
 * Free it with kiln_context_free. */
KILN_API kiln_status kiln_context_new(const kiln_model* model, const kiln_context_params* params, kiln_context** out);
KILN_API void kiln_context_free(kiln_context* ctx);

/* Appends tokens[i] to the sequence in slot slots[i] (slots NULL: all slot 0),
 * evaluating the n tokens in one batch; tokens of a slot are appended in the
 * order given. Afterwards kiln_logits(ctx, i) is token i's next-token logits.
 * Nothing is appended when it fails (a token outside the vocabulary, a slot
 * out of range, a full slot). */
KILN_API kiln_status kiln_decode(kiln_context* ctx, const kiln_token* tokens, const int32_t* slots, int32_t n);

/* Row i of the last kiln_decode's logits (n_vocab floats), or NULL (with
 * kiln_last_error set) when there is no row i. Owned by the context; valid
 * until its next kiln_decode, kiln_context_set_threads or kiln_context_free. */
KILN_API const float* kiln_logits(kiln_context* ctx, int32_t i);

/* Tokens the slot holds; -1 for a slot out of range. */
KILN_API int32_t kiln_slot_length(const kiln_context* ctx, int32_t slot);
/* Keeps the first n_keep tokens of the slot; the next token goes to position n_keep. */
KILN_API kiln_status kiln_slot_truncate(kiln_context* ctx, int32_t slot, int32_t n_keep);
/* Empties one slot (kiln_slot_truncate with n_keep 0). */
KILN_API kiln_status kiln_slot_clear(kiln_context* ctx, int32_t slot);
/* Empties every slot. */
KILN_API kiln_status kiln_context_clear(kiln_context* ctx);

KILN_API int32_t kiln_context_n_ctx(const kiln_context* ctx);
KILN_API int32_t kiln_context_n_slots(const kiln_context* ctx);
/* Threads the next decodes run on (n_threads >= 1). */
KILN_API kiln_status kiln_context_set_threads(kiln_context* ctx, int32_t n_threads);

/* ---- sampling ---------------------------------------------------------- */

typedef struct kiln_sampler kiln_sampler;

/* llama.cpp's default chain: repetition penalty, top-k, top-p, min-p, then
 * temperature and a seeded draw. temperature 0 is greedy. */
typedef struct kiln_sampler_params {
    float temperature;     /* 0.8 */
    int32_t top_k;         /* 40; 0: off */
    float top_p;           /* 0.95; 1: off */
    float min_p;           /* 0.05; 0: off */
    float repeat_penalty;  /* 1.0: off */
    int32_t repeat_last_n; /* 64 */
    uint64_t seed;         /* the same seed and inputs give the same tokens */
} kiln_sampler_params;

KILN_API kiln_sampler_params kiln_sampler_default_params(void);
KILN_API kiln_status kiln_sampler_new(const kiln_sampler_params* params, kiln_sampler** out);
KILN_API void kiln_sampler_free(kiln_sampler* sampler);

/* Picks the next token from n_vocab logits; recent[0..n_recent) is the
 * sequence so far (its last repeat_last_n tokens are penalized; NULL with 0). */
KILN_API kiln_status kiln_sampler_sample(kiln_sampler* sampler, const float* logits, int32_t n_vocab,
                                         const kiln_token* recent, int32_t n_recent, kiln_token* out);

#ifdef __cplusplus
}
#endif

#endif /* KILN_H */
