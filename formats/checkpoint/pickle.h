#pragma once
// A whitelist unpickler for the data.pkl inside torch.save archives.
//
// A pickle is a program for a small stack machine; Python's unpickler runs it
// and, on REDUCE, calls whatever callable GLOBAL named, which is how a .pt
// file can run os.system. This one never calls anything: it decodes the
// opcodes that pickle protocols 2-5 use for dicts, lists, tuples, numbers,
// strings and torch tensors, and it resolves GLOBAL/STACK_GLOBAL only against
// a fixed table of names whose meaning it knows (OrderedDict, torch's tensor
// and parameter rebuild functions, storage classes, dtypes). Any other name fails right
// where it is named, before any REDUCE:
//   [pytorch] <file>: the pickle refers to os.system, which kiln will not load
//   (only tensors, storages, dicts and plain values)
// REDUCE on an allowed name is interpreted here, as data: OrderedDict() is an
// empty dict, _rebuild_tensor_v2(storage, offset, size, stride, ...) a tensor
// description, _rebuild_parameter(tensor, ...) that tensor. BINPERSID, which
// torch uses for storages, must carry ('storage', <storage class>, key,
// location, numel) and becomes a storage reference; the bytes are found later
// by the caller (formats/checkpoint/torch_checkpoint.h).
//
// Opcodes read. Marked * is what torch 1.13's torch.save (default protocol 2)
// writes for state dicts and train.py-style checkpoints (BUILD carries the
// `_metadata` attribute of nn.Module.state_dict()'s OrderedDict; LONG_BINPUT/
// LONG_BINGET appear once the memo passes 256 entries); + is what protocol 4/5
// (pickle_protocol=4) adds; the rest are cheap to read and harmless:
//   *PROTO +FRAME *STOP *MARK POP POP_MARK DUP *NONE *NEWTRUE *NEWFALSE
//   *BININT *BININT1 *BININT2 *LONG1 LONG4 *BINFLOAT
//   *BINUNICODE +SHORT_BINUNICODE +BINUNICODE8 SHORT_BINSTRING BINSTRING
//   BINBYTES SHORT_BINBYTES BINBYTES8
//   *EMPTY_DICT *EMPTY_LIST *EMPTY_TUPLE DICT LIST *TUPLE *TUPLE1 *TUPLE2 *TUPLE3
//   *APPEND *APPENDS *SETITEM *SETITEMS
//   *BINPUT *LONG_BINPUT +MEMOIZE *BINGET *LONG_BINGET
//   *BINPERSID *GLOBAL +STACK_GLOBAL *REDUCE *BUILD NEWOBJ (OrderedDict only)
// Everything else (INST, OBJ, EXT*, sets, out-of-band buffers, the text
// protocol-0 forms) is refused with the opcode named.
//
// Bounds: every length is checked against the bytes that remain; the stack,
// the mark stack and the memo are capped; what the values take is charged to
// an allocation budget (formats/checkpoint/allocation_budget.h); pops never cross the innermost
// MARK. Values live in arenas owned by the result, so a container that holds
// itself (possible through the memo) is just an index, never a leak or an
// infinite recursion here (consumers that walk values must bound depth).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {
class AllocationBudget;
}

namespace kiln::pickle {

// The element types torch storages come in (torch.<Name>Storage).
enum class TorchDType : uint8_t {
    Float32, Float16, BFloat16, Float64, Int64, Int32, Int16, Int8, UInt8, Bool, Complex64, Complex128,
    QInt8, QUInt8, QInt32, QUInt4x2, QUInt2x4,
};
std::string_view torch_dtype_name(TorchDType type) noexcept;  // "float32", ...
size_t torch_dtype_size(TorchDType type) noexcept;           // bytes per element (quint4x2: 1)

enum class Kind : uint8_t {
    None, Bool, Int, BigInt, Float, String, Bytes, List, Tuple, Dict, Global, Storage, Tensor,
};
std::string_view kind_name(Kind kind) noexcept;  // "dict", "tensor", ...

// One value: the scalar itself, or an index into an arena of Pickle.
struct Value {
    Kind kind = Kind::None;
    int64_t integer = 0;  // Bool (0/1), Int; BigInt: its byte length
    double number = 0;    // Float
    uint32_t index = 0;   // String/Bytes: strings; List/Tuple: sequences; Dict: dicts;
                          // Global: globals; Storage: storages; Tensor: tensors
};

// What an allowed global is.
enum class GlobalKind : uint8_t {
    OrderedDict,                // collections.OrderedDict
    RebuildTensor,              // torch._utils._rebuild_tensor_v2
    RebuildParameter,           // torch._utils._rebuild_parameter
    RebuildParameterWithState,  // torch._utils._rebuild_parameter_with_state (torch >= 2.0)
    StorageClass,               // torch.FloatStorage, torch.HalfStorage, ...
    DType,                      // torch.float32, ...
};

struct GlobalRef {
    GlobalKind kind;
    TorchDType dtype = TorchDType::Float32;  // StorageClass and DType
    std::string name;                        // "torch.FloatStorage", for messages
};

// A persistent id ('storage', <class>, key, location, numel).
struct StorageRef {
    std::string key;       // the archive entry is "<folder>/data/<key>"
    std::string location;  // "cpu", "cuda:0", ... (only informative: bytes are bytes)
    TorchDType dtype;
    int64_t numel;         // elements of dtype the entry must hold
};

// A _rebuild_tensor_v2 call: a view of a storage.
struct TensorRef {
    uint32_t storage;  // index into Pickle::storages
    int64_t offset;    // in elements
    std::vector<int64_t> size;
    std::vector<int64_t> stride;  // in elements
};

struct Pickle {
    Value root;  // what STOP returned
    std::vector<std::string> strings;
    std::vector<std::vector<Value>> sequences;
    std::vector<std::vector<std::pair<Value, Value>>> dicts;
    std::vector<GlobalRef> globals;
    std::vector<StorageRef> storages;
    std::vector<TensorRef> tensors;

    const std::string& string(Value v) const { return strings[v.index]; }
    const std::vector<Value>& sequence(Value v) const { return sequences[v.index]; }
    const std::vector<std::pair<Value, Value>>& dict(Value v) const { return dicts[v.index]; }
};

inline constexpr size_t kMaxStack = size_t{1} << 20;  // values on the stack at once
inline constexpr size_t kMaxMarks = size_t{1} << 16;  // open MARKs
inline constexpr size_t kMaxMemo = size_t{1} << 24;   // memo entries
inline constexpr size_t kMaxDims = 64;                // a tensor's dimensions (torch's own limit)

// Runs the pickle in `data` without executing anything. `name` (the file) starts
// every error message. Throws kiln::Error("pytorch", ...) on anything outside
// the whitelist, any malformed or truncated input, or a bound exceeded. What
// it builds is charged to `budget` (by default one for `data`'s size alone).
Pickle unpickle(std::span<const std::byte> data, std::string_view name);
Pickle unpickle(std::span<const std::byte> data, std::string_view name, AllocationBudget& budget);

}  // namespace kiln::pickle
