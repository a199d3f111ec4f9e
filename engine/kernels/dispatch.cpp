// The public kernel functions (vector.h, convert.h, attention.h, gradients.h):
// each calls the same function of the kernel target chosen at start-up
// (kernel_targets.h). Built for the baseline, like everything outside the
// targets; one indirect call per row is all it costs.
#include "engine/kernels/attention.h"
#include "engine/kernels/convert.h"
#include "engine/kernels/gradients.h"
#include "engine/kernels/kernel_table.h"
#include "engine/kernels/kernel_targets.h"
#include "engine/kernels/vector.h"

namespace kiln::kernels {
namespace {
const detail::KernelTable& target() noexcept { return detail::active_kernel_table(); }
}  // namespace

void add(const float* a, const float* b, float* out, int64_t n) noexcept { target().add(a, b, out, n); }
void mul(const float* a, const float* b, float* out, int64_t n) noexcept { target().mul(a, b, out, n); }
void scale(const float* x, float s, float* out, int64_t n) noexcept { target().scale(x, s, out, n); }
void softcap(const float* x, float cap, float* out, int64_t n) noexcept { target().softcap(x, cap, out, n); }
void relu(const float* x, float* out, int64_t n) noexcept { target().relu(x, out, n); }
void silu(const float* x, float* out, int64_t n) noexcept { target().silu(x, out, n); }
void gelu_tanh(const float* x, float* out, int64_t n) noexcept { target().gelu_tanh(x, out, n); }
void gelu_erf(const float* x, float* out, int64_t n) noexcept { target().gelu_erf(x, out, n); }
void swiglu(const float* gate, const float* up, float* out, int64_t n) noexcept { target().swiglu(gate, up, out, n); }
float dot(const float* a, const float* b, int64_t n) noexcept { return target().dot(a, b, n); }
void rms_norm(const float* x, const float* weight, float eps, float* out, int64_t n) noexcept {
    target().rms_norm(x, weight, eps, out, n);
}
void layer_norm(const float* x, const float* weight, const float* bias, float eps, float* out, int64_t n) noexcept {
    target().layer_norm(x, weight, bias, eps, out, n);
}
void softmax(const float* x, float* out, int64_t n) noexcept { target().softmax(x, out, n); }
void rope(float* x, const RopeSpec& s, int64_t pos, const float* freq_factors) noexcept {
    target().rope(x, s, pos, freq_factors);
}
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float freq_base) noexcept {
    target().rope(x, RopeSpec{.n_heads = n_heads, .head_dim = head_dim, .n_rot = n_rot, .freq_base = freq_base}, pos, nullptr);
}

void fp32_to_fp16_row(const float* x, uint16_t* out, int64_t n) noexcept { target().fp32_to_fp16_row(x, out, n); }

void attend(const float* q, const float* k, size_t k_stride, const float* v, size_t v_stride, int64_t kv_len,
            int64_t head_dim, float scale, const uint8_t* kv_valid, float* out, float* scratch, float softcap,
            int64_t kv_start) noexcept {
    target().attend(q, k, k_stride, v, v_stride, kv_len, head_dim, scale, kv_valid, out, scratch, softcap, kv_start);
}
void attend_block(const AttentionQuery* queries, int n_queries, const float* k, size_t k_stride, const float* v,
                  size_t v_stride, int64_t head_dim, float scale, float* scratch, float softcap) noexcept {
    target().attend_block_f32(queries, n_queries, k, k_stride, v, v_stride, head_dim, scale, scratch, softcap);
}
size_t attend_block_scratch(int64_t max_kv_len) noexcept { return target().attend_block_scratch(max_kv_len); }
bool attention_cache_type(DType type) noexcept { return target().attention_cache_type(type); }
void attend_block(const AttentionQuery* queries, int n_queries, CacheHead k, CacheHead v, int64_t head_dim,
                  float scale, float* scratch, float softcap) noexcept {
    target().attend_block_cache(queries, n_queries, k, v, head_dim, scale, scratch, softcap);
}
size_t attention_partial_doubles(int64_t head_dim) noexcept { return target().attention_partial_doubles(head_dim); }
int64_t attention_chunks(const AttentionQuery* queries, int n_queries) noexcept {
    return target().attention_chunks(queries, n_queries);
}
void attend_chunk(const AttentionQuery* queries, int n_queries, CacheHead k, CacheHead v, int64_t head_dim,
                  float scale, int64_t chunk, double* partials, float* scratch, float softcap) noexcept {
    target().attend_chunk(queries, n_queries, k, v, head_dim, scale, chunk, partials, scratch, softcap);
}
void merge_attention_chunks(const double* partials, int64_t n_chunks, size_t chunk_stride, int64_t head_dim,
                            float* out) noexcept {
    target().merge_attention_chunks(partials, n_chunks, chunk_stride, head_dim, out);
}

void relu_grad(const float* x, const float* grad, float* out, int64_t n) noexcept {
    target().relu_grad(x, grad, out, n);
}
void gelu_tanh_grad(const float* x, const float* grad, float* out, int64_t n) noexcept {
    target().gelu_tanh_grad(x, grad, out, n);
}
void gelu_erf_grad(const float* x, const float* grad, float* out, int64_t n) noexcept {
    target().gelu_erf_grad(x, grad, out, n);
}
void silu_grad(const float* x, const float* grad, float* out, int64_t n) noexcept {
    target().silu_grad(x, grad, out, n);
}
void rms_norm_grad(const float* x, const float* weight, const float* grad, float eps, float* out, int64_t n) {
    target().rms_norm_grad(x, weight, grad, eps, out, n);
}
void layer_norm_grad(const float* x, const float* weight, const float* grad, float eps, float* out, int64_t n) {
    target().layer_norm_grad(x, weight, grad, eps, out, n);
}
void softmax_grad(const float* y, const float* grad, float* out, int64_t n) { target().softmax_grad(y, grad, out, n); }
float cross_entropy(const float* x, int64_t n, int32_t target_index) {
    return target().cross_entropy(x, n, target_index);
}
void cross_entropy_grad(const float* x, int64_t n, int32_t target_index, float row_grad, float* out) {
    target().cross_entropy_grad(x, n, target_index, row_grad, out);
}

}  // namespace kiln::kernels
