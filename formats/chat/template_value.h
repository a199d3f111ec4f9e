#pragma once
// The values a chat template computes with: Python's objects as jinja2 sees
// them (undefined, None, bool, int, float, str, list, tuple, dict, a
// namespace, a callable), with Python's rules for truth, equality and str().
// Lists and dicts are shared (as Python references are) because a
// namespace's attributes are set in place and seen by every holder.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::chat {

class Value;
using ValueList = std::vector<Value>;

// A Python dict: insertion-ordered, keys compared by Python equality.
struct ValueDict {
    std::vector<std::pair<Value, Value>> entries;

    const Value* find(const Value& key) const;
    const Value* find(std::string_view key) const;
    const Value* find(const std::string& key) const { return find(std::string_view(key)); }
    const Value* find(const char* key) const { return find(std::string_view(key)); }
    void set(Value key, Value value);
};

// Arguments of a call as Python passes them.
struct CallArgs {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keyword;
    int line = 0;  // the template line of the call, for errors
    size_t max_bytes = SIZE_MAX;  // the longest string or list a builtin may build
};

struct Callable {
    std::string name;
    std::function<Value(CallArgs&)> call;
};

class Value {
public:
    enum class Kind { undefined, none, boolean, integer, floating, string, list, dict, callable };

    Value() = default;  // undefined
    static Value undefined(std::string hint) {
        Value v;
        v.text_ = std::move(hint);
        return v;
    }
    static Value none() { return Value(Kind::none); }
    Value(bool b) : kind_(Kind::boolean), int_(b) {}
    Value(int64_t i) : kind_(Kind::integer), int_(i) {}
    Value(int i) : kind_(Kind::integer), int_(i) {}
    Value(double f) : kind_(Kind::floating), float_(f) {}
    Value(std::string s) : kind_(Kind::string), footprint_(s.size()), text_(std::move(s)) {}
    Value(std::string_view s) : kind_(Kind::string), footprint_(s.size()), text_(s) {}
    Value(const char* s) : Value(std::string_view(s)) {}
    // markupsafe's Markup, which |safe and |escape make: a str that escapes
    // the plain str added to it ("a"|safe + "<b>" is "a&lt;b&gt;").
    static Value markup(std::string text) {
        Value v(std::move(text));
        v.markup_ = true;
        return v;
    }
    static Value list(ValueList items, bool tuple = false);
    // What jinja2's map/select/unique/items filters (generators), reverse
    // (list_reverseiterator) and dict.items()/keys()/values() (views) return:
    // iterable, but neither indexable nor JSON; a generator has no len() and
    // is always true. `python_type` is the type's name.
    static Value iterator(ValueList items, std::string python_type);
    static Value dict(ValueDict entries = {});
    static Value namespace_object(ValueDict entries);
    static Value function(std::string name, std::function<Value(CallArgs&)> call);
    static Value from_json(const nlohmann::ordered_json& json);

    Kind kind() const noexcept { return kind_; }
    bool is_undefined() const noexcept { return kind_ == Kind::undefined; }
    bool is_none() const noexcept { return kind_ == Kind::none; }
    bool is_bool() const noexcept { return kind_ == Kind::boolean; }
    bool is_int() const noexcept { return kind_ == Kind::integer; }
    bool is_float() const noexcept { return kind_ == Kind::floating; }
    bool is_number() const noexcept { return is_bool() || is_int() || is_float(); }  // Python's Number includes bool
    bool is_string() const noexcept { return kind_ == Kind::string; }
    bool is_markup() const noexcept { return kind_ == Kind::string && markup_; }
    bool is_list() const noexcept { return kind_ == Kind::list; }
    bool is_tuple() const noexcept { return kind_ == Kind::list && tuple_; }
    // A generator, reverse iterator or dict view rather than a list (see iterator()).
    bool is_iterator() const noexcept { return kind_ == Kind::list && !text_.empty(); }
    // A generator or reverse iterator: no len(), always true.
    bool is_lazy() const noexcept { return is_iterator() && text_.rfind("dict_", 0) != 0; }
    bool is_dict() const noexcept { return kind_ == Kind::dict; }
    bool is_namespace() const noexcept { return kind_ == Kind::dict && namespace_; }
    bool is_callable() const noexcept { return kind_ == Kind::callable; }

    bool as_bool() const noexcept { return int_ != 0; }
    int64_t as_int() const noexcept { return int_; }  // also a bool's 0/1
    double as_float() const noexcept { return is_float() ? float_ : static_cast<double>(int_); }
    const std::string& as_string() const noexcept { return text_; }
    // Why an undefined value is undefined ("'x' is undefined").
    const std::string& undefined_hint() const noexcept { return text_; }
    const ValueList& items() const noexcept { return *list_; }
    const ValueDict& entries() const noexcept { return *dict_; }
    ValueDict& mutable_entries() const noexcept { return *dict_; }  // namespaces only
    const Callable& callable() const noexcept { return *callable_; }
    // Containers inside containers: 0 for a scalar, 1 for a flat list.
    int nesting() const noexcept { return nesting_; }
    // Bytes the value holds in strings (an estimate used against memory limits).
    size_t footprint() const noexcept { return footprint_; }

    // Python truth: empty strings, containers, zero, None and undefined are false.
    bool truthy() const;
    // Python's str(): what {{ value }} prints ("" for undefined).
    std::string str() const;
    // Python's repr(), which str() of a container uses for its items.
    std::string repr() const;
    // The type name Python's errors use ("str", "int", "dict", ...).
    std::string type_name() const;
    // Python ==: 1 == 1.0 == True, containers compare item by item.
    bool equals(const Value& other) const;
    // json.dumps(value, ensure_ascii=False, indent=indent) as HF's tojson
    // filter calls it; nullopt when the value has no JSON form (undefined, a callable).
    std::optional<std::string> to_json(std::optional<std::string> indent) const;

private:
    explicit Value(Kind kind) : kind_(kind) {}
    static Value from_json(const nlohmann::ordered_json& json, int depth);
    void dump_json(std::string& out, const std::optional<std::string>& indent, int depth, bool& ok) const;

    Kind kind_ = Kind::undefined;
    bool tuple_ = false;
    bool namespace_ = false;
    bool markup_ = false;
    int nesting_ = 0;
    size_t footprint_ = 0;
    int64_t int_ = 0;
    double float_ = 0;
    std::string text_;
    std::shared_ptr<ValueList> list_;
    std::shared_ptr<ValueDict> dict_;
    std::shared_ptr<Callable> callable_;
};

// Python's repr() of a float: the shortest digits that read back, "1.0", "1e+16", "inf".
std::string python_float_repr(double value);
// Code points in a UTF-8 string.
size_t utf8_length(std::string_view text);
// The UTF-8 string cut into its code points.
std::vector<std::string> utf8_code_points(std::string_view text);

}  // namespace kiln::chat
