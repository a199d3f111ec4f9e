#pragma once
// The parsed form of a chat template: expressions and statements, each with
// the template line it came from so that errors can name it.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "formats/chat/template_value.h"

namespace kiln::chat {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
    enum class Kind {
        literal,      // value
        name,         // name
        attribute,    // children[0] . name
        item,         // children[0] [ children[1] ]
        slice,        // children[0] [ children[1] : children[2] : children[3] ] (null parts absent)
        call,         // children[0] ( children[1..] , keywords )
        filter,       // children[0] | name ( children[1..] , keywords ); children[0] null inside {% filter %}
        test,         // children[0] is [not] name ( children[1..] )
        unary,        // name ("-", "+", "not") children[0]
        binary,       // children[0] name children[1]: + - * / // % ** ~ and or
        compare,      // children[0] names[i] children[i+1] ...: == != < > <= >= in "not in"
        conditional,  // children[1] if children[0] else children[2] (children[2] may be null)
        list,         // [ children ]
        tuple,        // ( children )
        dict,         // { children[2i] : children[2i+1] }
    };
    Kind kind;
    int line = 0;
    int depth = 1;  // levels below and including this node
    Value value;
    std::string name;
    std::vector<std::string> names;  // compare operators
    bool negated = false;            // "is not"
    std::vector<ExprPtr> children;
    std::vector<std::pair<std::string, ExprPtr>> keywords;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct MacroParam {
    std::string name;
    ExprPtr default_value;  // null: none
};

struct Node {
    enum class Kind {
        text,          // text
        output,        // {{ expr }}
        if_chain,      // branches: {condition, body}; a null condition is the else
        for_loop,      // targets in expr [if condition] body [else else_body]
        set,           // targets = expr, or namespace_attr set on targets[0]
        set_block,     // {% set targets[0] %} body {% endset %}, filtered through expr when present
        macro,         // {% macro name(params) %} body
        call_block,    // {% call(params) expr %} body
        filter_block,  // {% filter expr %} body
        scope_block,   // a body with its own variables: {% with params %} (names and values) or {% generation %}
        break_loop,
        continue_loop,
    };
    Kind kind;
    int line = 0;
    std::string text;
    ExprPtr expr;
    ExprPtr condition;
    std::vector<std::string> targets;
    std::string attribute;  // {% set ns.attribute = ... %}
    bool uses_loop = true;  // for loops: whether the body names `loop` (building it costs time)
    std::vector<MacroParam> params;
    std::vector<std::pair<ExprPtr, Body>> branches;
    Body body;
    Body else_body;
};

}  // namespace kiln::chat
