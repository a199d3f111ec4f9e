// Where a model's weights live (engine/models/resident_weights.h): by default
// the computation reads the file mapping, with copies only of the tensors the
// kernels read rearranged; --no-mmap copies every tensor, byte for byte, and
// the logits are the same bits; --mlock locks what the model reads, and a
// refusal (RLIMIT_MEMLOCK) is one warning line while the model runs on.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/capability.h>
#include <sys/syscall.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "engine/kernels/matmul.h"
#include "engine/models/decoder_lm.h"
#include "engine/models/llama.h"
#include "engine/quant/interleave.h"
#include "support/child_process.h"
#include "support/paths.h"
#include "support/quantized_llama.h"
#include "support/sample_gguf.h"

using namespace kiln;

namespace {

std::shared_ptr<const GgufFile> stories() {
    return std::make_shared<const GgufFile>(GgufFile::open(test::shared_models_dir() / "stories260K.gguf"));
}

// A prompt's logits, then one decode step's.
std::vector<float> logits_of(const CausalLm& model, ThreadPool& pool, std::vector<int32_t> prompt) {
    const auto session = model.new_session(32, 1, Executor::Mode::Fast);
    auto first = session->eval(prompt, pool, true);
    std::vector<float> all(first.begin(), first.end());
    const int32_t next = 42;
    auto step = session->eval(std::span(&next, 1), pool);
    all.insert(all.end(), step.begin(), step.end());
    return all;
}

const std::vector<int32_t> kStoriesPrompt = {1, 403, 407, 261, 378};

uint64_t tensor_bytes(const GgufFile& file) {
    uint64_t total = 0;
    for (const GgufTensor& t : file.tensors()) total += t.data.size();
    return total;
}

// A field of /proc/self/status in KiB ("VmLck:    1024 kB"); -1 where there is none (off Linux).
long status_kib(std::string_view field) {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.starts_with(field)) return std::stol(line.substr(field.size() + 1));
    return -1;
}

// Whether this process may lock `bytes` more: CAP_IPC_LOCK (root), or room under RLIMIT_MEMLOCK.
bool may_lock(uint64_t bytes) {
#if defined(__linux__)
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    if (::syscall(SYS_capget, &header, data) == 0 && (data[CAP_IPC_LOCK / 32].effective & (1u << (CAP_IPC_LOCK % 32))))
        return true;
#endif
    rlimit limit{};
    return ::getrlimit(RLIMIT_MEMLOCK, &limit) == 0 &&
           (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= bytes + static_cast<uint64_t>(status_kib("VmLck:")) * 1024);
}

// Removes CAP_IPC_LOCK from this process's effective set, so that
// RLIMIT_MEMLOCK applies to it even when it runs as root. True on success.
bool drop_ipc_lock_capability() {
#if defined(__linux__)
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    if (::syscall(SYS_capget, &header, data) != 0) return false;
    data[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
    return ::syscall(SYS_capset, &header, data) == 0;
#else
    return ::geteuid() != 0;  // no capabilities to drop: only a non-root process is held to the limit
#endif
}

}  // namespace

TEST_CASE("by default weights are read from the file mapping, and --no-mmap copies give the same logits",
          "[llama][threads]") {
    const auto file = stories();
    ThreadPool pool(2);
    const DecoderLm mapped(file, load_llama_decoder(*file));
    const WeightResidence& m = mapped.weight_residence();
    CHECK(m.placement.mmap);
    // stories260K is F32: no kernel set rearranges F32, so nothing is copied.
    CHECK(m.copies.empty());
    CHECK(m.copied_bytes == 0);
    CHECK(m.mapped_bytes == tensor_bytes(*file));
    for (const GgufTensor& t : file->tensors()) CHECK(mapped.tensor_data(t) == t.data.data());

    WeightPlacement no_mmap;
    no_mmap.mmap = false;
    const DecoderLm copied(file, load_llama_decoder(*file), no_mmap);
    const WeightResidence& c = copied.weight_residence();
    CHECK_FALSE(c.placement.mmap);
    CHECK(c.mapped_bytes == 0);
    CHECK(c.copied_bytes == tensor_bytes(*file));
    REQUIRE(c.copies.size() == file->tensors().size());
    for (size_t i = 0; i < c.copies.size(); ++i) {
        const GgufTensor& t = file->tensors()[i];
        CHECK(c.copies[i].name == t.name);
        CHECK(c.copies[i].type == t.type);
        CHECK(c.copies[i].bytes == t.data.size());
        const std::byte* p = copied.tensor_data(t);
        CHECK(p != t.data.data());
        CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
        CHECK(std::memcmp(p, t.data.data(), t.data.size()) == 0);
    }
    CHECK(logits_of(mapped, pool, kStoriesPrompt) == logits_of(copied, pool, kStoriesPrompt));
}

TEST_CASE("a mapped quantized model copies only the matrices the kernels read interleaved", "[llama][interleave]") {
    test::TempDir dir;
    const auto file = std::make_shared<const GgufFile>(GgufFile::open(test::write_q4_k_llama(dir.path())));
    const DecoderLm mapped(file, load_llama_decoder(*file));
    const WeightResidence& m = mapped.weight_residence();
    INFO("kernels " << kernels::active_matmul_kernels().name);
    size_t interleaved = 0;
    for (const GgufTensor& t : file->tensors()) {
        const bool matrix = t.dims.size() == 2 && t.name != "token_embd.weight";
        const bool interleaves =
            matrix &&
            kernels::weight_layout(kernels::active_matmul_kernels(), t.type, static_cast<int64_t>(t.dims[1])).has_value();
        interleaved += interleaves ? 1 : 0;
        const auto copy = std::find_if(m.copies.begin(), m.copies.end(), [&](const CopiedTensor& c) { return c.name == t.name; });
        if (interleaves && matrix) {
            REQUIRE(copy != m.copies.end());
            CHECK(quant::is_interleaved(copy->type));
            CHECK(quant::plain_type(copy->type) == t.type);
            CHECK(copy->bytes == t.data.size());
            CHECK(mapped.tensor_data(t) != t.data.data());
        } else {
            CHECK(copy == m.copies.end());
            CHECK(mapped.tensor_data(t) == t.data.data());
        }
    }
    CHECK(m.copies.size() == interleaved);
    CHECK(m.mapped_bytes + m.copied_bytes == tensor_bytes(*file));

    // --no-mmap rearranges the same matrices and copies the rest as they are: the same bits out.
    WeightPlacement no_mmap;
    no_mmap.mmap = false;
    const DecoderLm copied(file, load_llama_decoder(*file), no_mmap);
    CHECK(copied.weight_residence().copies.size() == file->tensors().size());
    for (const CopiedTensor& c : m.copies) {
        const auto same = std::find_if(copied.weight_residence().copies.begin(), copied.weight_residence().copies.end(),
                                       [&](const CopiedTensor& x) { return x.name == c.name; });
        REQUIRE(same != copied.weight_residence().copies.end());
        CHECK(same->type == c.type);
    }
    ThreadPool pool(2);
    const std::vector<int32_t> prompt = {1, 17, 200, 33, 5, 90, 121, 7};
    CHECK(logits_of(mapped, pool, prompt) == logits_of(copied, pool, prompt));
}

TEST_CASE("the tensors given a layout, and only they, are copied rearranged, and their mapped pages stay intact",
          "[llama][interleave]") {
    // Whatever kernel set this CPU runs: the layouts are given here.
    test::TempDir dir;
    const auto file = std::make_shared<const GgufFile>(GgufFile::open(test::write_q4_k_llama(dir.path())));
    const GgufTensor& q = file->get_tensor("blk.0.attn_q.weight");
    const GgufTensor& down = file->get_tensor("blk.1.ffn_down.weight");
    REQUIRE(q.type == DType::Q4_K);
    REQUIRE(down.type == DType::Q6_K);
    const std::vector<std::byte> q_before(q.data.begin(), q.data.end());
    const ResidentWeights weights(*file, WeightPlacement{}, {{q.name, DType::Q4_K_R16}, {down.name, DType::Q6_K_R16}});
    const WeightResidence& r = weights.residence();
    REQUIRE(r.copies.size() == 2);
    CHECK(r.copies[0].name == q.name);  // the file's order
    CHECK(r.copies[0].type == DType::Q4_K_R16);
    CHECK(r.copies[0].bytes == q.data.size());
    CHECK(r.copies[1].name == down.name);
    CHECK(r.copies[1].type == DType::Q6_K_R16);
    CHECK(r.copied_bytes == q.data.size() + down.data.size());
    CHECK(r.mapped_bytes == tensor_bytes(*file) - r.copied_bytes);
    for (const GgufTensor& t : file->tensors()) {
        const bool rearranged = &t == &q || &t == &down;
        CHECK(weights.copied(t) == rearranged);
        CHECK(weights.type(t) == (&t == &q ? DType::Q4_K_R16 : &t == &down ? DType::Q6_K_R16 : t.type));
        CHECK((weights.data(t) == t.data.data()) == !rearranged);
    }
    // The copy holds the same blocks, 16 rows interleaved: row r's first block comes back.
    const int64_t k = static_cast<int64_t>(q.dims[0]);
    const size_t block = type_traits(DType::Q4_K).block_bytes, row_bytes = q.data.size() / q.dims[1];
    std::vector<std::byte> out(block);
    for (int row : {0, 5, 15}) {
        quant::deinterleaved_block(DType::Q4_K_R16, weights.data(q), k, row, 0, out.data());
        CHECK(std::memcmp(out.data(), q.data.data() + row * row_bytes, block) == 0);
    }
    // Releasing the copied tensor's mapped pages must not change the file's bytes.
    CHECK(std::memcmp(q_before.data(), q.data.data(), q_before.size()) == 0);
}

TEST_CASE("with --mlock the weights the model reads are locked", "[llama]") {
    if (test::under_sanitizer()) {
        WARN("skipped: ASan and TSan take mlock() over and lock nothing");
        return;
    }
    const auto file = stories();
    WeightPlacement placement;
    placement.mlock = true;
    const long locked_before = status_kib("VmLck:");
    if (locked_before < 0) {
        WARN("skipped: no VmLck in /proc/self/status (not Linux) to count the locked pages");
        return;
    }
    // The mapped pages (1.1 MiB) and then the copies (one 2 MiB page) are locked.
    if (!may_lock(uint64_t{4} << 20)) {
        WARN("RLIMIT_MEMLOCK leaves less than 4 MiB to lock and CAP_IPC_LOCK is missing: lock sizes not checked");
        return;
    }
    for (const bool mmap : {true, false}) {
        placement.mmap = mmap;
        const DecoderLm model(file, load_llama_decoder(*file), placement);
        const WeightResidence& r = model.weight_residence();
        INFO("mmap " << mmap);
        // Whole pages: at least the tensors' bytes (mapped) or the copies' (2 MiB pages).
        CHECK(r.locked_bytes >= tensor_bytes(*file));
        // The kernel counts them too.
        CHECK(status_kib("VmLck:") - locked_before >= static_cast<long>(r.locked_bytes / 1024));
    }
}

TEST_CASE("an mlock refused by RLIMIT_MEMLOCK is one warning line, and the model runs unlocked", "[llama]") {
    if (test::under_sanitizer()) {
        WARN("skipped: ASan and TSan take mlock() over, so it never fails there");
        return;
    }
    const auto file = stories();
    ThreadPool pool(1);
    const DecoderLm plain(file, load_llama_decoder(*file));
    const std::vector<float> expected = logits_of(plain, pool, kStoriesPrompt);
    test::TempDir dir;
    const auto err_path = dir.path() / "stderr.txt";
    const int status = test::run_in_child([&] {
        const rlimit tiny{4096, 4096};
        if (::setrlimit(RLIMIT_MEMLOCK, &tiny) != 0) return 10;
        if (!drop_ipc_lock_capability()) return 11;
        const int fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || ::dup2(fd, STDERR_FILENO) < 0) return 12;
        WeightPlacement placement;
        placement.mlock = true;
        const DecoderLm model(file, load_llama_decoder(*file), placement);
        if (model.weight_residence().locked_bytes != 0) return 13;
        ThreadPool child_pool(1);
        return logits_of(model, child_pool, kStoriesPrompt) == expected ? 0 : 14;
    });
    CHECK(status == 0);
    std::ifstream in(err_path);
    std::stringstream err;
    err << in.rdbuf();
    const std::string text = err.str();
    INFO("stderr: " << text);
    REQUIRE(!text.empty());
    CHECK(text.find('\n') == text.size() - 1);  // one line
    CHECK(text.starts_with("warning: "));
    CHECK(text.find("RLIMIT_MEMLOCK is 4 KiB") != std::string::npos);
    CHECK(text.find("ulimit -l") != std::string::npos);
}
