#include "formats/checkpoint/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/checkpoint/json_limits.h"
#include "formats/io/atomic_file.h"
#include "formats/io/mapped_file.h"

namespace kiln {
namespace {

using nlohmann::json;

// Real headers are a few hundred bytes per tensor; 100 MB allows about a
// million tensors while stopping a corrupt length from driving the parser.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
constexpr size_t kLengthBytes = 8;

struct DTypeName {
    std::string_view name;
    DType type;
};
constexpr DTypeName kReadable[] = {{"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16}};

std::string_view safetensors_name(DType type) {
    for (const DTypeName& d : kReadable)
        if (d.type == type) return d.name;
    return {};
}

uint64_t read_u64_le(const std::byte* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | std::to_integer<uint64_t>(p[i]);
    return v;
}

std::string shape_text(const std::vector<uint64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// A JSON value that must be a non-negative integer (nlohmann parses "3" as
// unsigned, "-3" as signed and "3.0" as float; only the first is accepted).
std::optional<uint64_t> as_u64(const json& v) {
    if (!v.is_number_unsigned()) return std::nullopt;
    return v.get<uint64_t>();
}

class HeaderParser {
public:
    HeaderParser(std::string file, std::span<const std::byte> bytes) : file_(std::move(file)), bytes_(bytes) {}

    void run(std::vector<SafetensorsTensor>& tensors, std::map<std::string, std::string>& metadata) {
        if (bytes_.size() < kLengthBytes)
            fail("safetensors", "{}: the file has {} bytes, fewer than the 8-byte header length", file_, bytes_.size());
        const uint64_t header_len = read_u64_le(bytes_.data());
        if (header_len > bytes_.size() - kLengthBytes)
            fail("safetensors", "{}: the header length is {} bytes but only {} bytes follow it", file_, header_len,
                 bytes_.size() - kLengthBytes);
        if (header_len > kMaxHeaderBytes)
            fail("safetensors", "{}: the header length is {} bytes, more than the {} bytes kiln accepts", file_,
                 header_len, kMaxHeaderBytes);
        const char* text = reinterpret_cast<const char*>(bytes_.data() + kLengthBytes);
        const std::span<const std::byte> data = bytes_.subspan(kLengthBytes + header_len);

        const json header = parse(text, text + header_len);
        if (!header.is_object()) fail("safetensors", "{}: the header is JSON but not an object", file_);

        std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [begin, end) per tensor, as tensors_ is built
        for (const auto& [name, info] : header.items()) {
            if (name == "__metadata__") {
                read_metadata(info, metadata);
                continue;
            }
            const auto [begin, end] = read_tensor(name, info, tensors, data.size());
            tensors.back().data = data.subspan(begin, end - begin);
            ranges.emplace_back(begin, end);
        }

        // Data order is the file's order; it also makes the overlap check one pass.
        std::vector<size_t> order(tensors.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
            return ranges[a] != ranges[b] ? ranges[a] < ranges[b] : tensors[a].name < tensors[b].name;
        });
        // The tensors tile the data section exactly, as the safetensors format
        // requires: no overlap, and no hole or trailing bytes that no tensor
        // accounts for (where a corrupt or doctored file would hide data).
        uint64_t covered = 0;  // the data section's bytes [0, covered) belong to tensors seen so far
        const SafetensorsTensor* last = nullptr;
        for (size_t i : order) {
            const auto [begin, end] = ranges[i];
            if (begin == end) continue;  // empty tensors take no bytes, so they cannot collide with anything
            if (begin < covered)
                fail("safetensors", "{}: tensors '{}' (bytes ..{}) and '{}' (bytes {}..{}) overlap", file_,
                     printable(last->name), covered, printable(tensors[i].name), begin, end);
            if (begin > covered)
                fail("safetensors", "{}: bytes {}..{} of the data section belong to no tensor (a hole before '{}')",
                     file_, covered, begin, printable(tensors[i].name));
            covered = end;
            last = &tensors[i];
        }
        if (covered != data.size())
            fail("safetensors", "{}: the data section has {} bytes but its tensors end at byte {} (bytes {}..{} belong "
                 "to no tensor)", file_, data.size(), covered, covered, data.size());
        std::vector<SafetensorsTensor> sorted;
        sorted.reserve(tensors.size());
        for (size_t i : order) sorted.push_back(std::move(tensors[i]));
        tensors = std::move(sorted);
    }

private:
    // nlohmann keeps the last of repeated keys silently; a repeated tensor name
    // is ambiguous, so the parser callback watches the top-level keys.
    json parse(const char* begin, const char* end) {
        std::set<std::string> seen;
        std::string duplicate;
        const json::parser_callback_t watch = [&](int depth, json::parse_event_t event, json& parsed) {
            if (event == json::parse_event_t::key && depth == 1 && !seen.insert(parsed.get<std::string>()).second &&
                duplicate.empty())
                duplicate = parsed.get<std::string>();
            return true;
        };
        if (json_nesting_depth(std::string_view(begin, end)) > kMaxJsonDepth)
            fail("safetensors", "{}: the header nests arrays or objects more than {} levels deep", file_, kMaxJsonDepth);
        json header;
        try {
            header = json::parse(begin, end, watch);
        } catch (const json::exception& e) {
            fail("safetensors", "{}: the header is not valid JSON: {}", file_, e.what());
        }
        if (!duplicate.empty())
            fail("safetensors", "{}: the header names '{}' twice", file_, printable(duplicate));
        return header;
    }

    void read_metadata(const json& info, std::map<std::string, std::string>& metadata) const {
        if (!info.is_object()) fail("safetensors", "{}: __metadata__ is not an object", file_);
        for (const auto& [key, value] : info.items()) {
            if (!value.is_string())
                fail("safetensors", "{}: __metadata__ entry '{}' is not a string", file_, printable(key));
            metadata.emplace(key, value.get<std::string>());
        }
    }

    std::pair<uint64_t, uint64_t> read_tensor(const std::string& name, const json& info,
                                              std::vector<SafetensorsTensor>& tensors, uint64_t data_size) const {
        const std::string shown = printable(name);
        if (!info.is_object()) fail("safetensors", "{}: the entry of tensor '{}' is not an object", file_, shown);
        const auto dtype_it = info.find("dtype");
        if (dtype_it == info.end() || !dtype_it->is_string())
            fail("safetensors", "{}: tensor '{}' has no \"dtype\" string", file_, shown);
        const std::string dtype = dtype_it->get<std::string>();
        SafetensorsTensor t;
        t.name = name;
        const auto known = std::find_if(std::begin(kReadable), std::end(kReadable),
                                        [&](const DTypeName& d) { return d.name == dtype; });
        if (known == std::end(kReadable))
            fail("safetensors", "{}: tensor '{}' has dtype '{}', which kiln cannot read (it reads F32, F16 and BF16)",
                 file_, shown, printable(dtype));
        t.type = known->type;

        const auto shape_it = info.find("shape");
        if (shape_it == info.end() || !shape_it->is_array())
            fail("safetensors", "{}: tensor '{}' has no \"shape\" array", file_, shown);
        for (const json& d : *shape_it) {
            const std::optional<uint64_t> v = as_u64(d);
            if (!v) fail("safetensors", "{}: tensor '{}' has a shape entry that is not a non-negative integer", file_, shown);
            t.shape.push_back(*v);
        }
        const std::optional<uint64_t> count = checked_element_count(t.shape);
        const std::optional<uint64_t> bytes = count ? checked_bytes(t.type, *count) : std::nullopt;
        if (!bytes) fail("safetensors", "{}: tensor '{}' has shape {}, too large", file_, shown, shape_text(t.shape));

        const auto off_it = info.find("data_offsets");
        std::optional<uint64_t> begin, end;
        if (off_it != info.end() && off_it->is_array() && off_it->size() == 2) {
            begin = as_u64((*off_it)[0]);
            end = as_u64((*off_it)[1]);
        }
        if (!begin || !end)
            fail("safetensors", "{}: tensor '{}' has no \"data_offsets\" pair of non-negative integers", file_, shown);
        if (*end < *begin)
            fail("safetensors", "{}: tensor '{}' has data_offsets [{}, {}] that end before they begin", file_, shown,
                 *begin, *end);
        if (*end - *begin != *bytes)
            fail("safetensors", "{}: tensor '{}' is {} {} ({} bytes) but its data_offsets [{}, {}] span {} bytes",
                 file_, shown, dtype, shape_text(t.shape), *bytes, *begin, *end, *end - *begin);
        if (*end > data_size)
            fail("safetensors",
                 "{}: tensor '{}' ends at byte {} of the data section but the data section has {} bytes (truncated?)",
                 file_, shown, *end, data_size);
        tensors.push_back(std::move(t));
        return {*begin, *end};
    }

    std::string file_;
    std::span<const std::byte> bytes_;
};

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
    SafetensorsFile f;
    f.path_ = path;
    auto mapping = std::make_shared<const MappedFile>(path);
    HeaderParser(path.string(), mapping->bytes()).run(f.tensors_, f.metadata_);
    f.file_ = std::move(mapping);
    for (size_t i = 0; i < f.tensors_.size(); ++i) f.index_.emplace(f.tensors_[i].name, i);
    return f;
}

const SafetensorsTensor* SafetensorsFile::find_tensor(std::string_view name) const noexcept {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
}

bool looks_like_safetensors(std::span<const std::byte> head, uint64_t file_size) {
    if (head.size() < kLengthBytes + 1 || file_size < kLengthBytes + 2) return false;
    const uint64_t header_len = read_u64_le(head.data());
    if (header_len < 2 || header_len > kMaxHeaderBytes || header_len > file_size - kLengthBytes) return false;
    return head[kLengthBytes] == std::byte{'{'};
}

void write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
    const std::string file = path.string();
    // ordered_json keeps tensors in the order given, which is also their data order.
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    uint64_t offset = 0;
    for (const SafetensorsTensor& t : tensors) {
        const std::string_view dtype = safetensors_name(t.type);
        if (dtype.empty())
            fail("safetensors", "{}: tensor '{}' is {}; safetensors output supports F32, F16 and BF16", file,
                 printable(t.name), dtype_name(t.type));
        if (t.name == "__metadata__" || header.contains(t.name))
            fail("safetensors", "{}: tensor name '{}' is reserved or given twice", file, printable(t.name));
        const std::optional<uint64_t> count = checked_element_count(t.shape);
        const std::optional<uint64_t> bytes = count ? checked_bytes(t.type, *count) : std::nullopt;
        if (!bytes || *bytes != t.data.size())
            fail("safetensors", "{}: tensor '{}' has {} bytes of data but shape {} needs {}", file, printable(t.name),
                 t.data.size(), shape_text(t.shape), bytes ? fmt::format("{}", *bytes) : std::string("too many"));
        header[t.name] = {{"dtype", dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + *bytes}}};
        offset += *bytes;
    }
    std::string text;
    try {
        text = header.dump();
    } catch (const nlohmann::json::exception& e) {  // names or metadata that are not UTF-8
        fail("safetensors", "{}: cannot write the header: {}", file, e.what());
    }
    // Trailing spaces are allowed JSON whitespace; they align the data section
    // to 8 bytes so readers may view F32 data in place.
    text.append((kLengthBytes - (kLengthBytes + text.size()) % kLengthBytes) % kLengthBytes, ' ');

    std::byte length[kLengthBytes];
    for (size_t i = 0; i < kLengthBytes; ++i) length[i] = static_cast<std::byte>((text.size() >> (8 * i)) & 0xff);
    AtomicFile out(path);
    out.write(length);
    out.write(std::as_bytes(std::span(text)));
    for (const SafetensorsTensor& t : tensors) out.write(t.data);
    out.commit();
}

}  // namespace kiln
