#include "formats/chat/template_renderer.h"

#include <cmath>
#include <functional>
#include <limits>

#include "engine/core/error.h"
#include "formats/chat/template_builtins.h"
#include "formats/chat/template_text.h"

namespace kiln::chat {

namespace {

// Variables of the template, of one for-loop iteration or of one macro call.
struct Scope {
    std::shared_ptr<Scope> parent;
    std::vector<std::pair<std::string, Value>> vars;

    const Value* find(const std::string& name) const {
        for (const Scope* s = this; s; s = s->parent.get())
            for (const auto& [n, v] : s->vars)
                if (n == name) return &v;
        return nullptr;
    }
    void set(const std::string& name, Value value) {
        for (auto& [n, v] : vars) {
            if (n == name) {
                v = std::move(value);
                return;
            }
        }
        vars.emplace_back(name, std::move(value));
    }
};

enum class Flow { normal, break_loop, continue_loop };

// Python's integer arithmetic within int64; Python's own integers do not overflow.
[[noreturn]] void fail_overflow(int line) {
    fail("chat", "template line {}: integer overflow (Python's unbounded integers are not supported)", line);
}

int64_t floor_div(int64_t a, int64_t b) {
    const int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

class Renderer {
public:
    Renderer(const ValueDict& variables, const RenderOptions& options) : options_(options) {
        scope_ = std::make_shared<Scope>();
        for (const auto& [k, v] : variables.entries) scope_->set(k.str(), v);
        install_globals();
    }

    std::string render(const Body& body) {
        std::string out;
        render_body(body, out);
        return out;
    }

private:
    // ---- statements ----

    Flow render_body(const Body& body, std::string& out) {
        for (const NodePtr& node : body) {
            const Flow flow = render_node(*node, out);
            if (flow != Flow::normal) return flow;
        }
        return Flow::normal;
    }

    void append(std::string& out, std::string_view text, int line) {
        if (out.size() + text.size() > options_.limits.max_output_bytes)
            fail("chat", "template line {}: output longer than the limit of {} bytes", line, options_.limits.max_output_bytes);
        out.append(text);
    }

    Flow render_node(const Node& node, std::string& out) {
        switch (node.kind) {
            case Node::Kind::text: append(out, node.text, node.line); return Flow::normal;
            case Node::Kind::output: append(out, eval(*node.expr).str(), node.line); return Flow::normal;
            case Node::Kind::if_chain:
                for (const auto& [condition, body] : node.branches) {
                    if (!condition || eval(*condition).truthy()) return render_body(body, out);
                }
                return Flow::normal;
            case Node::Kind::for_loop: return render_for(node, out);
            case Node::Kind::set: {
                Value value = eval(*node.expr);
                if (!node.attribute.empty()) {
                    const Value* target = scope_->find(node.targets[0]);
                    if (!target || !target->is_namespace())
                        fail("chat", "template line {}: cannot assign attribute on non-namespace object '{}'", node.line, node.targets[0]);
                    if (contains_namespace(value))
                        fail("chat", "template line {}: a namespace stored inside a namespace is not supported", node.line);
                    target->mutable_entries().set(Value(node.attribute), std::move(value));
                } else {
                    assign(node.targets, value, node.line);
                }
                return Flow::normal;
            }
            case Node::Kind::set_block: {
                std::string captured;
                render_scoped(node.body, captured);
                Value value(std::move(captured));
                if (node.expr) value = eval_with_input(*node.expr, value);
                scope_->set(node.targets[0], std::move(value));
                return Flow::normal;
            }
            case Node::Kind::macro: scope_->set(node.text, make_macro(node.text, node.params, node.body, node.line)); return Flow::normal;
            case Node::Kind::call_block: {
                const Value caller = make_macro("caller", node.params, node.body, node.line);
                append(out, call_expression(*node.expr, &caller).str(), node.line);
                return Flow::normal;
            }
            case Node::Kind::filter_block: {
                std::string captured;
                render_scoped(node.body, captured);
                append(out, eval_with_input(*node.expr, Value(std::move(captured))).str(), node.line);
                return Flow::normal;
            }
            case Node::Kind::scope_block: {
                // The values are computed in the enclosing scope, then bound in the block's own.
                std::vector<std::pair<std::string, Value>> bindings;
                for (const MacroParam& p : node.params) bindings.emplace_back(p.name, eval(*p.default_value));
                return render_scoped(node.body, out, std::move(bindings));
            }
            case Node::Kind::break_loop: return Flow::break_loop;
            case Node::Kind::continue_loop: return Flow::continue_loop;
        }
        return Flow::normal;
    }

    // Renders `body` into `out` with its own variables (a block set's or filter's body).
    Flow render_scoped(const Body& body, std::string& out, std::vector<std::pair<std::string, Value>> bindings = {}) {
        auto saved = scope_;
        scope_ = std::make_shared<Scope>(Scope{saved, std::move(bindings)});
        Flow flow;
        try {
            flow = render_body(body, out);
        } catch (...) {
            scope_ = saved;
            throw;
        }
        scope_ = saved;
        return flow;
    }

    static bool contains_namespace(const Value& v) {
        if (v.is_namespace()) return true;
        if (v.is_list())
            for (const Value& item : v.items())
                if (contains_namespace(item)) return true;
        if (v.is_dict())
            for (const auto& [k, item] : v.entries().entries)
                if (contains_namespace(item)) return true;
        return false;
    }

    void assign(const std::vector<std::string>& targets, const Value& value, int line) {
        if (targets.size() == 1) {
            scope_->set(targets[0], value);
            return;
        }
        const std::vector<Value> parts = iterate(value, line);
        if (parts.size() != targets.size())
            fail("chat", "template line {}: cannot unpack {} values into {} names", line, parts.size(), targets.size());
        for (size_t i = 0; i < targets.size(); ++i) scope_->set(targets[i], parts[i]);
    }

    void count_iteration(int line) {
        if (++iterations_ > options_.limits.max_loop_iterations)
            fail("chat", "template line {}: more than the limit of {} loop iterations", line, options_.limits.max_loop_iterations);
    }

    // Returns how the loop's else body ended: a break there belongs to an outer loop.
    Flow render_for(const Node& node, std::string& out) {
        std::vector<Value> items = iterate(eval(*node.expr), node.line);
        const auto outer = scope_;
        const auto restore = [&] { scope_ = outer; };
        try {
            if (node.condition) {
                // The loop's "if" sees the loop variables but not `loop`.
                std::vector<Value> kept;
                for (const Value& item : items) {
                    count_iteration(node.line);
                    scope_ = std::make_shared<Scope>(Scope{outer, {}});
                    assign(node.targets, item, node.line);
                    if (eval(*node.condition).truthy()) kept.push_back(item);
                }
                items = std::move(kept);
                restore();
            }
            const auto n = static_cast<int64_t>(items.size());
            for (int64_t i = 0; i < n; ++i) {
                count_iteration(node.line);
                scope_ = std::make_shared<Scope>(Scope{outer, {}});
                if (!node.uses_loop) {
                    assign(node.targets, items[static_cast<size_t>(i)], node.line);
                    if (render_body(node.body, out) == Flow::break_loop) break;
                    continue;
                }
                ValueDict loop;
                loop.entries.reserve(12);
                loop.entries.emplace_back(Value("index"), Value(i + 1));
                loop.entries.emplace_back(Value("index0"), Value(i));
                loop.entries.emplace_back(Value("revindex"), Value(n - i));
                loop.entries.emplace_back(Value("revindex0"), Value(n - i - 1));
                loop.entries.emplace_back(Value("first"), Value(i == 0));
                loop.entries.emplace_back(Value("last"), Value(i == n - 1));
                loop.entries.emplace_back(Value("length"), Value(n));
                loop.entries.emplace_back(Value("depth"), Value(1));
                loop.entries.emplace_back(Value("depth0"), Value(0));
                if (i > 0) loop.entries.emplace_back(Value("previtem"), items[static_cast<size_t>(i - 1)]);
                if (i + 1 < n) loop.entries.emplace_back(Value("nextitem"), items[static_cast<size_t>(i + 1)]);
                loop.entries.emplace_back(Value("cycle"), Value::function("loop.cycle", [i](CallArgs& args) {
                    if (args.positional.empty()) fail("chat", "template line {}: loop.cycle() needs at least one value", args.line);
                    return args.positional[static_cast<size_t>(i) % args.positional.size()];
                }));
                scope_->set("loop", Value::dict(std::move(loop)));
                assign(node.targets, items[static_cast<size_t>(i)], node.line);
                if (render_body(node.body, out) == Flow::break_loop) break;
            }
            restore();
            if (n == 0 && !node.else_body.empty()) return render_scoped(node.else_body, out);
        } catch (...) {
            restore();
            throw;
        }
        return Flow::normal;
    }

    // A macro (or a call block's caller) as a callable closing over the scope it was defined in.
    Value make_macro(const std::string& name, const std::vector<MacroParam>& params, const Body& body, int line) {
        std::weak_ptr<Scope> defined_in = scope_;
        return Value::function(name, [this, name, &params, &body, line, defined_in](CallArgs& args) -> Value {
            auto parent = defined_in.lock();
            if (!parent) fail("chat", "template line {}: macro '{}' called after its scope ended", args.line, name);
            if (args.positional.size() > params.size())
                fail("chat", "template line {}: macro '{}' takes not more than {} argument(s)", args.line, name, params.size());
            if (++call_depth_ > options_.limits.max_call_depth)
                fail("chat", "template line {}: macro calls nested deeper than the limit of {}", args.line, options_.limits.max_call_depth);
            auto saved = scope_;
            scope_ = std::make_shared<Scope>(Scope{parent, {}});
            std::string out;
            try {
                ValueDict extra_keywords;
                for (size_t i = 0; i < params.size(); ++i) {
                    if (i < args.positional.size()) scope_->set(params[i].name, args.positional[i]);
                }
                for (auto& [key, value] : args.keyword) {
                    bool matched = key == "caller";
                    for (size_t i = 0; i < params.size() && !matched; ++i) {
                        if (params[i].name != key) continue;
                        if (i < args.positional.size())
                            fail("chat", "template line {}: macro '{}' got multiple values for argument '{}'", args.line, name, key);
                        scope_->set(key, value);
                        matched = true;
                    }
                    if (key == "caller") scope_->set("caller", value);
                    if (!matched) extra_keywords.set(Value(key), value);
                }
                if (!extra_keywords.entries.empty())
                    fail("chat", "template line {}: macro '{}' takes no keyword argument '{}'", args.line, name, extra_keywords.entries[0].first.str());
                for (const MacroParam& p : params) {
                    bool bound = false;
                    for (const auto& [n, v] : scope_->vars) bound = bound || n == p.name;
                    if (bound) continue;
                    scope_->set(p.name, p.default_value ? eval(*p.default_value)
                                                        : Value::undefined("parameter '" + p.name + "' was not provided"));
                }
                (void)line;
                render_body(body, out);
            } catch (...) {
                scope_ = saved;
                --call_depth_;
                throw;
            }
            scope_ = saved;
            --call_depth_;
            return Value(std::move(out));
        });
    }

    // ---- expressions ----

    Value eval(const Expr& e) {
        Value v = eval_unchecked(e);
        if (v.nesting() > options_.limits.max_nesting_depth)
            fail("chat", "template line {}: value nested deeper than the limit of {} levels", e.line, options_.limits.max_nesting_depth);
        if (v.footprint() > options_.limits.max_output_bytes)
            fail("chat", "template line {}: value larger than the limit of {} bytes", e.line, options_.limits.max_output_bytes);
        return v;
    }

    // A filter chain whose innermost input is a rendered block.
    Value eval_with_input(const Expr& chain, const Value& input) {
        const Value* saved = block_input_;
        block_input_ = &input;
        Value v;
        try {
            v = eval(chain);
        } catch (...) {
            block_input_ = saved;
            throw;
        }
        block_input_ = saved;
        return v;
    }

    CallArgs eval_arguments(const Expr& e, size_t first) {
        CallArgs args;
        args.line = e.line;
        args.max_bytes = options_.limits.max_output_bytes;
        for (size_t i = first; i < e.children.size(); ++i) args.positional.push_back(eval(*e.children[i]));
        for (const auto& [name, value] : e.keywords) args.keyword.emplace_back(name, eval(*value));
        return args;
    }

    Value call_expression(const Expr& e, const Value* caller) {
        const Value callee = eval(*e.children[0]);
        CallArgs args = eval_arguments(e, 1);
        if (caller) args.keyword.emplace_back("caller", *caller);
        if (callee.is_undefined()) fail_undefined(callee, e.line);
        if (!callee.is_callable()) fail("chat", "template line {}: '{}' object is not callable", e.line, callee.type_name());
        return callee.callable().call(args);
    }

    Value eval_unchecked(const Expr& e) {
        switch (e.kind) {
            case Expr::Kind::literal: return e.value;
            case Expr::Kind::name: {
                if (const Value* v = scope_->find(e.name)) return *v;
                if (const Value* v = globals_.find(e.name)) return *v;
                return Value::undefined("'" + e.name + "' is undefined");
            }
            case Expr::Kind::attribute: return get_attribute(eval(*e.children[0]), e.name, e.line);
            case Expr::Kind::item: return get_item(eval(*e.children[0]), eval(*e.children[1]), e.line);
            case Expr::Kind::slice: {
                const auto part = [&](size_t i) { return e.children[i] ? eval(*e.children[i]) : Value::none(); };
                return get_slice(eval(*e.children[0]), part(1), part(2), part(3), e.line);
            }
            case Expr::Kind::call: return call_expression(e, nullptr);
            case Expr::Kind::filter: {
                if (!e.children[0] && !block_input_) fail("chat", "template line {}: filter '{}' without input", e.line, e.name);
                const Value input = e.children[0] ? eval(*e.children[0]) : *block_input_;
                CallArgs args = eval_arguments(e, 1);
                return apply_filter(e.name, input, args);
            }
            case Expr::Kind::test: {
                const Value input = eval(*e.children[0]);
                CallArgs args = eval_arguments(e, 1);
                return Value(apply_test(e.name, input, args) != e.negated);
            }
            case Expr::Kind::unary: {
                const Value v = eval(*e.children[0]);
                if (e.name == "not") return Value(!v.truthy());
                if (v.is_undefined()) fail_undefined(v, e.line);
                if (!v.is_number()) fail("chat", "template line {}: bad operand type for unary {}: '{}'", e.line, e.name, v.type_name());
                if (e.name == "+") return v.is_bool() ? Value(v.as_int()) : v;
                if (v.is_float()) return Value(-v.as_float());
                if (v.as_int() == std::numeric_limits<int64_t>::min()) fail_overflow(e.line);
                return Value(-v.as_int());
            }
            case Expr::Kind::binary: return eval_binary(e);
            case Expr::Kind::compare: {
                Value left = eval(*e.children[0]);
                for (size_t i = 0; i < e.names.size(); ++i) {
                    Value right = eval(*e.children[i + 1]);
                    const std::string& op = e.names[i];
                    bool ok;
                    if (op == "==") ok = left.equals(right);
                    else if (op == "!=") ok = !left.equals(right);
                    else if (op == "<") ok = python_less(left, right, e.line);
                    else if (op == ">") ok = python_less(right, left, e.line);
                    else if (op == "<=") ok = !python_less(right, left, e.line);
                    else if (op == ">=") ok = !python_less(left, right, e.line);
                    else if (op == "in") ok = python_contains(right, left, e.line);
                    else ok = !python_contains(right, left, e.line);
                    if (!ok) return Value(false);
                    left = std::move(right);
                }
                return Value(true);
            }
            case Expr::Kind::conditional:
                if (eval(*e.children[0]).truthy()) return eval(*e.children[1]);
                return e.children[2] ? eval(*e.children[2]) : Value::undefined("the conditional expression has no else");
            case Expr::Kind::list:
            case Expr::Kind::tuple: {
                ValueList items;
                for (const auto& c : e.children) items.push_back(eval(*c));
                return Value::list(std::move(items), e.kind == Expr::Kind::tuple);
            }
            case Expr::Kind::dict: {
                ValueDict entries;
                for (size_t i = 0; i + 1 < e.children.size(); i += 2) entries.set(eval(*e.children[i]), eval(*e.children[i + 1]));
                return Value::dict(std::move(entries));
            }
        }
        return Value();
    }

    void check_size(size_t bytes, int line) const {
        if (bytes > options_.limits.max_output_bytes)
            fail("chat", "template line {}: value larger than the limit of {} bytes", line, options_.limits.max_output_bytes);
    }

    Value eval_binary(const Expr& e) {
        const std::string& op = e.name;
        const int line = e.line;
        if (op == "and" || op == "or") {
            Value left = eval(*e.children[0]);
            if ((op == "and") != left.truthy()) return left;
            return eval(*e.children[1]);
        }
        const Value a = eval(*e.children[0]);
        const Value b = eval(*e.children[1]);
        if (op == "~") {
            check_size(a.str().size() + b.str().size(), line);
            return Value(a.str() + b.str());
        }
        if (a.is_undefined()) fail_undefined(a, line);
        if (b.is_undefined()) fail_undefined(b, line);
        const auto unsupported = [&]() -> Value {
            fail("chat", "template line {}: unsupported operand type(s) for {}: '{}' and '{}'", line, op, a.type_name(), b.type_name());
        };
        const bool ints = (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool());
        const bool numbers = a.is_number() && b.is_number();
        int64_t r = 0;
        if (op == "+") {
            if (ints) {
                if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) fail_overflow(line);
                return Value(r);
            }
            if (numbers) return Value(a.as_float() + b.as_float());
            if (a.is_string() && b.is_string()) {
                check_size(a.as_string().size() + b.as_string().size(), line);
                if (a.is_markup() != b.is_markup()) {
                    // Markup + str escapes the str (markupsafe); the sum is Markup.
                    const std::string left = a.is_markup() ? a.as_string() : html_escape(a.as_string());
                    const std::string right = b.is_markup() ? b.as_string() : html_escape(b.as_string());
                    return Value::markup(left + right);
                }
                return a.is_markup() ? Value::markup(a.as_string() + b.as_string()) : Value(a.as_string() + b.as_string());
            }
            if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && !a.is_iterator() && !b.is_iterator()) {
                check_size(a.footprint() + b.footprint(), line);
                ValueList items = a.items();
                items.insert(items.end(), b.items().begin(), b.items().end());
                return Value::list(std::move(items), a.is_tuple());
            }
            return unsupported();
        }
        if (op == "-") {
            if (ints) {
                if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) fail_overflow(line);
                return Value(r);
            }
            if (numbers) return Value(a.as_float() - b.as_float());
            return unsupported();
        }
        if (op == "*") {
            if (ints) {
                if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) fail_overflow(line);
                return Value(r);
            }
            if (numbers) return Value(a.as_float() * b.as_float());
            const bool a_seq = a.is_string() || (a.is_list() && !a.is_iterator()), b_seq = b.is_string() || (b.is_list() && !b.is_iterator());
            if ((a_seq && (b.is_int() || b.is_bool())) || (b_seq && (a.is_int() || a.is_bool()))) {
                const Value& seq = a_seq ? a : b;
                const int64_t times = std::max<int64_t>(0, a_seq ? b.as_int() : a.as_int());
                const size_t unit = std::max<size_t>(1, seq.footprint());
                if (times > 0 && unit > options_.limits.max_output_bytes / static_cast<size_t>(times)) check_size(SIZE_MAX, line);
                if (seq.is_string()) {
                    std::string out;
                    for (int64_t i = 0; i < times; ++i) out += seq.as_string();
                    return seq.is_markup() ? Value::markup(std::move(out)) : Value(std::move(out));
                }
                ValueList items;
                for (int64_t i = 0; i < times; ++i) items.insert(items.end(), seq.items().begin(), seq.items().end());
                return Value::list(std::move(items), seq.is_tuple());
            }
            return unsupported();
        }
        if (!numbers) {
            if (op == "%" && a.is_string()) fail("chat", "template line {}: printf-style '%' formatting of strings is not supported", line);
            return unsupported();
        }
        if (op == "/") {
            if (b.as_float() == 0) fail("chat", "template line {}: division by zero", line);
            return Value(a.as_float() / b.as_float());
        }
        if (op == "//" || op == "%") {
            if (ints) {
                if (b.as_int() == 0) fail("chat", "template line {}: integer division or modulo by zero", line);
                if (a.as_int() == std::numeric_limits<int64_t>::min() && b.as_int() == -1) fail_overflow(line);
                const int64_t q = floor_div(a.as_int(), b.as_int());
                return op == "//" ? Value(q) : Value(a.as_int() - q * b.as_int());
            }
            if (b.as_float() == 0) fail("chat", "template line {}: float division or modulo by zero", line);
            const double q = std::floor(a.as_float() / b.as_float());
            if (op == "//") return Value(q);
            double m = std::fmod(a.as_float(), b.as_float());
            if (m != 0 && ((m < 0) != (b.as_float() < 0))) m += b.as_float();
            return Value(m);
        }
        if (op == "**") {
            if (ints && b.as_int() >= 0) {
                int64_t base = a.as_int(), exponent = b.as_int(), result = 1;
                while (exponent > 0) {
                    if ((exponent & 1) && __builtin_mul_overflow(result, base, &result)) fail_overflow(line);
                    exponent >>= 1;
                    if (exponent > 0 && __builtin_mul_overflow(base, base, &base)) fail_overflow(line);
                }
                return Value(result);
            }
            if (a.as_float() == 0 && b.as_float() < 0) fail("chat", "template line {}: 0.0 cannot be raised to a negative power", line);
            return Value(std::pow(a.as_float(), b.as_float()));
        }
        return unsupported();
    }

    // ---- globals ----

    void install_globals() {
        globals_.set(Value("range"), Value::function("range", [](CallArgs& args) {
            if (!args.keyword.empty() || args.positional.empty() || args.positional.size() > 3)
                fail("chat", "template line {}: range() takes 1 to 3 positional arguments", args.line);
            for (const Value& v : args.positional)
                if (!v.is_int() && !v.is_bool()) fail("chat", "template line {}: range() needs integers, not {}", args.line, v.type_name());
            int64_t start = 0, stop, step = 1;
            if (args.positional.size() == 1) stop = args.positional[0].as_int();
            else {
                start = args.positional[0].as_int();
                stop = args.positional[1].as_int();
                if (args.positional.size() == 3) step = args.positional[2].as_int();
            }
            if (step == 0) fail("chat", "template line {}: range() step must not be zero", args.line);
            // jinja2's sandbox refuses ranges longer than 100000 (MAX_RANGE).
            const double length = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step));
            if (length > 100000) fail("chat", "template line {}: range too big: the sandbox allows at most 100000 items", args.line);
            ValueList items;
            for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) items.emplace_back(i);
            return Value::list(std::move(items));
        }));
        globals_.set(Value("namespace"), Value::function("namespace", [](CallArgs& args) {
            ValueDict attrs;
            for (const Value& v : args.positional) {
                if (!v.is_dict() || v.is_namespace()) fail("chat", "template line {}: namespace() takes a dict or keyword arguments", args.line);
                for (const auto& [k, item] : v.entries().entries) attrs.set(k, item);
            }
            for (const auto& [k, v] : args.keyword) attrs.set(Value(k), v);
            for (const auto& [k, v] : attrs.entries)
                if (contains_namespace(v)) fail("chat", "template line {}: a namespace stored inside a namespace is not supported", args.line);
            return Value::namespace_object(std::move(attrs));
        }));
        globals_.set(Value("dict"), Value::function("dict", [](CallArgs& args) {
            ValueDict entries;
            for (const Value& v : args.positional) {
                if (!v.is_dict()) fail("chat", "template line {}: dict() takes a dict or keyword arguments", args.line);
                for (const auto& [k, item] : v.entries().entries) entries.set(k, item);
            }
            for (const auto& [k, v] : args.keyword) entries.set(Value(k), v);
            return Value::dict(std::move(entries));
        }));
        globals_.set(Value("raise_exception"), Value::function("raise_exception", [](CallArgs& args) -> Value {
            const std::string message = args.positional.empty() ? std::string() : args.positional[0].str();
            fail("chat", "template line {}: raise_exception: {}", args.line, message);
        }));
        globals_.set(Value("strftime_now"), Value::function("strftime_now", [this](CallArgs& args) {
            ArgReader reader(args, "strftime_now");
            const Value format = reader.get(0, "format");
            reader.done();
            if (!format.is_string()) fail("chat", "template line {}: strftime_now() needs a format string", args.line);
            std::tm when{};
            if (options_.now) {
                when = *options_.now;
            } else {
                const std::time_t t = std::time(nullptr);
                localtime_r(&t, &when);
            }
            char buffer[512];
            const size_t n = std::strftime(buffer, sizeof buffer, format.as_string().c_str(), &when);
            if (n == 0 && !format.as_string().empty()) fail("chat", "template line {}: strftime_now: the formatted date is too long", args.line);
            return Value(std::string(buffer, n));
        }));
    }

    const RenderOptions& options_;
    std::shared_ptr<Scope> scope_;
    ValueDict globals_;
    const Value* block_input_ = nullptr;
    int64_t iterations_ = 0;
    int call_depth_ = 0;
};

// jinja2's own filters that kiln leaves out: no chat template seen uses them.
bool is_jinja_filter_kiln_lacks(std::string_view name) {
    static const char* const names[] = {"batch", "center", "filesizeformat", "forceescape", "format", "groupby", "pprint", "random",
                                        "slice", "striptags", "truncate", "urlencode", "urlize", "wordcount", "wordwrap", "xmlattr"};
    for (const char* n : names)
        if (name == n) return true;
    return false;
}

void check_expr(const Expr& e) {
    if (e.kind == Expr::Kind::filter && is_jinja_filter_kiln_lacks(e.name))
        fail("chat", "template line {}: filter '{}' is not supported", e.line, e.name);
    if (e.kind == Expr::Kind::filter && !is_known_filter(e.name))
        fail("chat", "template line {}: no filter named '{}'", e.line, e.name);
    if (e.kind == Expr::Kind::test && !is_known_test(e.name)) fail("chat", "template line {}: no test named '{}'", e.line, e.name);
    for (const auto& c : e.children)
        if (c) check_expr(*c);
    for (const auto& [name, c] : e.keywords) check_expr(*c);
}

}  // namespace

void check_builtin_names(const Body& body) {
    for (const NodePtr& node : body) {
        if (node->expr) check_expr(*node->expr);
        if (node->condition) check_expr(*node->condition);
        for (const auto& p : node->params)
            if (p.default_value) check_expr(*p.default_value);
        for (const auto& [condition, branch] : node->branches) {
            if (condition) check_expr(*condition);
            check_builtin_names(branch);
        }
        check_builtin_names(node->body);
        check_builtin_names(node->else_body);
    }
}

std::string render_template(const Body& body, const ValueDict& variables, const RenderOptions& options) {
    return Renderer(variables, options).render(body);
}

}  // namespace kiln::chat
