// kiln-server: serves a decoder-only model over HTTP, OpenAI-compatible, with
// continuous batching (tools/server/slot_scheduler.h). SIGTERM or SIGINT:
// stop accepting, end running streams cleanly, exit 0.
#include <fmt/format.h>
#include <httplib.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "engine/core/platform.h"
#include "engine/models/architectures.h"
#include "engine/runtime/thread_pool.h"
#include "formats/chat/chat_template.h"
#include "formats/gguf/gguf_file.h"
#include "formats/tokenizer/tokenizer.h"
#include "formats/io/regular_file.h"
#include "tools/common/cli.h"
#include "tools/common/vocabulary_fit.h"
#include "tools/server/http_routes.h"
#include "tools/server/server_options.h"
#include "tools/server/slot_scheduler.h"

namespace {

using namespace kiln::server;

// Waits, 0.2 s at a time, until one of the blocked `signals` arrives (its
// number) or `ended` turns true (-1).
int wait_for_signal(const sigset_t& signals, const std::atomic<bool>& ended) {
#if KILN_OS_LINUX
    const timespec poll{0, 200'000'000};
    int signal_number = -1;
    while (!ended && signal_number < 0) signal_number = sigtimedwait(&signals, nullptr, &poll);
    return signal_number;
#else
    // macOS has no sigtimedwait: look at what is pending, and take it with sigwait, which then returns at once.
    while (!ended) {
        sigset_t pending;
        sigemptyset(&pending);
        if (sigpending(&pending) == 0)
            for (int s : {SIGINT, SIGTERM})
                if (sigismember(&signals, s) == 1 && sigismember(&pending, s) == 1) {
                    int taken = s;
                    sigwait(&signals, &taken);
                    return taken;
                }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return -1;
#endif
}

int serve(const ServerOptions& o) {
    // Signals go to the one thread that waits for them (below), never to an
    // HTTP or engine thread; a client that hangs up must not kill the server.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    signal(SIGPIPE, SIG_IGN);

    auto file = std::make_shared<kiln::GgufFile>(kiln::GgufFile::open(o.model));
    if (kiln::is_seq2seq(*file)) kiln::fail("kiln-server", "{} is an encoder-decoder model: the server runs decoder-only models", o.model);
    const auto lm = kiln::load_causal_lm(file, o.placement);
    const auto tokenizer = kiln::load_tokenizer(*file);
    kiln::tools::check_vocabulary_fits(*tokenizer, lm->info().n_vocab, o.model);
    kiln::tools::check_logit_bias_tokens(o.sampling, lm->info().n_vocab);

    kiln::ModelChatTemplate chat_info = kiln::model_chat_template(*file, *tokenizer);
    if (!o.chat_template_file.empty() || !o.chat_template.empty()) {
        chat_info.source = o.chat_template.empty() ? kiln::read_regular_file(o.chat_template_file) : o.chat_template;
        chat_info.is_fallback = false;
    } else if (chat_info.is_fallback) {
        fmt::print(stderr, "kiln-server: the model has no chat template: using ChatML\n");
    }
    const kiln::ChatTemplate chat(chat_info.source);

    const int64_t total_ctx = o.ctx > 0 ? o.ctx : std::min<int64_t>(lm->info().n_ctx_train, 4096) * o.parallel;
    SchedulerConfig config;
    config.n_slots = o.parallel;
    config.n_ctx_per_slot = total_ctx / o.parallel;
    config.n_batch = o.batch;
    config.threads = o.threads > 0 ? static_cast<int>(o.threads) : kiln::ThreadPool::physical_cores();
    config.cache_type = o.cache_type;
    SlotScheduler scheduler(*lm, *tokenizer, config);

    ApiSettings settings;
    settings.model_id = o.alias.empty() ? std::filesystem::path(o.model).filename().string() : o.alias;
    settings.api_keys = o.api_keys;
    settings.web_ui = o.web_ui;
    settings.model_path = o.model;
    settings.sampling = o.sampling;
    settings.seed_given = o.seed_given;
    settings.default_max_tokens = o.n_predict;
    settings.max_body_bytes = o.max_body_bytes;
    HttpApi api(settings, lm->info(), *tokenizer, chat, chat_info, scheduler);

    httplib::Server server;
    // Every slot's client and the ones queued behind it hold a thread while they wait.
    const auto http_threads = static_cast<size_t>(o.http_threads > 0 ? o.http_threads : 2 * o.parallel + 16);
    server.new_task_queue = [http_threads] { return new httplib::ThreadPool(http_threads); };
    server.set_read_timeout(static_cast<time_t>(o.timeout_seconds), 0);
    server.set_write_timeout(static_cast<time_t>(o.timeout_seconds), 0);
    api.install(server);
    // httplib sets SO_REUSEPORT on Linux, which lets a second server bind the
    // same port and silently take half its connections. SO_REUSEADDR alone
    // still allows a restart while old connections sit in TIME_WAIT, and a
    // port that a live server holds fails to bind (the error below).
    server.set_socket_options([](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof(yes));
    });

    const int port = o.port == 0 ? server.bind_to_any_port(o.host) : (server.bind_to_port(o.host, o.port) ? o.port : -1);
    if (port < 0) kiln::fail("kiln-server", "cannot listen on {}:{} (in use, or not an address of this machine)", o.host, o.port);
    fmt::print(stderr, "kiln-server: {} ({}), {} slots of {} tokens, {} threads\n", settings.model_id,
               lm->info().architecture, config.n_slots, config.n_ctx_per_slot, config.threads);
    fmt::print(stderr, "kiln-server: listening on http://{}:{}\n", o.host, port);

    std::atomic<bool> listening_ended{false};
    std::thread listener([&] {
        server.listen_after_bind();
        listening_ended = true;
    });
    const int signal_number = wait_for_signal(signals, listening_ended);
    if (signal_number >= 0) fmt::print(stderr, "kiln-server: {} received: shutting down\n", strsignal(signal_number));
    // New requests get 503; the scheduler ends running ones, whose streams
    // then send their last event and [DONE]; then the listener stops.
    api.begin_shutdown();
    scheduler.stop();
    if (!api.wait_idle(10'000)) fmt::print(stderr, "kiln-server: some clients did not finish within 10 s\n");
    server.stop();
    listener.join();
    return listening_ended && signal_number < 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    return kiln::cli::run_tool("kiln-server", [&] { return serve(parse_server_options(argc, argv)); });
}
