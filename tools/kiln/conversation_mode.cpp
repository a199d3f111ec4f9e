#include "tools/kiln/conversation_mode.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>

#include "engine/core/error.h"
#include "engine/models/architectures.h"
#include "engine/runtime/reply_stream.h"
#include "engine/runtime/thread_pool.h"
#include "formats/chat/conversation.h"
#include "formats/io/regular_file.h"
#include "formats/tokenizer/tokenizer.h"
#include "formats/tokenizer/utf8.h"
#include "tools/common/load_report.h"
#include "tools/common/vocabulary_fit.h"

namespace kiln::tool {
namespace {

// Ctrl-C: while a reply is generated, the first one stops the reply; a second
// one, or one while kiln waits for input, ends kiln (exit status 130, as a
// shell reports a process ended by SIGINT).
std::atomic<bool> g_generating{false};
std::atomic<int> g_interrupts{0};

extern "C" void on_interrupt(int) {
    if (!g_generating.load() || g_interrupts.fetch_add(1) >= 1) {
        const char newline = '\n';
        (void)!write(STDERR_FILENO, &newline, 1);
        _exit(130);
    }
}

void install_interrupt_handler() {
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, nullptr);
}

std::string read_template_file(const std::string& path) {
    std::string text = read_regular_file(path);
    if (text.empty()) fail("chat", "the chat template file '{}' is empty", path);
    return text;
}

void print(std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
}

}  // namespace

int run_conversation(const ConversationOptions& o, std::shared_ptr<const GgufFile> file) {
    const auto load_start = std::chrono::steady_clock::now();
    const auto lm = load_causal_lm(file, o.placement);
    const auto tokenizer = load_tokenizer(*file);
    tools::check_vocabulary_fits(*tokenizer, lm->info().n_vocab, o.model_path);
    tools::check_logit_bias_tokens(o.sampling, lm->info().n_vocab);
    const int64_t n_ctx = o.ctx > 0 ? o.ctx : std::min<int64_t>(lm->info().n_ctx_train, 4096);
    ModelChatTemplate chat = model_chat_template(*file, *tokenizer);
    if (!o.chat_template_file.empty() || !o.chat_template.empty()) {
        chat.source = o.chat_template.empty() ? read_template_file(o.chat_template_file) : o.chat_template;
        chat.is_fallback = false;
    } else if (chat.is_fallback) {
        fmt::print(stderr, "kiln: {} has no chat template: using ChatML (--chat-template-file FILE gives another)\n",
                   o.model_path);
    }
    Conversation conversation(*tokenizer, chat, o.system_prompt);  // a template that does not parse fails here
    std::vector<int32_t> end_of_turn;
    for (int32_t id = 0; id < static_cast<int32_t>(tokenizer->vocab_size()); ++id)
        if (tokenizer->is_eog(id)) end_of_turn.push_back(id);
    if (end_of_turn.empty() && o.stop_strings.empty())
        fmt::print(stderr, "kiln: the vocabulary has no end-of-turn token: replies end at -n or a full context (-r TEXT ends them too)\n");

    ThreadPool pool(static_cast<int>(o.threads), LoadAdaptation::follow_free_cpus);
    auto session = lm->new_session(n_ctx, 1, Executor::Mode::Fast, o.cache_types);
    if (o.verbose)
        cli::print_load_report(
            "kiln", std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count(),
            lm->weight_residence());
    Sampler sampler(o.sampling);
    const bool terminal = isatty(STDIN_FILENO) != 0;
    if (terminal) {
        install_interrupt_handler();
        fmt::print(stderr, "kiln: chatting with {} (context {}, seed {}); /exit or Ctrl-D ends, Ctrl-C stops a reply\n",
                   o.model_path, n_ctx, o.sampling.seed);
    }

    std::vector<int32_t> cached;  // the tokens in the KV cache, in order
    std::vector<float> masked;    // logits with end-of-turn tokens removed (--ignore-eos)
    bool first = o.has_first_message;
    int64_t turns = 0, prompt_tokens = 0, generated_tokens = 0;
    double prompt_seconds = 0, generation_seconds = 0;
    using clock = std::chrono::steady_clock;
    for (;;) {
        std::string message;
        if (first) {
            message = o.first_message;
            first = false;
            if (terminal) print(fmt::format("> {}\n", message));
        } else {
            if (terminal) print("> ");
            if (!std::getline(std::cin, message)) {
                if (terminal) print("\n");
                break;
            }
            if (!message.empty() && message.back() == '\r') message.pop_back();
        }
        if (message == "/exit") break;
        if (message.empty() && terminal) continue;
        if (!utf8_valid(message)) {
            fmt::print(stderr, "kiln: the message is not valid UTF-8; it was not sent\n");
            continue;
        }
        conversation.add("user", message);
        std::vector<int32_t> prompt;
        int64_t dropped = 0;
        try {
            // Room for at least one generated token.
            prompt = conversation.prompt(n_ctx - 1, &dropped);
        } catch (const Error& e) {
            fmt::print(stderr, "kiln: {}\n", e.what());
            continue;
        }
        if (dropped > 0)
            fmt::print(stderr, "kiln: the context of {} tokens is full: the oldest {} messages were dropped\n", n_ctx, dropped);
        // Evaluate only what the cache does not hold yet (at least one token, for its logits).
        const size_t keep = std::min(common_prefix(cached, prompt), prompt.size() - 1);
        session->truncate(0, static_cast<int64_t>(keep));
        cached = prompt;
        const auto prompt_start = clock::now();
        std::span<const float> logits = session->eval_in_pieces(std::span(prompt).subspan(keep), o.tokens_per_eval, pool);
        prompt_seconds += std::chrono::duration<double>(clock::now() - prompt_start).count();
        prompt_tokens += static_cast<int64_t>(prompt.size() - keep);

        const auto reply_start = clock::now();
        ReplyStream reply(o.stop_strings);
        std::string text;
        int64_t generated = 0;
        g_interrupts = 0;
        g_generating = true;
        const char* note = nullptr;
        for (;;) {
            if (o.n_predict >= 0 && generated >= o.n_predict) break;
            if (g_interrupts.load() > 0) {
                note = "stopped";
                break;
            }
            if (o.ignore_eos && !end_of_turn.empty()) {
                masked.assign(logits.begin(), logits.end());
                for (int32_t id : end_of_turn) masked[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
                logits = masked;
            }
            const int32_t next = sampler.sample(logits, cached);
            if (!o.ignore_eos && tokenizer->is_eog(next)) break;
            cached.push_back(next);
            ++generated;
            const std::string shown = reply.feed(tokenizer->piece(next));
            text += shown;
            print(shown);
            if (reply.stopped()) break;
            if (session->n_past() == n_ctx) {
                note = "the context is full";
                break;
            }
            logits = session->eval(std::span(&cached.back(), 1), pool);
        }
        g_generating = false;
        const std::string rest = reply.flush();
        text += rest;
        print(rest + "\n");
        if (note != nullptr) fmt::print(stderr, "kiln: [{}]\n", note);
        generation_seconds += std::chrono::duration<double>(clock::now() - reply_start).count();
        generated_tokens += generated;
        ++turns;
        conversation.add("assistant", text);
    }
    fmt::print(stderr, "kiln: {} turns | prompts {} new tokens, {:.1f} tokens/s | replies {} tokens, {:.1f} tokens/s\n",
               turns, prompt_tokens, prompt_seconds > 0 ? prompt_tokens / prompt_seconds : 0.0, generated_tokens,
               generation_seconds > 0 ? generated_tokens / generation_seconds : 0.0);
    return 0;
}

}  // namespace kiln::tool
