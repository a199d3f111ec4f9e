#pragma once
// kiln-server's command line, spelled as llama-server's: -m, --host, --port,
// -c, -np, -t, --api-key, --chat-template-file, -ctk/-ctv, -n, -b, --no-mmap, --mlock.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/models/weight_placement.h"
#include "engine/runtime/sampler.h"

namespace kiln::server {

struct ServerOptions {
    std::string model;
    std::string host = "127.0.0.1";  // loopback unless asked: a model server is not a public service by default
    int port = 8080;
    int64_t ctx = 0;          // total context of all slots; 0: the model's (at most 4096) times the slots
    int64_t parallel = 1;     // -np: sequence slots, requests generated at the same time
    int64_t threads = 0;      // 0: physical performance cores (default_thread_count)
    int64_t http_threads = 0; // 0: enough for every slot and a queue of waiting clients
    std::vector<std::string> api_keys;  // --api-key and --api-key-file; empty: no key needed
    bool web_ui = true;       // the chat page at / (--no-webui: none)
    int64_t timeout_seconds = 600;  // -to: a connection's read and write timeout, as llama-server's
    std::string chat_template_file;
    std::string chat_template;  // --chat-template's text (a name resolved)
    DType cache_type = DType::F16;  // as CacheTypeFlags::kDefault (llama-server's f16)
    int64_t n_predict = -1;   // default max_tokens of a request; -1: until the slot's context is full
    int64_t batch = 512;      // min(-b, -ub): prompt tokens evaluated per step, over all slots
    size_t max_body_bytes = 8u << 20;
    std::string alias;        // the model id /v1/models reports (default: the file's name)
    WeightPlacement placement;  // --no-mmap, --mlock
    // --temp, --top-k, ..., --seed: what a request that leaves a field out gets.
    SamplerParams sampling;
    bool seed_given = false;
};

// Parses argv; throws cli::UsageError for a bad flag. --help prints and exits 0.
ServerOptions parse_server_options(int argc, char** argv);

}  // namespace kiln::server
