/*
 * Drives kiln's C API (include/kiln.h) end to end, compiled as C99. The Catch2
 * test tests/test_capi.cpp runs it and compares what it prints with the kiln
 * tool's output.
 *
 *   capi_driver generate MODEL PROMPT N   greedy text, printed as `kiln --temp 0` prints it
 *   capi_driver checks MODEL              batch decoding, chat template, error paths;
 *                                         prints "ok" or the failed check, exits 1
 */
#include <kiln.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "check failed at line %d: %s (last error: %s)\n", __LINE__, \
                    #cond, kiln_last_error());                                        \
            ++failures;                                                               \
        }                                                                             \
    } while (0)

/* Greedy: the token with the largest logit (the first one on ties, like kiln's sampler). */
static kiln_token argmax(const float* logits, int32_t n_vocab) {
    kiln_token best = 0;
    int32_t i;
    for (i = 1; i < n_vocab; ++i)
        if (logits[i] > logits[best]) best = i;
    return best;
}

static int generate(const char* path, const char* prompt, int32_t n_predict) {
    kiln_model* model = NULL;
    kiln_context* ctx = NULL;
    kiln_sampler* sampler = NULL;
    kiln_model_info info;
    kiln_context_params cp = kiln_context_default_params();
    kiln_sampler_params sp = kiln_sampler_default_params();
    kiln_token* tokens = NULL;
    int32_t n = 0, capacity = 0, generated = 0;
    char piece[256];
    size_t piece_len = 0;
    int status = 1;

    if (kiln_model_load(path, &model) != KILN_OK) goto done;
    if (kiln_model_get_info(model, &info) != KILN_OK) goto done;
    /* Ask for the size first, then tokenize into a buffer with room to generate. */
    if (kiln_tokenize(model, prompt, -1, 1, 1, NULL, 0, &n) != KILN_ERROR_BUFFER_TOO_SMALL) goto done;
    capacity = n + n_predict + 1;
    tokens = (kiln_token*)malloc(sizeof(kiln_token) * (size_t)capacity);
    if (tokens == NULL) goto done;
    if (kiln_tokenize(model, prompt, -1, 1, 1, tokens, capacity, &n) != KILN_OK) goto done;
    cp.n_threads = 1;
    if (kiln_context_new(model, &cp, &ctx) != KILN_OK) goto done;
    sp.temperature = 0.0f;
    if (kiln_sampler_new(&sp, &sampler) != KILN_OK) goto done;

    fputs(prompt, stdout);
    if (kiln_decode(ctx, tokens, NULL, n) != KILN_OK) goto done;
    while (generated < n_predict) {
        const float* logits = kiln_logits(ctx, generated == 0 ? n - 1 : 0);
        kiln_token next;
        if (logits == NULL) goto done;
        if (kiln_sampler_sample(sampler, logits, info.n_vocab, tokens, n, &next) != KILN_OK) goto done;
        if (kiln_token_is_eog(model, next)) break;
        tokens[n++] = next;
        ++generated;
        if (kiln_token_piece(model, next, piece, sizeof piece, &piece_len) != KILN_OK) goto done;
        fwrite(piece, 1, piece_len, stdout);
        if (generated == n_predict) break;
        if (kiln_decode(ctx, &next, NULL, 1) != KILN_OK) goto done;
    }
    fputs("\n", stdout);
    status = 0;
done:
    if (status != 0) fprintf(stderr, "capi_driver: %s\n", kiln_last_error());
    free(tokens);
    kiln_sampler_free(sampler);
    kiln_context_free(ctx);
    kiln_model_free(model);
    return status;
}

enum { kSteps = 12, kMaxTokens = 64 };

/* Greedy continuation of prompt in its own one-slot context. */
static void run_alone(const kiln_model* model, const char* prompt, int32_t n_vocab, kiln_token* out) {
    kiln_context_params cp = kiln_context_default_params();
    kiln_context* ctx = NULL;
    kiln_token tokens[kMaxTokens];
    int32_t n = 0, step;
    cp.n_threads = 1;
    CHECK(kiln_context_new(model, &cp, &ctx) == KILN_OK);
    CHECK(kiln_tokenize(model, prompt, -1, 1, 1, tokens, kMaxTokens, &n) == KILN_OK);
    CHECK(kiln_decode(ctx, tokens, NULL, n) == KILN_OK);
    out[0] = argmax(kiln_logits(ctx, n - 1), n_vocab);
    for (step = 1; step < kSteps; ++step) {
        CHECK(kiln_decode(ctx, &out[step - 1], NULL, 1) == KILN_OK);
        out[step] = argmax(kiln_logits(ctx, 0), n_vocab);
    }
    kiln_context_free(ctx);
}

/* Both prompts in one two-slot context: their prompts in one mixed batch,
 * then one batch of two tokens per step. */
static void check_two_slots(const kiln_model* model, int32_t n_vocab) {
    const char* prompts[2] = {"Once upon a time", "The little dog"};
    kiln_token alone[2][kSteps], together[2][kSteps];
    kiln_token batch[2 * kMaxTokens], a[kMaxTokens], b[kMaxTokens];
    int32_t slots[2 * kMaxTokens];
    int32_t na = 0, nb = 0, n = 0, i, step, last_a = -1, last_b = -1;
    kiln_context_params cp = kiln_context_default_params();
    kiln_context* ctx = NULL;

    run_alone(model, prompts[0], n_vocab, alone[0]);
    run_alone(model, prompts[1], n_vocab, alone[1]);

    cp.n_slots = 2;
    cp.n_threads = 1;
    CHECK(kiln_context_new(model, &cp, &ctx) == KILN_OK);
    CHECK(kiln_context_n_slots(ctx) == 2);
    CHECK(kiln_tokenize(model, prompts[0], -1, 1, 1, a, kMaxTokens, &na) == KILN_OK);
    CHECK(kiln_tokenize(model, prompts[1], -1, 1, 1, b, kMaxTokens, &nb) == KILN_OK);
    /* Interleave the two prompts, so the batch really mixes slots. */
    for (i = 0; i < na || i < nb; ++i) {
        if (i < na) { batch[n] = a[i]; slots[n] = 0; last_a = n++; }
        if (i < nb) { batch[n] = b[i]; slots[n] = 1; last_b = n++; }
    }
    CHECK(kiln_decode(ctx, batch, slots, n) == KILN_OK);
    CHECK(kiln_slot_length(ctx, 0) == na && kiln_slot_length(ctx, 1) == nb);
    together[0][0] = argmax(kiln_logits(ctx, last_a), n_vocab);
    together[1][0] = argmax(kiln_logits(ctx, last_b), n_vocab);
    for (step = 1; step < kSteps; ++step) {
        kiln_token next[2];
        int32_t next_slots[2] = {0, 1};
        next[0] = together[0][step - 1];
        next[1] = together[1][step - 1];
        CHECK(kiln_decode(ctx, next, next_slots, 2) == KILN_OK);
        together[0][step] = argmax(kiln_logits(ctx, 0), n_vocab);
        together[1][step] = argmax(kiln_logits(ctx, 1), n_vocab);
    }
    CHECK(memcmp(alone[0], together[0], sizeof alone[0]) == 0);
    CHECK(memcmp(alone[1], together[1], sizeof alone[1]) == 0);

    /* Truncating slot 1 back to its prompt and decoding again gives the same first token. */
    CHECK(kiln_slot_truncate(ctx, 1, nb - 1) == KILN_OK);
    CHECK(kiln_slot_length(ctx, 1) == nb - 1);
    CHECK(kiln_decode(ctx, &b[nb - 1], &slots[last_b], 1) == KILN_OK);
    CHECK(argmax(kiln_logits(ctx, 0), n_vocab) == alone[1][0]);
    CHECK(kiln_slot_clear(ctx, 0) == KILN_OK);
    CHECK(kiln_slot_length(ctx, 0) == 0);
    kiln_context_free(ctx);
}

static void check_chat(const kiln_model* model) {
    /* stories260K has no template: the model's is ChatML. */
    const kiln_chat_message messages[2] = {{"system", "Be brief."}, {"user", "Hi"}};
    const char* chatml =
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
    const char* custom = "{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}\n{% endfor %}"
                         "{% if add_generation_prompt %}[ASSISTANT]{% endif %}";
    char text[512];
    size_t len = 0;
    int32_t n = 0;
    kiln_token tokens[kMaxTokens];
    CHECK(kiln_chat_apply(model, NULL, messages, 2, 1, text, sizeof text, &len) == KILN_OK);
    CHECK(strcmp(text, chatml) == 0 && len == strlen(chatml));
    CHECK(kiln_chat_apply(model, custom, messages, 2, 1, text, sizeof text, &len) == KILN_OK);
    CHECK(strcmp(text, "[SYSTEM] Be brief.\n[USER] Hi\n[ASSISTANT]") == 0);
    CHECK(kiln_chat_apply(model, custom, messages, 2, 0, text, sizeof text, &len) == KILN_OK);
    CHECK(strcmp(text, "[SYSTEM] Be brief.\n[USER] Hi\n") == 0);
    /* Too small a buffer reports the size and writes nothing. */
    text[0] = 'x';
    CHECK(kiln_chat_apply(model, NULL, messages, 2, 1, text, 4, &len) == KILN_ERROR_BUFFER_TOO_SMALL);
    CHECK(len == strlen(chatml) && text[0] == 'x');
    /* A template that does not parse is an error naming the problem. */
    CHECK(kiln_chat_apply(model, "{% for %}", messages, 2, 1, text, sizeof text, &len) == KILN_ERROR_FAILED);
    CHECK(strstr(kiln_last_error(), "chat") != NULL);
    /* A rendered prompt's tokens start with one BOS. */
    CHECK(kiln_chat_tokenize(model, "Hi", tokens, kMaxTokens, &n) == KILN_OK);
    CHECK(n >= 2 && tokens[0] == 1 && tokens[1] != 1);
}

static void check_errors(const kiln_model* model, int32_t n_vocab) {
    kiln_model* missing = (kiln_model*)1;
    kiln_context* ctx = NULL;
    kiln_context_params cp = kiln_context_default_params();
    kiln_token bad[2] = {1, 0};
    int32_t slot = 5, n = 0;
    char text[64];
    size_t len = 0;

    CHECK(kiln_model_load("/nonexistent/model.gguf", &missing) == KILN_ERROR_MODEL);
    CHECK(missing == NULL);
    CHECK(strstr(kiln_last_error(), "/nonexistent/model.gguf") != NULL);
    CHECK(kiln_model_load(NULL, &missing) == KILN_ERROR_INVALID_ARGUMENT);

    cp.n_ctx = 8;
    cp.n_threads = 1;
    CHECK(kiln_context_new(model, &cp, &ctx) == KILN_OK);
    CHECK(kiln_context_n_ctx(ctx) == 8);
    bad[1] = n_vocab + 7;
    CHECK(kiln_decode(ctx, bad, NULL, 2) == KILN_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(kiln_last_error(), "outside the vocabulary") != NULL);
    CHECK(kiln_slot_length(ctx, 0) == 0); /* nothing was appended */
    bad[1] = -1;
    CHECK(kiln_decode(ctx, bad, NULL, 2) == KILN_ERROR_INVALID_ARGUMENT);
    bad[1] = 0;
    CHECK(kiln_decode(ctx, bad, &slot, 1) == KILN_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(kiln_last_error(), "slot 5") != NULL);
    CHECK(kiln_logits(ctx, 0) == NULL); /* no decode has succeeded yet */
    {
        kiln_token nine[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
        CHECK(kiln_decode(ctx, nine, NULL, 9) == KILN_ERROR_CONTEXT_FULL);
        CHECK(kiln_decode(ctx, nine, NULL, 8) == KILN_OK);
        CHECK(kiln_decode(ctx, nine, NULL, 1) == KILN_ERROR_CONTEXT_FULL);
        CHECK(kiln_logits(ctx, 7) != NULL && kiln_logits(ctx, 8) == NULL);
    }
    CHECK(kiln_slot_truncate(ctx, 0, 9) == KILN_ERROR_INVALID_ARGUMENT);
    CHECK(kiln_context_clear(ctx) == KILN_OK && kiln_slot_length(ctx, 0) == 0);
    CHECK(kiln_context_set_threads(ctx, 0) == KILN_ERROR_INVALID_ARGUMENT);
    kiln_context_free(ctx);

    CHECK(kiln_token_piece(model, n_vocab, text, sizeof text, &len) == KILN_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(kiln_last_error(), "outside the vocabulary") != NULL);
    CHECK(kiln_detokenize(model, bad, 2, 1, text, sizeof text, &len) == KILN_OK); /* {1, 0} */
    CHECK(kiln_token_is_eog(model, -3) == 0 && kiln_token_is_eog(model, n_vocab) == 0);
    CHECK(kiln_tokenize(model, "Once upon a time", -1, 1, 1, NULL, 0, &n) == KILN_ERROR_BUFFER_TOO_SMALL);
    CHECK(n > 1);
    {
        kiln_sampler_params sp = kiln_sampler_default_params();
        kiln_sampler* sampler = (kiln_sampler*)1;
        sp.top_p = 0.0f;
        CHECK(kiln_sampler_new(&sp, &sampler) == KILN_ERROR_INVALID_ARGUMENT && sampler == NULL);
    }
    kiln_model_free(NULL);
    kiln_context_free(NULL);
    kiln_sampler_free(NULL);
}

/* The weights read into memory and locked (kiln --no-mmap --mlock) give the
 * greedy tokens of the default, mapped model. */
static void check_placement(const char* path, const kiln_model* mapped, int32_t n_vocab) {
    kiln_model_params mp = kiln_model_default_params();
    kiln_model* copied = NULL;
    kiln_token a[kSteps], b[kSteps];
    CHECK(mp.use_mmap == 1 && mp.use_mlock == 0);
    mp.use_mmap = 0;
    mp.use_mlock = 1;
    CHECK(kiln_model_load_with_params(path, &mp, &copied) == KILN_OK);
    if (copied == NULL) return;
    run_alone(mapped, "Once upon a time", n_vocab, a);
    run_alone(copied, "Once upon a time", n_vocab, b);
    CHECK(memcmp(a, b, sizeof a) == 0);
    kiln_model_free(copied);
}

static int checks(const char* path) {
    kiln_model* model = NULL;
    kiln_model_info info;
    if (kiln_model_load(path, &model) != KILN_OK) {
        fprintf(stderr, "capi_driver: %s\n", kiln_last_error());
        return 1;
    }
    CHECK(kiln_model_get_info(model, &info) == KILN_OK);
    CHECK(strcmp(info.architecture, "llama") == 0);
    CHECK(info.n_vocab == 512 && info.has_chat_template == 0 && info.bos == 1 && info.eos == 2);
    CHECK(strlen(kiln_version()) > 0);
    check_two_slots(model, info.n_vocab);
    check_placement(path, model, info.n_vocab);
    check_chat(model);
    check_errors(model, info.n_vocab);
    kiln_model_free(model);
    if (failures == 0) puts("ok");
    return failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
    if (argc == 5 && strcmp(argv[1], "generate") == 0) return generate(argv[2], argv[3], atoi(argv[4]));
    if (argc == 3 && strcmp(argv[1], "checks") == 0) return checks(argv[2]);
    fprintf(stderr, "usage: capi_driver generate MODEL PROMPT N | capi_driver checks MODEL\n");
    return 2;
}
