#pragma once
// Writing the data.pkl of a torch.save archive: a pickle, protocol 2 (torch's
// default), of plain values and tensors, byte for byte in the forms torch.save
// emits them, so that torch.load, including torch.load(weights_only=True),
// and kiln's whitelist unpickler (formats/checkpoint/pickle.h) read it back:
//
//   None NONE · bool NEWTRUE/NEWFALSE · int BININT1/BININT2/BININT, LONG1 beyond
//   32 bits · float BINFLOAT · str BINUNICODE (must be UTF-8) · list EMPTY_LIST
//   MARK .. APPENDS · tuple EMPTY_TUPLE / TUPLE1..3 / MARK .. TUPLE · dict
//   EMPTY_DICT MARK .. SETITEMS · OrderedDict GLOBAL collections.OrderedDict,
//   EMPTY_TUPLE, REDUCE, then its items as a dict's · tensor GLOBAL
//   torch._utils._rebuild_tensor_v2 with (storage, offset, size, stride,
//   False, OrderedDict()) REDUCE, where the storage is BINPERSID of
//   ('storage', torch.FloatStorage | HalfStorage | BFloat16Storage, key, 'cpu', numel).
//
// Nothing is memoized (no BINPUT): readers do not need it, and the values are
// trees. Note that torch < 2.0's weights_only unpickler has no BINFLOAT: a
// pickle holding a float loads there only with weights_only=False.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "formats/checkpoint/pickle.h"

namespace kiln::pickle {

// A tensor as a view of a storage (an archive entry "<folder>/data/<key>").
struct TensorRecord {
    std::string storage_key;
    TorchDType dtype = TorchDType::Float32;  // Float32, Float16 or BFloat16
    int64_t storage_numel = 0;              // elements the storage holds
    int64_t offset = 0;                     // elements into the storage
    std::vector<int64_t> size, stride;      // torch order
};

struct PickleValue;
using PickleList = std::vector<PickleValue>;
struct PickleTuple {
    std::vector<PickleValue> items;
};
struct PickleDict {
    std::vector<std::pair<PickleValue, PickleValue>> items;  // in order
    bool ordered = false;                                    // collections.OrderedDict
};

struct PickleValue {
    std::variant<std::monostate, bool, int64_t, double, std::string, PickleList, PickleTuple, PickleDict, TensorRecord>
        value;

    // Implicit, so that trees read like the Python they stand for.
    PickleValue() = default;  // None
    PickleValue(bool v) : value(v) {}                             // NOLINT
    PickleValue(int v) : value(int64_t{v}) {}                     // NOLINT
    PickleValue(int64_t v) : value(v) {}                          // NOLINT
    PickleValue(double v) : value(v) {}                           // NOLINT
    PickleValue(std::string v) : value(std::move(v)) {}           // NOLINT
    PickleValue(const char* v) : value(std::string(v)) {}         // NOLINT
    PickleValue(PickleList v) : value(std::move(v)) {}            // NOLINT
    PickleValue(PickleTuple v) : value(std::move(v)) {}           // NOLINT
    PickleValue(PickleDict v) : value(std::move(v)) {}            // NOLINT
    PickleValue(TensorRecord v) : value(std::move(v)) {}          // NOLINT
};

// The pickle of `root`. Throws kiln::Error("pytorch", ...) for a string that is
// not UTF-8, a tensor of another dtype, or sizes and strides of different lengths.
std::vector<std::byte> write_pickle(const PickleValue& root);

}  // namespace kiln::pickle
