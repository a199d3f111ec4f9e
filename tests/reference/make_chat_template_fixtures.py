#!/usr/bin/python3
"""Renders every chat template in tests/fixtures/chat_templates/ on a set of
conversations with Python's jinja2, set up as Hugging Face transformers'
apply_chat_template sets it up, and writes what kiln must produce to
tests/fixtures/chat_templates/expected.json.

The environment (transformers' chat template utilities, written from their
documented behaviour): jinja2.sandbox.ImmutableSandboxedEnvironment with
trim_blocks=True, lstrip_blocks=True and the loopcontrols extension (plus a
`generation` block that renders its body, as HF's AssistantTracker does);
the filter tojson = json.dumps(x, ensure_ascii=False, indent=indent,
separators=separators, sort_keys=sort_keys); the globals raise_exception
(raises TemplateError(message)) and strftime_now(format) (datetime.now(),
here fixed at FIXED_NOW so the output is reproducible). The template sees
messages, bos_token, eos_token, add_generation_prompt and, only for the
conversations that have them, tools.

Each case is a template x conversation x add_generation_prompt; it records
either "output" or "error" with "error_kind": "raise_exception" when the
template raised with raise_exception (kiln must report the same message) or
the Python exception's type name otherwise (kiln must fail too).

Run: /usr/bin/python3 tests/reference/make_chat_template_fixtures.py  (jinja2 3.1, < 1 s)
"""
import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.exceptions import TemplateError
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FOLDER = os.path.join(ROOT, "tests", "fixtures", "chat_templates")
FIXED_NOW = datetime(2024, 7, 26, 10, 30, 0)
BOS, EOS = "<s>", "</s>"


class RaisedByTemplate(TemplateError):
    pass


class GenerationBlock(Extension):
    """{% generation %}...{% endgeneration %}: the body, rendered as is."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_environment():
    def raise_exception(message):
        raise RaisedByTemplate(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return FIXED_NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlock, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. \"Paris\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
                "days": {"type": "integer", "description": "Days of forecast"},
            },
            "required": ["city"],
        },
    },
}

UNICODE_TEXT = "日本語で答えて 🦙🔥 — «quotes» \"double\" 'single' back\\slash\nnew line\ttab"

CONVERSATIONS = {
    "system_user": {"messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hello!"},
    ]},
    "user_only": {"messages": [
        {"role": "user", "content": "What is 2 + 2?"},
    ]},
    "multi_turn": {"messages": [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another one?"},
    ]},
    "multi_turn_no_system": {"messages": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
        {"role": "assistant", "content": "Why did the chicken cross the road?"},
    ]},
    "unicode_quotes": {"messages": [
        {"role": "system", "content": "  Spaces around  "},
        {"role": "user", "content": UNICODE_TEXT},
        {"role": "assistant", "content": "了解しました。{{ not a tag }} {% neither %} <|im_end|>"},
        {"role": "user", "content": "Ünïcödé ✓ \u2028 end"},
    ]},
    "tools_no_call": {"tools": [WEATHER_TOOL], "messages": [
        {"role": "user", "content": "What's the weather in Paris?"},
    ]},
    "tool_call": {"tools": [WEATHER_TOOL], "messages": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}},
        ]},
        {"role": "tool", "name": "get_weather", "tool_call_id": "call_1", "content": "{\"temperature\": 22.5, \"sky\": \"clear\"}"},
        {"role": "assistant", "content": "It is 22.5 °C and clear in Paris."},
        {"role": "user", "content": "Thanks!"},
    ]},
    "wrong_order": {"messages": [
        {"role": "assistant", "content": "I speak first."},
        {"role": "assistant", "content": "Twice."},
        {"role": "user", "content": "Hm."},
    ]},
}


def render(env, source, conversation, add_generation_prompt):
    template = env.from_string(source)
    context = {"messages": conversation["messages"], "bos_token": BOS, "eos_token": EOS,
               "add_generation_prompt": add_generation_prompt}
    if "tools" in conversation:
        context["tools"] = conversation["tools"]
    try:
        return {"output": template.render(**context)}
    except RaisedByTemplate as e:
        return {"error": str(e), "error_kind": "raise_exception"}
    except Exception as e:  # the template fails in jinja2 itself: kiln must fail too
        return {"error": str(e), "error_kind": type(e).__name__}


def main():
    env = make_environment()
    names = sorted(f for f in os.listdir(FOLDER) if f.endswith(".jinja"))
    cases = []
    for name in names:
        with open(os.path.join(FOLDER, name), encoding="utf-8") as f:
            source = f.read()
        for conversation_name, conversation in CONVERSATIONS.items():
            for add_generation_prompt in (False, True):
                case = {"template": name, "conversation": conversation_name, "add_generation_prompt": add_generation_prompt}
                case.update(render(env, source, conversation, add_generation_prompt))
                cases.append(case)
    fixture = {
        "generator": "tests/reference/make_chat_template_fixtures.py with jinja2 " + jinja2.__version__,
        "bos_token": BOS, "eos_token": EOS, "now": FIXED_NOW.isoformat(),
        "conversations": CONVERSATIONS, "cases": cases,
    }
    with open(os.path.join(FOLDER, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(fixture, f, ensure_ascii=False, indent=1)
        f.write("\n")
    errors = sum(1 for c in cases if "error" in c)
    print(f"{len(cases)} cases over {len(names)} templates ({errors} expected errors)", file=sys.stderr)


if __name__ == "__main__":
    main()
