#include "formats/chat/template_parser.h"

#include <algorithm>
#include <initializer_list>

#include "engine/core/error.h"
#include "formats/chat/template_lexer.h"

namespace kiln::chat {

namespace {

ExprPtr make_expr(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
}

class Parser {
public:
    Parser(std::vector<Piece> pieces, int max_depth) : pieces_(std::move(pieces)), max_depth_(max_depth) {}

    Body parse() {
        std::string found;
        Body body = parse_body({}, found, "", 0);
        return body;
    }

private:
    // Counts nesting so that a hostile template cannot exhaust the stack.
    struct DepthGuard {
        Parser& p;
        DepthGuard(Parser& parser, int line) : p(parser) {
            if (++p.depth_ > p.max_depth_)
                fail("chat", "template line {}: nesting deeper than the limit of {} levels", line, p.max_depth_);
        }
        ~DepthGuard() { --p.depth_; }
    };

    // ---- token cursor within the current tag ----
    const Token* peek(size_t ahead = 0) const {
        return tok_ + ahead < tokens_->size() ? &(*tokens_)[tok_ + ahead] : nullptr;
    }
    int line() const { return peek() ? peek()->line : tag_line_; }
    bool at_symbol(std::string_view s, size_t ahead = 0) const {
        const Token* t = peek(ahead);
        return t && t->kind == Token::Kind::symbol && t->text == s;
    }
    bool at_name(std::string_view s, size_t ahead = 0) const {
        const Token* t = peek(ahead);
        return t && t->kind == Token::Kind::name && t->text == s;
    }
    bool accept_symbol(std::string_view s) {
        if (!at_symbol(s)) return false;
        ++tok_;
        return true;
    }
    bool accept_name(std::string_view s) {
        if (!at_name(s)) return false;
        ++tok_;
        return true;
    }
    std::string describe_next() const {
        const Token* t = peek();
        if (!t) return "the end of the tag";
        if (t->kind == Token::Kind::string) return "a string";
        return "'" + t->text + "'";
    }
    void expect_symbol(std::string_view s, std::string_view context) {
        if (!accept_symbol(s)) fail("chat", "template line {}: expected '{}' {} but found {}", line(), s, context, describe_next());
    }
    std::string expect_name(std::string_view context) {
        const Token* t = peek();
        if (!t || t->kind != Token::Kind::name) fail("chat", "template line {}: expected a name {} but found {}", line(), context, describe_next());
        ++tok_;
        return t->text;
    }
    void expect_tag_end(std::string_view construct) {
        if (peek()) fail("chat", "template line {}: unexpected {} in '{}'", line(), describe_next(), construct);
    }

    // Records how deep `e` reaches: long operator chains build deep trees
    // without deep parsing, and evaluating them recurses.
    ExprPtr finish(ExprPtr e) {
        for (const auto& c : e->children)
            if (c) e->depth = std::max(e->depth, c->depth + 1);
        for (const auto& [name, c] : e->keywords) e->depth = std::max(e->depth, c->depth + 1);
        if (e->depth > max_depth_) fail("chat", "template line {}: expression nested deeper than the limit of {} levels", e->line, max_depth_);
        return e;
    }

    // ---- statements ----

    // Parses pieces until a statement whose keyword is in `stops` (left as the
    // current tag, cursor after the keyword); `opener` names the block for errors.
    Body parse_body(std::initializer_list<std::string_view> stops, std::string& found, std::string_view opener, int opener_line) {
        DepthGuard guard(*this, opener_line);
        if (stops.size() > 0) open_blocks_.push_back({std::string(opener), opener_line, std::string(*(stops.end() - 1))});
        struct Pop {
            std::vector<OpenBlock>& blocks;
            bool active;
            ~Pop() {
                if (active) blocks.pop_back();
            }
        } pop{open_blocks_, stops.size() > 0};
        Body body;
        while (index_ < pieces_.size()) {
            Piece& piece = pieces_[index_++];
            if (piece.kind == Piece::Kind::text) {
                auto node = std::make_unique<Node>();
                node->kind = Node::Kind::text;
                node->line = piece.line;
                node->text = std::move(piece.text);
                body.push_back(std::move(node));
                continue;
            }
            tokens_ = &piece.tokens;
            tok_ = 0;
            tag_line_ = piece.line;
            if (piece.kind == Piece::Kind::output) {
                auto node = std::make_unique<Node>();
                node->kind = Node::Kind::output;
                node->line = piece.line;
                if (!peek()) fail("chat", "template line {}: empty expression '{{{{ }}}}'", piece.line);
                node->expr = parse_tuple(true);
                expect_tag_end("{{ }}");
                body.push_back(std::move(node));
                continue;
            }
            if (!peek() || peek()->kind != Token::Kind::name) fail("chat", "template line {}: expected a statement name after '{{%'", piece.line);
            const std::string keyword = peek()->text;
            ++tok_;
            if (std::find(stops.begin(), stops.end(), keyword) != stops.end()) {
                found = keyword;
                return body;
            }
            body.push_back(parse_statement(keyword, piece.line));
        }
        if (stops.size() > 0) {
            fail("chat", "template line {}: '{{% {} %}}' is never closed (expected '{{% {} %}}' before the end of the template)",
                 opener_line, opener, *(stops.end() - 1));
        }
        return body;
    }

    NodePtr parse_statement(const std::string& keyword, int line) {
        auto node = std::make_unique<Node>();
        node->line = line;
        std::string found;
        if (keyword == "if") {
            node->kind = Node::Kind::if_chain;
            ExprPtr condition = parse_tuple(true);
            expect_tag_end("if");
            while (true) {
                Body body = parse_body({"elif", "else", "endif"}, found, "if", line);
                node->branches.emplace_back(std::move(condition), std::move(body));
                if (found == "elif") {
                    condition = parse_tuple(true);
                    expect_tag_end("elif");
                } else if (found == "else") {
                    expect_tag_end("else");
                    node->branches.emplace_back(nullptr, parse_body({"endif"}, found, "if", line));
                    expect_tag_end("endif");
                    break;
                } else {
                    expect_tag_end("endif");
                    break;
                }
            }
        } else if (keyword == "for") {
            node->kind = Node::Kind::for_loop;
            do node->targets.push_back(expect_name("as a loop variable"));
            while (accept_symbol(","));
            if (!accept_name("in")) fail("chat", "template line {}: expected 'in' in 'for' but found {}", this->line(), describe_next());
            node->expr = parse_tuple(false);
            if (accept_name("if")) node->condition = parse_conditional();
            if (at_name("recursive")) fail("chat", "template line {}: recursive for loops are not supported", line);
            expect_tag_end("for");
            ++loop_depth_;
            const int references_before = loop_references_;
            node->body = parse_body({"else", "endfor"}, found, "for", line);
            node->uses_loop = loop_references_ != references_before;
            if (found == "else") {
                expect_tag_end("else");
                --loop_depth_;  // break/continue in a loop's else belong to an outer loop
                node->else_body = parse_body({"endfor"}, found, "for", line);
                ++loop_depth_;
            }
            --loop_depth_;
            expect_tag_end("endfor");
        } else if (keyword == "set") {
            node->targets.push_back(expect_name("to set"));
            if (accept_symbol(".")) {
                node->attribute = expect_name("as the attribute to set");
            } else {
                while (accept_symbol(",")) node->targets.push_back(expect_name("to set"));
            }
            if (accept_symbol("=")) {
                node->kind = Node::Kind::set;
                node->expr = parse_tuple(true);
                expect_tag_end("set");
            } else {
                if (node->targets.size() != 1 || !node->attribute.empty())
                    fail("chat", "template line {}: expected '=' in 'set' but found {}", this->line(), describe_next());
                node->kind = Node::Kind::set_block;
                if (accept_symbol("|")) node->expr = parse_filter_chain(nullptr);
                expect_tag_end("set");
                node->body = parse_body({"endset"}, found, "set", line);
                expect_tag_end("endset");
            }
        } else if (keyword == "macro") {
            node->kind = Node::Kind::macro;
            node->text = expect_name("for the macro");
            parse_params(*node, true);
            expect_tag_end("macro");
            const int saved_loops = loop_depth_;
            loop_depth_ = 0;
            node->body = parse_body({"endmacro"}, found, "macro", line);
            loop_depth_ = saved_loops;
            accept_name(node->text);
            expect_tag_end("endmacro");
        } else if (keyword == "call") {
            node->kind = Node::Kind::call_block;
            if (at_symbol("(")) parse_params(*node, false);
            node->expr = parse_conditional();
            if (node->expr->kind != Expr::Kind::call) fail("chat", "template line {}: 'call' needs a macro call", line);
            expect_tag_end("call");
            node->body = parse_body({"endcall"}, found, "call", line);
            expect_tag_end("endcall");
        } else if (keyword == "filter") {
            node->kind = Node::Kind::filter_block;
            node->expr = parse_filter_chain(nullptr);
            expect_tag_end("filter");
            node->body = parse_body({"endfilter"}, found, "filter", line);
            expect_tag_end("endfilter");
        } else if (keyword == "generation") {
            // Hugging Face's AssistantTracker marks the assistant's text; the rendering is the body.
            node->kind = Node::Kind::scope_block;
            expect_tag_end("generation");
            node->body = parse_body({"endgeneration"}, found, "generation", line);
            expect_tag_end("endgeneration");
        } else if (keyword == "with") {
            node->kind = Node::Kind::scope_block;
            while (peek()) {
                if (!node->params.empty()) expect_symbol(",", "between 'with' assignments");
                MacroParam assignment;
                assignment.name = expect_name("to assign in 'with'");
                expect_symbol("=", "in a 'with' assignment");
                assignment.default_value = parse_conditional();
                node->params.push_back(std::move(assignment));
            }
            node->body = parse_body({"endwith"}, found, "with", line);
            expect_tag_end("endwith");
        } else if (keyword == "break" || keyword == "continue") {
            if (loop_depth_ == 0) fail("chat", "template line {}: '{}' outside a for loop", line, keyword);
            node->kind = keyword == "break" ? Node::Kind::break_loop : Node::Kind::continue_loop;
            expect_tag_end(keyword);
        } else if (keyword.rfind("end", 0) == 0 || keyword == "elif" || keyword == "else") {
            if (!open_blocks_.empty()) {
                const OpenBlock& open = open_blocks_.back();
                fail("chat", "template line {}: unexpected '{{% {} %}}': the '{{% {} %}}' opened on line {} needs '{{% {} %}}' first", line,
                     keyword, open.opener, open.line, open.closer);
            }
            fail("chat", "template line {}: '{{% {} %}}' without a block to close", line, keyword);
        } else {
            fail("chat", "template line {}: statement '{}' is not supported", line, keyword);
        }
        return node;
    }

    // "(a, b=default)": a macro's parameters (defaults allowed) or a call block's.
    void parse_params(Node& node, bool required) {
        if (!accept_symbol("(")) {
            if (required) fail("chat", "template line {}: expected '(' after the macro name but found {}", line(), describe_next());
            return;
        }
        while (!accept_symbol(")")) {
            if (!node.params.empty()) expect_symbol(",", "between parameters");
            if (accept_symbol(")")) break;
            MacroParam param;
            param.name = expect_name("as a parameter");
            if (accept_symbol("=")) param.default_value = parse_conditional();
            node.params.push_back(std::move(param));
        }
    }

    // "name(args) | name ...": the filters of {% filter %} and {% set x | f %}.
    ExprPtr parse_filter_chain(ExprPtr input) {
        do {
            input = parse_filter(std::move(input));
        } while (accept_symbol("|"));
        return input;
    }

    // ---- expressions (jinja2's precedence, loosest first) ----

    ExprPtr parse_tuple(bool with_conditional) {
        const int start = line();
        ExprPtr first = with_conditional ? parse_conditional() : parse_or();
        if (!at_symbol(",")) return first;
        auto tuple = make_expr(Expr::Kind::tuple, start);
        tuple->children.push_back(std::move(first));
        while (accept_symbol(",")) {
            if (!peek() || at_name("if") || at_symbol(")")) break;  // "(1,)" and a trailing comma
            tuple->children.push_back(with_conditional ? parse_conditional() : parse_or());
        }
        return tuple;
    }

    ExprPtr parse_conditional() {
        DepthGuard guard(*this, line());
        ExprPtr value = parse_or();
        while (at_name("if")) {
            const int l = line();
            ++tok_;
            auto cond = make_expr(Expr::Kind::conditional, l);
            cond->children.push_back(parse_or());
            cond->children.insert(cond->children.begin() + 1, std::move(value));
            cond->children.push_back(accept_name("else") ? parse_conditional() : nullptr);
            value = finish(std::move(cond));
        }
        return value;
    }

    ExprPtr binary(std::string op, ExprPtr left, ExprPtr right, int l) {
        auto e = make_expr(Expr::Kind::binary, l);
        e->name = std::move(op);
        e->children.push_back(std::move(left));
        e->children.push_back(std::move(right));
        return finish(std::move(e));
    }

    ExprPtr parse_or() {
        ExprPtr left = parse_and();
        while (at_name("or")) {
            const int l = line();
            ++tok_;
            left = binary("or", std::move(left), parse_and(), l);
        }
        return left;
    }

    ExprPtr parse_and() {
        ExprPtr left = parse_not();
        while (at_name("and")) {
            const int l = line();
            ++tok_;
            left = binary("and", std::move(left), parse_not(), l);
        }
        return left;
    }

    ExprPtr parse_not() {
        DepthGuard guard(*this, line());
        if (at_name("not")) {
            auto e = make_expr(Expr::Kind::unary, line());
            ++tok_;
            e->name = "not";
            e->children.push_back(parse_not());
            return finish(std::move(e));
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        const int l = line();
        ExprPtr first = parse_math1();
        ExprPtr cmp;
        while (true) {
            std::string op;
            if (at_symbol("==") || at_symbol("!=") || at_symbol("<") || at_symbol(">") || at_symbol("<=") || at_symbol(">=")) {
                op = peek()->text;
                ++tok_;
            } else if (at_name("in")) {
                op = "in";
                ++tok_;
            } else if (at_name("not") && at_name("in", 1)) {
                op = "not in";
                tok_ += 2;
            } else {
                break;
            }
            if (!cmp) {
                cmp = make_expr(Expr::Kind::compare, l);
                cmp->children.push_back(std::move(first));
            }
            cmp->names.push_back(op);
            cmp->children.push_back(parse_math1());
        }
        return cmp ? finish(std::move(cmp)) : std::move(first);
    }

    ExprPtr parse_math1() {
        ExprPtr left = parse_concat();
        while (at_symbol("+") || at_symbol("-")) {
            const int l = line();
            std::string op = peek()->text;
            ++tok_;
            left = binary(op, std::move(left), parse_concat(), l);
        }
        return left;
    }

    ExprPtr parse_concat() {
        ExprPtr left = parse_math2();
        while (at_symbol("~")) {
            const int l = line();
            ++tok_;
            left = binary("~", std::move(left), parse_math2(), l);
        }
        return left;
    }

    ExprPtr parse_math2() {
        ExprPtr left = parse_pow();
        while (at_symbol("*") || at_symbol("/") || at_symbol("//") || at_symbol("%")) {
            const int l = line();
            std::string op = peek()->text;
            ++tok_;
            left = binary(op, std::move(left), parse_pow(), l);
        }
        return left;
    }

    ExprPtr parse_pow() {
        ExprPtr left = parse_unary(true);
        while (at_symbol("**")) {
            const int l = line();
            ++tok_;
            left = binary("**", std::move(left), parse_unary(true), l);
        }
        return left;
    }

    ExprPtr parse_unary(bool with_filter) {
        DepthGuard guard(*this, line());
        ExprPtr node;
        if (at_symbol("-") || at_symbol("+")) {
            node = make_expr(Expr::Kind::unary, line());
            node->name = peek()->text;
            ++tok_;
            node->children.push_back(parse_unary(false));
            node = finish(std::move(node));
        } else {
            node = parse_postfix(parse_primary());
        }
        return with_filter ? parse_filter_and_test(std::move(node)) : std::move(node);
    }

    ExprPtr parse_primary() {
        const Token* t = peek();
        if (!t) fail("chat", "template line {}: expected an expression but the tag ends", tag_line_);
        const int l = t->line;
        if (t->kind == Token::Kind::name) {
            ++tok_;
            auto e = make_expr(Expr::Kind::literal, l);
            const std::string& n = t->text;
            if (n == "true" || n == "True") e->value = Value(true);
            else if (n == "false" || n == "False") e->value = Value(false);
            else if (n == "none" || n == "None") e->value = Value::none();
            else {
                e->kind = Expr::Kind::name;
                e->name = n;
                if (n == "loop") ++loop_references_;
            }
            return e;
        }
        if (t->kind == Token::Kind::string) {
            std::string text;
            while (peek() && peek()->kind == Token::Kind::string) text += (*tokens_)[tok_++].text;  // adjacent literals join
            auto e = make_expr(Expr::Kind::literal, l);
            e->value = Value(std::move(text));
            return e;
        }
        if (t->kind == Token::Kind::integer || t->kind == Token::Kind::floating) {
            ++tok_;
            auto e = make_expr(Expr::Kind::literal, l);
            e->value = t->kind == Token::Kind::integer ? Value(t->integer) : Value(t->floating);
            return e;
        }
        if (accept_symbol("(")) {
            if (accept_symbol(")")) return make_expr(Expr::Kind::tuple, l);
            ExprPtr inner = parse_tuple(true);
            expect_symbol(")", "to close '('");
            return inner;
        }
        if (accept_symbol("[")) {
            auto e = make_expr(Expr::Kind::list, l);
            while (!accept_symbol("]")) {
                if (!e->children.empty()) {
                    expect_symbol(",", "between list items");
                    if (accept_symbol("]")) break;
                }
                e->children.push_back(parse_conditional());
            }
            return e;
        }
        if (accept_symbol("{")) {
            auto e = make_expr(Expr::Kind::dict, l);
            while (!accept_symbol("}")) {
                if (!e->children.empty()) {
                    expect_symbol(",", "between dict items");
                    if (accept_symbol("}")) break;
                }
                e->children.push_back(parse_conditional());
                expect_symbol(":", "after a dict key");
                e->children.push_back(parse_conditional());
            }
            return e;
        }
        fail("chat", "template line {}: unexpected {} where an expression should start", l, describe_next());
    }

    ExprPtr parse_postfix(ExprPtr node) {
        while (true) {
            const int l = line();
            if (accept_symbol(".")) {
                const Token* t = peek();
                if (t && t->kind == Token::Kind::integer) {  // foo.0 is foo[0]
                    ++tok_;
                    auto e = make_expr(Expr::Kind::item, l);
                    e->children.push_back(std::move(node));
                    auto index = make_expr(Expr::Kind::literal, l);
                    index->value = Value(t->integer);
                    e->children.push_back(std::move(index));
                    node = finish(std::move(e));
                    continue;
                }
                auto e = make_expr(Expr::Kind::attribute, l);
                e->name = expect_name("after '.'");
                e->children.push_back(std::move(node));
                node = finish(std::move(e));
            } else if (accept_symbol("[")) {
                node = parse_subscript(std::move(node), l);
            } else if (at_symbol("(")) {
                node = parse_call(std::move(node));
            } else {
                return node;
            }
        }
    }

    ExprPtr parse_subscript(ExprPtr target, int l) {
        std::vector<ExprPtr> parts;
        bool is_slice = false;
        // [start : stop : step], each part optional.
        for (int part = 0; part < 3; ++part) {
            if (at_symbol(":") || at_symbol("]")) parts.push_back(nullptr);
            else parts.push_back(parse_conditional());
            if (!accept_symbol(":")) break;
            is_slice = true;
            if (part == 2) fail("chat", "template line {}: a slice has at most three parts", l);
        }
        expect_symbol("]", "to close '['");
        if (!is_slice) {
            if (!parts[0]) fail("chat", "template line {}: empty subscript '[]'", l);
            auto e = make_expr(Expr::Kind::item, l);
            e->children.push_back(std::move(target));
            e->children.push_back(std::move(parts[0]));
            return finish(std::move(e));
        }
        parts.resize(3);
        auto e = make_expr(Expr::Kind::slice, l);
        e->children.push_back(std::move(target));
        for (auto& p : parts) e->children.push_back(std::move(p));
        return finish(std::move(e));
    }

    // "(a, b, key=value)" into e->children (after those it has) and e->keywords.
    void parse_arguments(Expr& e) {
        expect_symbol("(", "to start the arguments");
        bool first = true;
        while (!accept_symbol(")")) {
            if (!first) {
                expect_symbol(",", "between arguments");
                if (accept_symbol(")")) break;
            }
            first = false;
            if (at_symbol("*") || at_symbol("**")) fail("chat", "template line {}: '*' and '**' arguments are not supported", line());
            if (peek() && peek()->kind == Token::Kind::name && at_symbol("=", 1)) {
                std::string name = peek()->text;
                tok_ += 2;
                e.keywords.emplace_back(std::move(name), parse_conditional());
            } else {
                if (!e.keywords.empty()) fail("chat", "template line {}: a positional argument after a keyword argument", line());
                e.children.push_back(parse_conditional());
            }
        }
    }

    ExprPtr parse_call(ExprPtr callee) {
        auto e = make_expr(Expr::Kind::call, line());
        e->children.push_back(std::move(callee));
        parse_arguments(*e);
        return finish(std::move(e));
    }

    ExprPtr parse_filter(ExprPtr input) {
        auto e = make_expr(Expr::Kind::filter, line());
        e->name = expect_name("as a filter");
        while (accept_symbol(".")) e->name += "." + expect_name("in a filter name");
        e->children.push_back(std::move(input));
        if (at_symbol("(")) parse_arguments(*e);
        return finish(std::move(e));
    }

    ExprPtr parse_filter_and_test(ExprPtr node) {
        while (true) {
            if (accept_symbol("|")) {
                node = parse_filter(std::move(node));
            } else if (at_name("is")) {
                auto e = make_expr(Expr::Kind::test, line());
                ++tok_;
                e->negated = accept_name("not");
                e->name = expect_name("as a test after 'is'");
                while (accept_symbol(".")) e->name += "." + expect_name("in a test name");
                e->children.push_back(std::move(node));
                const Token* t = peek();
                if (at_symbol("(")) {
                    parse_arguments(*e);
                } else if (t && (t->kind != Token::Kind::symbol || t->text == "[" || t->text == "{") && !at_name("else") &&
                           !at_name("or") && !at_name("and")) {
                    e->children.push_back(parse_postfix(parse_primary()));  // "is divisibleby 3"
                }
                node = finish(std::move(e));
            } else if (at_symbol("(")) {
                node = parse_call(std::move(node));
            } else {
                return node;
            }
        }
    }

    struct OpenBlock {
        std::string opener;
        int line;
        std::string closer;
    };
    std::vector<OpenBlock> open_blocks_;  // the blocks being parsed, innermost last
    std::vector<Piece> pieces_;
    size_t index_ = 0;
    const std::vector<Token>* tokens_ = nullptr;
    size_t tok_ = 0;
    int tag_line_ = 0;
    int depth_ = 0;
    int max_depth_;
    int loop_depth_ = 0;
    int loop_references_ = 0;  // names `loop` parsed so far
};

}  // namespace

Body parse_template(std::string_view source, int max_depth) { return Parser(lex_template(source), max_depth).parse(); }

}  // namespace kiln::chat
