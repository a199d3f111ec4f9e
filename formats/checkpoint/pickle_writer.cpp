#include "formats/checkpoint/pickle_writer.h"

#include <bit>
#include <cstring>
#include <limits>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/tokenizer/utf8.h"

namespace kiln::pickle {
namespace {

// The opcodes written (Python's Lib/pickletools.py names them).
enum Op : uint8_t {
    kProto = 0x80, kStop = '.', kMark = '(', kNone = 'N', kNewTrue = 0x88, kNewFalse = 0x89,
    kBinInt = 'J', kBinInt1 = 'K', kBinInt2 = 'M', kLong1 = 0x8a, kBinFloat = 'G', kBinUnicode = 'X',
    kEmptyList = ']', kAppends = 'e', kEmptyTuple = ')', kTuple = 't', kTuple1 = 0x85, kTuple2 = 0x86,
    kTuple3 = 0x87, kEmptyDict = '}', kSetItems = 'u', kGlobal = 'c', kReduce = 'R', kBinPersId = 'Q',
};

class Writer {
public:
    std::vector<std::byte> run(const PickleValue& root) {
        op(kProto);
        byte(2);
        value(root);
        op(kStop);
        return std::move(out_);
    }

private:
    void byte(uint8_t b) { out_.push_back(static_cast<std::byte>(b)); }
    void op(Op o) { byte(o); }
    template <typename T>
    void little(T v) {
        for (size_t i = 0; i < sizeof(T); ++i) byte(static_cast<uint8_t>(static_cast<std::make_unsigned_t<T>>(v) >> (8 * i)));
    }
    void text(std::string_view s) {
        for (char c : s) byte(static_cast<uint8_t>(c));
    }

    void integer(int64_t v) {
        if (v >= 0 && v < 256) {
            op(kBinInt1);
            byte(static_cast<uint8_t>(v));
        } else if (v >= 0 && v < 65536) {
            op(kBinInt2);
            little(static_cast<uint16_t>(v));
        } else if (v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max()) {
            op(kBinInt);
            little(static_cast<int32_t>(v));
        } else {
            // LONG1: the shortest little-endian two's complement that keeps the sign.
            std::vector<uint8_t> bytes;
            for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i)));
            while (bytes.size() > 1 && ((bytes.back() == 0x00 && (bytes[bytes.size() - 2] & 0x80) == 0) ||
                                        (bytes.back() == 0xff && (bytes[bytes.size() - 2] & 0x80) != 0)))
                bytes.pop_back();
            op(kLong1);
            byte(static_cast<uint8_t>(bytes.size()));
            for (uint8_t b : bytes) byte(b);
        }
    }

    void number(double v) {
        op(kBinFloat);  // big-endian IEEE 754 double
        const auto bits = std::bit_cast<uint64_t>(v);
        for (int i = 7; i >= 0; --i) byte(static_cast<uint8_t>(bits >> (8 * i)));
    }

    void string(std::string_view s) {
        if (!utf8_valid(s)) fail("pytorch", "cannot pickle the string '{}': it is not UTF-8 (Python's str is)", printable(s));
        if (s.size() > std::numeric_limits<uint32_t>::max()) fail("pytorch", "cannot pickle a string of {} bytes", s.size());
        op(kBinUnicode);
        little(static_cast<uint32_t>(s.size()));
        text(s);
    }

    void global(std::string_view module, std::string_view name) {
        op(kGlobal);
        text(module);
        byte('\n');
        text(name);
        byte('\n');
    }

    void tuple(const std::vector<PickleValue>& items) {
        if (items.empty()) return op(kEmptyTuple);
        if (items.size() > 3) op(kMark);
        for (const PickleValue& item : items) value(item);
        static constexpr Op kSmall[] = {kTuple1, kTuple2, kTuple3};
        op(items.size() > 3 ? kTuple : kSmall[items.size() - 1]);
    }

    void ints_tuple(const std::vector<int64_t>& ints) {
        std::vector<PickleValue> items(ints.begin(), ints.end());
        tuple(items);
    }

    void empty_ordered_dict() {
        global("collections", "OrderedDict");
        op(kEmptyTuple);
        op(kReduce);
    }

    void dict(const PickleDict& d) {
        if (d.ordered) empty_ordered_dict();
        else op(kEmptyDict);
        if (d.items.empty()) return;
        op(kMark);
        for (const auto& [key, item] : d.items) {
            value(key);
            value(item);
        }
        op(kSetItems);
    }

    void list(const PickleList& l) {
        op(kEmptyList);
        if (l.empty()) return;
        op(kMark);
        for (const PickleValue& item : l) value(item);
        op(kAppends);
    }

    void tensor(const TensorRecord& t) {
        std::string_view storage_class;
        switch (t.dtype) {
            case TorchDType::Float32: storage_class = "FloatStorage"; break;
            case TorchDType::Float16: storage_class = "HalfStorage"; break;
            case TorchDType::BFloat16: storage_class = "BFloat16Storage"; break;
            default:
                fail("pytorch", "cannot pickle a {} tensor (storage '{}'): kiln writes float32, float16 and bfloat16",
                     torch_dtype_name(t.dtype), printable(t.storage_key));
        }
        if (t.size.size() != t.stride.size())
            fail("pytorch", "cannot pickle tensor of storage '{}': {} sizes but {} strides", printable(t.storage_key),
                 t.size.size(), t.stride.size());
        global("torch._utils", "_rebuild_tensor_v2");
        op(kMark);
        // The storage: a persistent id the archive's data/<key> entry answers.
        op(kMark);
        string("storage");
        global("torch", storage_class);
        string(t.storage_key);
        string("cpu");
        integer(t.storage_numel);
        op(kTuple);
        op(kBinPersId);
        integer(t.offset);
        ints_tuple(t.size);
        ints_tuple(t.stride);
        op(kNewFalse);  // requires_grad
        empty_ordered_dict();  // backward hooks
        op(kTuple);
        op(kReduce);
    }

    void value(const PickleValue& v) {
        std::visit(
            [this](const auto& x) {
                using T = std::decay_t<decltype(x)>;
                if constexpr (std::is_same_v<T, std::monostate>) op(kNone);
                else if constexpr (std::is_same_v<T, bool>) op(x ? kNewTrue : kNewFalse);
                else if constexpr (std::is_same_v<T, int64_t>) integer(x);
                else if constexpr (std::is_same_v<T, double>) number(x);
                else if constexpr (std::is_same_v<T, std::string>) string(x);
                else if constexpr (std::is_same_v<T, PickleList>) list(x);
                else if constexpr (std::is_same_v<T, PickleTuple>) tuple(x.items);
                else if constexpr (std::is_same_v<T, PickleDict>) dict(x);
                else tensor(x);
            },
            v.value);
    }

    std::vector<std::byte> out_;
};

}  // namespace

std::vector<std::byte> write_pickle(const PickleValue& root) { return Writer().run(root); }

}  // namespace kiln::pickle
