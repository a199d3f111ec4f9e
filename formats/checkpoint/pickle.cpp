#include "formats/checkpoint/pickle.h"

#include <bit>
#include <cstring>
#include <optional>
#include <unordered_map>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/checkpoint/allocation_budget.h"

namespace kiln::pickle {
namespace {

struct DTypeInfo {
    TorchDType type;
    std::string_view name;     // torch.<name> is the dtype object
    std::string_view storage;  // torch.<storage> is the storage class
    size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {TorchDType::Float32, "float32", "FloatStorage", 4},
    {TorchDType::Float16, "float16", "HalfStorage", 2},
    {TorchDType::BFloat16, "bfloat16", "BFloat16Storage", 2},
    {TorchDType::Float64, "float64", "DoubleStorage", 8},
    {TorchDType::Int64, "int64", "LongStorage", 8},
    {TorchDType::Int32, "int32", "IntStorage", 4},
    {TorchDType::Int16, "int16", "ShortStorage", 2},
    {TorchDType::Int8, "int8", "CharStorage", 1},
    {TorchDType::UInt8, "uint8", "ByteStorage", 1},
    {TorchDType::Bool, "bool", "BoolStorage", 1},
    {TorchDType::Complex64, "complex64", "ComplexFloatStorage", 8},
    {TorchDType::Complex128, "complex128", "ComplexDoubleStorage", 16},
    {TorchDType::QInt8, "qint8", "QInt8Storage", 1},
    {TorchDType::QUInt8, "quint8", "QUInt8Storage", 1},
    {TorchDType::QInt32, "qint32", "QInt32Storage", 4},
    {TorchDType::QUInt4x2, "quint4x2", "QUInt4x2Storage", 1},
    {TorchDType::QUInt2x4, "quint2x4", "QUInt2x4Storage", 1},
};

const DTypeInfo& info(TorchDType type) {
    for (const DTypeInfo& d : kDTypes)
        if (d.type == type) return d;
    return kDTypes[0];
}

// The whole whitelist. Storage classes other than float ones are allowed so a
// checkpoint with, say, an int64 buffer fails later with a message naming the
// tensor and its dtype, instead of here with a message about a class; all of
// them are plain data descriptions, nothing here is ever called.
std::optional<GlobalRef> resolve_global(std::string_view module, std::string_view name) {
    const std::string full = fmt::format("{}.{}", module, name);
    if (module == "collections" && name == "OrderedDict") return GlobalRef{GlobalKind::OrderedDict, {}, full};
    if (module == "torch._utils") {
        if (name == "_rebuild_tensor_v2") return GlobalRef{GlobalKind::RebuildTensor, {}, full};
        if (name == "_rebuild_parameter") return GlobalRef{GlobalKind::RebuildParameter, {}, full};
        if (name == "_rebuild_parameter_with_state")
            return GlobalRef{GlobalKind::RebuildParameterWithState, {}, full};
    }
    if (module == "torch") {
        for (const DTypeInfo& d : kDTypes) {
            if (name == d.storage) return GlobalRef{GlobalKind::StorageClass, d.type, full};
            if (name == d.name) return GlobalRef{GlobalKind::DType, d.type, full};
        }
    }
    return std::nullopt;
}

std::string_view opcode_name(uint8_t op) {
    switch (op) {
        case '(': return "MARK";           case '.': return "STOP";           case '0': return "POP";
        case '1': return "POP_MARK";       case '2': return "DUP";            case 'F': return "FLOAT";
        case 'I': return "INT";            case 'J': return "BININT";         case 'K': return "BININT1";
        case 'L': return "LONG";           case 'M': return "BININT2";        case 'N': return "NONE";
        case 'P': return "PERSID";         case 'Q': return "BINPERSID";      case 'R': return "REDUCE";
        case 'S': return "STRING";         case 'T': return "BINSTRING";      case 'U': return "SHORT_BINSTRING";
        case 'V': return "UNICODE";        case 'X': return "BINUNICODE";     case 'a': return "APPEND";
        case 'b': return "BUILD";          case 'c': return "GLOBAL";         case 'd': return "DICT";
        case '}': return "EMPTY_DICT";     case 'e': return "APPENDS";        case 'g': return "GET";
        case 'h': return "BINGET";         case 'i': return "INST";           case 'j': return "LONG_BINGET";
        case 'l': return "LIST";           case ']': return "EMPTY_LIST";     case 'o': return "OBJ";
        case 'p': return "PUT";            case 'q': return "BINPUT";         case 'r': return "LONG_BINPUT";
        case 's': return "SETITEM";        case 't': return "TUPLE";          case ')': return "EMPTY_TUPLE";
        case 'u': return "SETITEMS";       case 'G': return "BINFLOAT";       case 'B': return "BINBYTES";
        case 'C': return "SHORT_BINBYTES"; case 0x80: return "PROTO";         case 0x81: return "NEWOBJ";
        case 0x82: return "EXT1";          case 0x83: return "EXT2";          case 0x84: return "EXT4";
        case 0x85: return "TUPLE1";        case 0x86: return "TUPLE2";        case 0x87: return "TUPLE3";
        case 0x88: return "NEWTRUE";       case 0x89: return "NEWFALSE";      case 0x8a: return "LONG1";
        case 0x8b: return "LONG4";         case 0x8c: return "SHORT_BINUNICODE";
        case 0x8d: return "BINUNICODE8";   case 0x8e: return "BINBYTES8";     case 0x8f: return "EMPTY_SET";
        case 0x90: return "ADDITEMS";      case 0x91: return "FROZENSET";     case 0x92: return "NEWOBJ_EX";
        case 0x93: return "STACK_GLOBAL";  case 0x94: return "MEMOIZE";       case 0x95: return "FRAME";
        case 0x96: return "BYTEARRAY8";    case 0x97: return "NEXT_BUFFER";   case 0x98: return "READONLY_BUFFER";
        default: return {};
    }
}

// An unordered_map node holding a memo entry, roughly.
constexpr uint64_t kMemoEntryBytes = 64;

class Machine {
public:
    Machine(std::span<const std::byte> data, std::string_view name, AllocationBudget& budget)
        : data_(data), name_(name), budget_(budget) {}

    Pickle run() {
        for (;;) {
            if (pos_ >= data_.size()) {
                op_at_ = pos_;
                bad("the pickle ends without a STOP opcode (a truncated file?)");
            }
            op_at_ = pos_;
            if (step(static_cast<uint8_t>(data_[pos_++]))) return std::move(out_);
        }
    }

private:
    template <typename... Args>
    [[noreturn]] void bad(fmt::format_string<Args...> format, Args&&... args) const {
        fail("pytorch", "{}: {} (at pickle byte {})", name_, fmt::format(format, std::forward<Args>(args)...),
             op_at_);
    }

    // ---- reading operands
    std::span<const std::byte> take(uint64_t n) {
        if (n > data_.size() - pos_)
            bad("{} needs {} bytes but the pickle has {} left (a truncated or corrupt file)",
                opcode_name(static_cast<uint8_t>(data_[op_at_])), n, data_.size() - pos_);
        const auto s = data_.subspan(pos_, n);
        pos_ += n;
        return s;
    }
    template <typename T>
    T read() {  // little-endian, as pickle stores its binary operands
        T value;
        std::memcpy(&value, take(sizeof(T)).data(), sizeof(T));
        return value;
    }
    std::string_view line() {  // GLOBAL's operands end with '\n'
        const auto rest = data_.subspan(pos_);
        const auto* begin = reinterpret_cast<const char*>(rest.data());
        const void* nl = std::memchr(begin, '\n', rest.size());
        if (nl == nullptr) bad("GLOBAL's name has no end of line (a truncated or corrupt file)");
        const auto n = static_cast<size_t>(static_cast<const char*>(nl) - begin);
        pos_ += n + 1;
        return {begin, n};
    }

    // ---- the stack; pops never reach below the innermost MARK
    size_t fence() const { return marks_.empty() ? 0 : marks_.back(); }
    void push(Value v) {
        if (stack_.size() >= kMaxStack) bad("the pickle's stack grows past {} values", kMaxStack);
        stack_.push_back(v);
    }
    Value pop() {
        if (stack_.size() <= fence()) bad("{} pops from an empty stack", opcode_name(static_cast<uint8_t>(data_[op_at_])));
        const Value v = stack_.back();
        stack_.pop_back();
        return v;
    }
    Value& top() {
        if (stack_.size() <= fence()) bad("{} needs a value on the stack", opcode_name(static_cast<uint8_t>(data_[op_at_])));
        return stack_.back();
    }
    std::vector<Value> pop_mark() {
        if (marks_.empty()) bad("{} without a MARK", opcode_name(static_cast<uint8_t>(data_[op_at_])));
        const size_t m = marks_.back();
        marks_.pop_back();
        std::vector<Value> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
        stack_.resize(m);
        return items;
    }

    // ---- arenas
    uint32_t checked_index(size_t size) const {
        if (size >= UINT32_MAX) bad("the pickle holds too many values");
        return static_cast<uint32_t>(size);
    }
    // What the arenas hold is charged as it is built; a memoised value fetched
    // again costs one Value, but the calls below that copy one are charged too.
    void charge(uint64_t bytes, std::string_view what) { budget_.charge(bytes, what); }
    Value make_string(Kind kind, std::span<const std::byte> bytes) {
        charge(sizeof(std::string) + bytes.size(), "the pickle's strings");
        Value v{kind};
        v.index = checked_index(out_.strings.size());
        out_.strings.emplace_back(reinterpret_cast<const char*>(bytes.data()), bytes.size());
        return v;
    }
    Value make_sequence(Kind kind, std::vector<Value> items) {
        charge(sizeof(std::vector<Value>) + items.size() * sizeof(Value), "the pickle's lists and tuples");
        Value v{kind};
        v.index = checked_index(out_.sequences.size());
        out_.sequences.push_back(std::move(items));
        return v;
    }
    Value make_dict() {
        charge(sizeof(std::vector<std::pair<Value, Value>>), "the pickle's dicts");
        Value v{Kind::Dict};
        v.index = checked_index(out_.dicts.size());
        out_.dicts.emplace_back();
        return v;
    }
    void add_items(Value dict, const std::vector<Value>& items) {
        if (dict.kind != Kind::Dict) bad("SETITEM(S) on a {}, not a dict", kind_name(dict.kind));
        if (items.size() % 2 != 0) bad("SETITEMS with an odd number of values ({})", items.size());
        charge(items.size() / 2 * sizeof(std::pair<Value, Value>), "the pickle's dicts");
        auto& d = out_.dicts[dict.index];
        for (size_t i = 0; i < items.size(); i += 2) d.emplace_back(items[i], items[i + 1]);
    }
    void append_items(Value list, const std::vector<Value>& items) {
        if (list.kind != Kind::List) bad("APPEND(S) on a {}, not a list", kind_name(list.kind));
        charge(items.size() * sizeof(Value), "the pickle's lists");
        auto& l = out_.sequences[list.index];
        l.insert(l.end(), items.begin(), items.end());
    }

    // ---- memo
    void memo_put(uint64_t slot) {
        if (slot > UINT32_MAX) bad("memo slot {} is out of range", slot);
        if (memo_.size() >= kMaxMemo && !memo_.contains(static_cast<uint32_t>(slot)))
            bad("the pickle's memo grows past {} entries", kMaxMemo);
        charge(kMemoEntryBytes, "the pickle's memo");
        memo_[static_cast<uint32_t>(slot)] = top();
    }
    void memo_get(uint64_t slot) {
        const auto it = slot > UINT32_MAX ? memo_.end() : memo_.find(static_cast<uint32_t>(slot));
        if (it == memo_.end()) bad("the pickle reads memo slot {}, which was never stored", slot);
        push(it->second);
    }

    // ---- globals, calls and torch's persistent ids
    Value make_global(std::string_view module, std::string_view name) {
        std::optional<GlobalRef> g = resolve_global(module, name);
        if (!g)
            fail("pytorch",
                 "{}: the pickle refers to {}.{}, which kiln will not load (only tensors, storages, dicts and plain "
                 "values)",
                 name_, printable(module, 100), printable(name, 100));
        charge(sizeof(GlobalRef) + g->name.size(), "the pickle's globals");
        Value v{Kind::Global};
        v.index = checked_index(out_.globals.size());
        out_.globals.push_back(std::move(*g));
        return v;
    }

    int64_t int_arg(const std::vector<Value>& args, size_t i, std::string_view what) const {
        if (args[i].kind != Kind::Int || args[i].integer < 0) bad("{} is not a non-negative integer", what);
        return args[i].integer;
    }
    std::vector<int64_t> ints_arg(const std::vector<Value>& args, size_t i, std::string_view what) const {
        const Value v = args[i];
        if (v.kind != Kind::Tuple && v.kind != Kind::List) bad("{} is a {}, not a tuple", what, kind_name(v.kind));
        const std::vector<Value>& items = out_.sequences[v.index];
        if (items.size() > kMaxDims) bad("a tensor has {} dimensions (at most {})", items.size(), kMaxDims);
        std::vector<int64_t> out;
        for (size_t k = 0; k < items.size(); ++k) out.push_back(int_arg(items, k, what));
        return out;
    }

    Value call(Value callable, Value args_value) {
        if (callable.kind != Kind::Global) bad("REDUCE calls a {}, not an allowed function", kind_name(callable.kind));
        if (args_value.kind != Kind::Tuple) bad("REDUCE's arguments are a {}, not a tuple", kind_name(args_value.kind));
        const GlobalRef& g = out_.globals[callable.index];
        // A reference: the cases below add dicts and tensors, never sequences.
        const std::vector<Value>& args = out_.sequences[args_value.index];
        switch (g.kind) {
            case GlobalKind::OrderedDict:
                if (!args.empty()) bad("collections.OrderedDict is called with {} arguments (expected none)", args.size());
                return make_dict();
            case GlobalKind::RebuildTensor: {
                // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
                if (args.size() != 6 && args.size() != 7)
                    bad("{} is called with {} arguments (expected 6 or 7)", g.name, args.size());
                if (args[0].kind != Kind::Storage) bad("{}'s storage is a {}", g.name, kind_name(args[0].kind));
                TensorRef t{args[0].index, int_arg(args, 1, "a tensor's storage offset"),
                            ints_arg(args, 2, "a tensor's size"), ints_arg(args, 3, "a tensor's stride")};
                if (t.size.size() != t.stride.size())
                    bad("a tensor has {} sizes but {} strides", t.size.size(), t.stride.size());
                charge(sizeof(TensorRef) + (t.size.size() + t.stride.size()) * sizeof(int64_t), "the pickle's tensors");
                Value v{Kind::Tensor};
                v.index = checked_index(out_.tensors.size());
                out_.tensors.push_back(std::move(t));
                return v;
            }
            case GlobalKind::RebuildParameter:
            case GlobalKind::RebuildParameterWithState: {
                // (data, requires_grad, backward_hooks[, state]): a Parameter is its tensor.
                const size_t expected = g.kind == GlobalKind::RebuildParameter ? 3 : 4;
                if (args.size() != expected)
                    bad("{} is called with {} arguments (expected {})", g.name, args.size(), expected);
                if (args[0].kind != Kind::Tensor) bad("{}'s data is a {}, not a tensor", g.name, kind_name(args[0].kind));
                return args[0];
            }
            case GlobalKind::StorageClass:
            case GlobalKind::DType: break;
        }
        bad("{} is called, but it is only a type description", g.name);
    }

    Value persistent_load(Value pid) {
        // torch: ('storage', torch.<Type>Storage, key, location, numel)
        if (pid.kind != Kind::Tuple || out_.sequences[pid.index].size() != 5)
            bad("a persistent id is not torch's ('storage', type, key, location, numel)");
        const std::vector<Value>& f = out_.sequences[pid.index];
        if (f[0].kind != Kind::String || out_.strings[f[0].index] != "storage")
            bad("a persistent id does not start with 'storage'");
        if (f[1].kind != Kind::Global || out_.globals[f[1].index].kind != GlobalKind::StorageClass)
            bad("a persistent id's storage type is not a torch storage class");
        if (f[2].kind != Kind::String || f[3].kind != Kind::String)
            bad("a persistent id's key or location is not a string");
        if (f[4].kind != Kind::Int || f[4].integer < 0) bad("a persistent id's element count is not an integer >= 0");
        // The key and location are copied: a memoised long string must be paid for each time.
        charge(sizeof(StorageRef) + out_.strings[f[2].index].size() + out_.strings[f[3].index].size(),
               "the pickle's storage references");
        Value v{Kind::Storage};
        v.index = checked_index(out_.storages.size());
        out_.storages.push_back({out_.strings[f[2].index], out_.strings[f[3].index],
                                 out_.globals[f[1].index].dtype, f[4].integer});
        return v;
    }

    static int64_t little_endian_int(std::span<const std::byte> b) {  // two's complement, <= 8 bytes
        uint64_t u = 0;
        for (size_t i = 0; i < b.size(); ++i) u |= static_cast<uint64_t>(b[i]) << (8 * i);
        if (!b.empty() && b.size() < 8 && (static_cast<uint8_t>(b.back()) & 0x80u) != 0)
            u |= ~uint64_t{0} << (8 * b.size());  // sign-extend
        return static_cast<int64_t>(u);
    }
    Value make_long(uint64_t n) {
        const auto bytes = take(n);
        if (n > 8) return Value{Kind::BigInt, static_cast<int64_t>(n)};  // beyond int64: kept as "some integer"
        return Value{Kind::Int, little_endian_int(bytes)};
    }

    // Executes one opcode; true at STOP.
    bool step(uint8_t op) {
        switch (op) {
            case 0x80: {  // PROTO
                const uint8_t version = read<uint8_t>();
                if (version > 5) bad("pickle protocol {} is newer than any kiln knows (2-5)", version);
                return false;
            }
            case 0x95: {  // FRAME: a buffering hint; only its length is checked
                const uint64_t n = read<uint64_t>();
                if (n > data_.size() - pos_) bad("a FRAME of {} bytes runs past the end of the pickle", n);
                return false;
            }
            case '.': out_.root = pop(); return true;            // STOP
            case '(':                                            // MARK
                if (marks_.size() >= kMaxMarks) bad("more than {} MARKs are open", kMaxMarks);
                marks_.push_back(stack_.size());
                return false;
            case '0':  // POP: a bare MARK on top is popped like a value
                if (stack_.size() == fence() && !marks_.empty()) marks_.pop_back();
                else pop();
                return false;
            case '1': pop_mark(); return false;  // POP_MARK
            case '2': push(top()); return false;  // DUP
            case 'N': push(Value{Kind::None}); return false;
            case 0x88: push(Value{Kind::Bool, 1}); return false;  // NEWTRUE
            case 0x89: push(Value{Kind::Bool, 0}); return false;  // NEWFALSE
            case 'J': push(Value{Kind::Int, read<int32_t>()}); return false;   // BININT
            case 'K': push(Value{Kind::Int, read<uint8_t>()}); return false;   // BININT1
            case 'M': push(Value{Kind::Int, read<uint16_t>()}); return false;  // BININT2
            case 0x8a: push(make_long(read<uint8_t>())); return false;          // LONG1
            case 0x8b: {                                                        // LONG4
                const int32_t n = read<int32_t>();
                if (n < 0) bad("LONG4 with a negative length");
                push(make_long(static_cast<uint64_t>(n)));
                return false;
            }
            case 'G': {  // BINFLOAT: big-endian IEEE double
                uint64_t bits = 0;
                for (std::byte b : take(8)) bits = bits << 8 | static_cast<uint64_t>(b);
                Value v{Kind::Float};
                v.number = std::bit_cast<double>(bits);
                push(v);
                return false;
            }
            case 0x8c: push(make_string(Kind::String, take(read<uint8_t>()))); return false;   // SHORT_BINUNICODE
            case 'X': push(make_string(Kind::String, take(read<uint32_t>()))); return false;   // BINUNICODE
            case 0x8d: push(make_string(Kind::String, take(read<uint64_t>()))); return false;  // BINUNICODE8
            case 'U': push(make_string(Kind::String, take(read<uint8_t>()))); return false;    // SHORT_BINSTRING
            case 'T': {                                                                         // BINSTRING
                const int32_t n = read<int32_t>();
                if (n < 0) bad("BINSTRING with a negative length");
                push(make_string(Kind::String, take(static_cast<uint64_t>(n))));
                return false;
            }
            case 'C': push(make_string(Kind::Bytes, take(read<uint8_t>()))); return false;    // SHORT_BINBYTES
            case 'B': push(make_string(Kind::Bytes, take(read<uint32_t>()))); return false;   // BINBYTES
            case 0x8e: push(make_string(Kind::Bytes, take(read<uint64_t>()))); return false;  // BINBYTES8
            case '}': push(make_dict()); return false;                                       // EMPTY_DICT
            case ']': push(make_sequence(Kind::List, {})); return false;                     // EMPTY_LIST
            case ')': push(make_sequence(Kind::Tuple, {})); return false;                    // EMPTY_TUPLE
            case 'l': push(make_sequence(Kind::List, pop_mark())); return false;             // LIST
            case 't': push(make_sequence(Kind::Tuple, pop_mark())); return false;            // TUPLE
            case 'd': {                                                                       // DICT
                const std::vector<Value> items = pop_mark();
                const Value d = make_dict();
                add_items(d, items);
                push(d);
                return false;
            }
            case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
                std::vector<Value> items(op - 0x84u);
                for (size_t i = items.size(); i-- > 0;) items[i] = pop();
                push(make_sequence(Kind::Tuple, std::move(items)));
                return false;
            }
            case 'a': {  // APPEND
                const Value v = pop();
                append_items(top(), {v});
                return false;
            }
            case 'e': {  // APPENDS
                const std::vector<Value> items = pop_mark();
                append_items(top(), items);
                return false;
            }
            case 's': {  // SETITEM
                const Value v = pop();
                const Value k = pop();
                add_items(top(), {k, v});
                return false;
            }
            case 'u': {  // SETITEMS
                const std::vector<Value> items = pop_mark();
                add_items(top(), items);
                return false;
            }
            case 'q': memo_put(read<uint8_t>()); return false;     // BINPUT
            case 'r': memo_put(read<uint32_t>()); return false;    // LONG_BINPUT
            case 0x94: memo_put(memo_.size()); return false;       // MEMOIZE
            case 'h': memo_get(read<uint8_t>()); return false;     // BINGET
            case 'j': memo_get(read<uint32_t>()); return false;    // LONG_BINGET
            case 'Q': push(persistent_load(pop())); return false;  // BINPERSID
            case 'c': {                                            // GLOBAL "module\nname\n"
                const std::string_view module = line();
                const std::string_view name = line();
                push(make_global(module, name));
                return false;
            }
            case 0x93: {  // STACK_GLOBAL
                const Value name = pop();
                const Value module = pop();
                if (module.kind != Kind::String || name.kind != Kind::String)
                    bad("STACK_GLOBAL's module and name are not strings");
                push(make_global(out_.strings[module.index], out_.strings[name.index]));
                return false;
            }
            case 'R': {  // REDUCE
                const Value args = pop();
                const Value callable = pop();
                push(call(callable, args));
                return false;
            }
            case 0x81: {  // NEWOBJ: cls.__new__(cls, *args); only OrderedDict is a class kiln builds
                const Value args = pop();
                const Value cls = pop();
                if (cls.kind != Kind::Global || out_.globals[cls.index].kind != GlobalKind::OrderedDict ||
                    args.kind != Kind::Tuple)
                    bad("NEWOBJ builds something other than an OrderedDict");
                push(make_dict());
                return false;
            }
            case 'b': {  // BUILD: state for an object; a state dict's `_metadata` is dropped
                pop();
                if (top().kind != Kind::Dict) bad("BUILD sets the state of a {}", kind_name(top().kind));
                return false;
            }
            default: break;
        }
        const std::string_view name = opcode_name(op);
        if (name.empty()) bad("byte 0x{:02x} is not a pickle opcode (a corrupt file?)", op);
        bad("pickle opcode {} (0x{:02x}) is not one kiln reads (torch.save does not write it)", name, op);
    }

    std::span<const std::byte> data_;
    std::string_view name_;
    AllocationBudget& budget_;
    size_t pos_ = 0;
    size_t op_at_ = 0;
    Pickle out_;
    std::vector<Value> stack_;
    std::vector<size_t> marks_;
    std::unordered_map<uint32_t, Value> memo_;
};

}  // namespace

std::string_view torch_dtype_name(TorchDType type) noexcept { return info(type).name; }
size_t torch_dtype_size(TorchDType type) noexcept { return info(type).size; }

std::string_view kind_name(Kind kind) noexcept {
    switch (kind) {
        case Kind::None: return "None";
        case Kind::Bool: return "bool";
        case Kind::Int: return "int";
        case Kind::BigInt: return "int";
        case Kind::Float: return "float";
        case Kind::String: return "str";
        case Kind::Bytes: return "bytes";
        case Kind::List: return "list";
        case Kind::Tuple: return "tuple";
        case Kind::Dict: return "dict";
        case Kind::Global: return "class or function";
        case Kind::Storage: return "storage";
        case Kind::Tensor: return "tensor";
    }
    return "value";
}

Pickle unpickle(std::span<const std::byte> data, std::string_view name, AllocationBudget& budget) {
    return Machine(data, name, budget).run();
}

Pickle unpickle(std::span<const std::byte> data, std::string_view name) {
    AllocationBudget budget(data.size(), "pytorch", std::string(name));
    return unpickle(data, name, budget);
}

}  // namespace kiln::pickle
