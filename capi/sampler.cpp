// kiln.h: samplers (engine/runtime/sampler.h).
#include "capi/boundary.h"
#include "capi/handles.h"

using namespace kiln::capi;

extern "C" {

kiln_sampler_params kiln_sampler_default_params(void) {
    const kiln::SamplerParams d;
    kiln_sampler_params p{};
    p.temperature = d.temperature;
    p.top_k = d.top_k;
    p.top_p = d.top_p;
    p.min_p = d.min_p;
    p.repeat_penalty = d.repeat_penalty;
    p.repeat_last_n = d.repeat_last_n;
    p.seed = d.seed;
    return p;
}

kiln_status kiln_sampler_new(const kiln_sampler_params* params, kiln_sampler** out) {
    if (out != nullptr) *out = nullptr;
    return guard(__func__, [&] {
        const kiln_sampler_params& p = require(params, "params");
        require(out, "out");
        if (!(p.temperature >= 0)) reject(KILN_ERROR_INVALID_ARGUMENT, "temperature is {} (0 or more)", p.temperature);
        if (p.top_k < 0) reject(KILN_ERROR_INVALID_ARGUMENT, "top_k is {} (0 = off, or more)", p.top_k);
        if (!(p.top_p > 0 && p.top_p <= 1)) reject(KILN_ERROR_INVALID_ARGUMENT, "top_p is {} (in (0, 1])", p.top_p);
        if (!(p.min_p >= 0 && p.min_p <= 1)) reject(KILN_ERROR_INVALID_ARGUMENT, "min_p is {} (in [0, 1])", p.min_p);
        if (!(p.repeat_penalty > 0)) reject(KILN_ERROR_INVALID_ARGUMENT, "repeat_penalty is {} (above 0)", p.repeat_penalty);
        kiln::SamplerParams s;
        s.temperature = p.temperature;
        s.top_k = p.top_k;
        s.top_p = p.top_p;
        s.min_p = p.min_p;
        s.repeat_penalty = p.repeat_penalty;
        s.repeat_last_n = p.repeat_last_n;
        s.seed = p.seed;
        *out = new kiln_sampler{kiln::Sampler(s)};
    });
}

void kiln_sampler_free(kiln_sampler* sampler) { delete sampler; }

kiln_status kiln_sampler_sample(kiln_sampler* sampler, const float* logits, int32_t n_vocab, const kiln_token* recent,
                                int32_t n_recent, kiln_token* out) {
    return guard(__func__, [&] {
        kiln_sampler& s = require(sampler, "sampler");
        require(logits, "logits");
        require(out, "out");
        if (n_vocab < 1) reject(KILN_ERROR_INVALID_ARGUMENT, "n_vocab is {}", n_vocab);
        if (n_recent < 0 || (n_recent > 0 && recent == nullptr))
            reject(KILN_ERROR_INVALID_ARGUMENT, "recent is NULL or n_recent ({}) negative", n_recent);
        *out = s.sampler.sample({logits, static_cast<size_t>(n_vocab)}, {recent, static_cast<size_t>(n_recent)});
    });
}

}  // extern "C"
