#include "support/quantized_llama.h"

#include <random>
#include <vector>

#include "formats/arch/llama_arch.h"
#include "formats/gguf/gguf_writer.h"

namespace kiln::test {

std::filesystem::path write_q4_k_llama(const std::filesystem::path& dir) {
    arch::LlamaParams p;
    p.n_vocab = 256;
    p.n_ctx_train = 64;
    p.dim = 256;
    p.n_layers = 2;
    p.n_heads = 4;
    p.n_kv_heads = 2;
    p.ffn_dim = 512;
    p.n_rot = 64;
    GgufWriter w;
    for (const GgufEntry& e : p.metadata()) w.set(e.key, e.value);
    std::mt19937 rng(42);
    std::normal_distribution<float> normal(0.0f, 0.08f);
    std::vector<std::vector<std::byte>> data;
    for (const arch::TensorSpec& spec : arch::llama_tensor_specs(p)) {
        if (spec.optional && spec.role != arch::TensorRole::Matrix) continue;  // no biases, no rope factors
        uint64_t n = 1;
        for (uint64_t d : spec.dims) n *= d;
        const bool matrix = spec.dims.size() == 2;
        std::vector<float> values(n);
        for (float& v : values) v = matrix ? normal(rng) : 1.0f + 0.1f * normal(rng);
        // As in a Q4_K_M file: the head and the FFN's down projections Q6_K.
        const bool six = spec.name == "output.weight" || spec.name.find("ffn_down") != std::string::npos;
        const DType type = !matrix ? DType::F32 : six ? DType::Q6_K : DType::Q4_K;
        data.emplace_back(*checked_bytes(type, n));
        type_traits(type).from_float_ref(values.data(), data.back().data(), static_cast<int64_t>(n));
        w.add_tensor(spec.name, type, spec.dims, data.back());
    }
    const auto path = dir / "q4_k_llama.gguf";
    w.write(path);
    return path;
}

}  // namespace kiln::test
