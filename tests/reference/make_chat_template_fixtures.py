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


# Small templates on odd cases of the language, each rendered with the
# variables in SNIPPET_CONTEXT; kiln must print the same or fail likewise.
SNIPPET_CONTEXT = {
    "xs": [3, 1, 2], "empty": [], "d": {"b": 2, "a": 1, "c": None}, "s": "Héllo, 世界 🦙",
    "msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "extra": [1, 2.5, True, None]}],
    "n": 7, "f": 2.5, "t": True, "none": None, "words": "  a  b\tc\n ",
}

SNIPPETS = [
    # text and whitespace control
    "a\n{% if t %}\nyes\n{% endif %}\nb\n",
    "  {% if t %}x{% endif %}  \n  {%- if t %}y{% endif -%}  \nz",
    "{% for x in xs %}\n    {{ x }}\n{% endfor %}\n",
    "  {%+ if t %}kept{% endif %}\n{% if t +%}\nkeeps newline{% endif %}",
    "{# comment #}\n  {# indented comment #}\nafter\n{#- stripped -#}   end",
    "{{ 'a' }}  {{- 'b' -}}  {{ 'c' }}\n",
    "line\r\nwindows\r\n{% if t %}\r\nx\r\n{% endif %}\r\n",
    "trailing newline is dropped\n",
    "two trailing newlines\n\n",
    "{% if t %}a{% else %}b{% endif %}   {% if t %}\n  c\n{% endif %}",
    # literals and printing
    "{{ 1 }} {{ 1.0 }} {{ 1.5e3 }} {{ 1e20 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1_000 }} {{ -0.0 }} {{ 10/4 }} {{ 1/3 }}",
    "{{ true }} {{ True }} {{ none }} {{ None }} {{ false }}",
    "{{ [1, 'a', \"b'c\", none, true, 1.5] }} {{ (1,) }} {{ (1, 2) }} {{ () }} {{ {'k': [1], 2: 'v'} }}",
    "{{ 'tab\\there' }}|{{ \"q\\\"uote\" }}|{{ 'uni\\u00e9\\U0001F999' }}|{{ 'keep\\d' }}|{{ 'a' 'b' }}",
    "{{ ['new\\nline', 'back\\\\slash', 'é', '\\x01', \"it's\", 'say \"hi\"', \"both ' \\\"\"] }}",
    "{{ d }} {{ msgs[1] }} {{ msgs[1].extra }}",
    "{{ 1 + 2 * 3 ** 2 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}",
    "{{ 1 + 1.5 }} {{ true + 1 }} {{ 'a' * 3 }} {{ [1] * 2 }} {{ [1] + [2] }} {{ 3 * 'ab' }} {{ 2.0 * 3 }}",
    "{{ 'a' ~ 1 ~ none ~ true ~ [1] ~ undefined_thing ~ 2.50 }}",
    "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 1 == true }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 'a' != 'a' }}",
    "{{ 'ell' in 'hello' }} {{ 2 in xs }} {{ 'a' in d }} {{ 'z' not in d }} {{ 5 not in xs }} {{ 'x' in undefined_thing }}",
    "{{ t and 'yes' }} {{ none or 'fallback' }} {{ 0 or [] or 'last' }} {{ '' and 'never' }} {{ not empty }} {{ not not xs }}",
    "{{ 'a' if t else 'b' }} {{ 'a' if none else 'b' }} [{{ 'only' if none }}] {{ 1 if false else 2 if true else 3 }}",
    # attribute, item and slice access
    "{{ msgs[0].role }} {{ msgs[0]['content'] }} {{ msgs[-1].role }} {{ msgs[5] }}|{{ msgs[0].missing }}|{{ d.b }} {{ xs.0 }}",
    "{{ s[0] }} {{ s[-1] }} {{ s[1:4] }} {{ s[::-1] }} {{ s[-3:] }} {{ xs[::2] }} {{ xs[1:] }} {{ xs[:-1] }} {{ xs[10:] }} {{ xs[::-1] }} {{ s[100] }}|",
    "{{ xs[-10:2] }} {{ 'abcdef'[1:5:2] }} {{ 'abcdef'[5:1:-2] }} {{ xs[none:none] }}",
    "{{ msgs[0].missing is defined }} {{ undefined_thing is defined }} {{ undefined_thing is undefined }} {{ none is none }} {{ d.c is none }}",
    # tests
    "{{ 1 is number }} {{ true is number }} {{ 1.5 is float }} {{ true is integer }} {{ 1 is integer }} {{ 's' is string }} {{ d is mapping }} {{ xs is mapping }}",
    "{{ xs is iterable }} {{ 's' is iterable }} {{ 1 is iterable }} {{ d is sequence }} {{ xs is sequence }} {{ true is boolean }} {{ 1 is boolean }} {{ true is true }} {{ 1 is true }} {{ false is false }}",
    "{{ 4 is even }} {{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(2) }} {{ 'a' is equalto 'a' }} {{ 1 is eq 1 }} {{ 2 is gt 1 }} {{ 2 is lt(1) }} {{ 2 is in xs }} {{ 'ab' is lower }} {{ 'AB' is upper }}",
    "{{ n is not none }} {{ n is not string }} {{ undefined_thing is not defined and true }} {{ none is sameas none }} {{ 1 is sameas true }}",
    "{{ '\u3000\u00a0 全角 \u2003\n'|trim }}|{{ ' a\u3000b\u00a0c '.split() }}|{{ '\u3000x '.strip() }}|{{ 'a b  c'.rsplit(none, 1) }}",
    "{% for x in xs %}{% for y in empty %}{% else %}{% if x == 1 %}{% break %}{% endif %}{% endfor %}{{ x }}{% endfor %}|{% for x in xs %}{% with %}{% if x == 1 %}{% continue %}{% endif %}{% endwith %}{{ x }}{% endfor %}",
    "{{ '  a b  '.split(none, 0) }} {{ '  a b  c '.split(none, 1) }} {{ '  a b  c '.rsplit(none, 1) }} {{ ' a '.rsplit(none, 0) }} {{ 'a,b,c'.rsplit(',') }} {{ ',a,'.split(',') }}",
    "{% with a = 1, b = n %}{{ a + b }}{% set c = 3 %}{{ c }}{% endwith %}[{{ a }}{{ c }}]",
    # filters
    "{{ '  x  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ s|length }} {{ xs|count }} {{ d|length }} {{ undefined_thing|length }} {{ s|upper }} {{ s|lower }} {{ 'hello wORLD-foo'|title }} {{ 'hELLO world'|capitalize }}",
    "{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'abc'|replace('', '-') }} {{ undefined_thing|default('dflt') }} {{ none|default('kept none') }} {{ ''|default('empty', true) }} {{ ''|d('x', boolean=true) }}",
    "{{ d|items|list }} {{ d.items()|list }} {{ d.keys()|list }} {{ d.values()|list }} {{ d|list }} {{ d|dictsort }}",
    "{{ xs|join(', ') }} {{ msgs|join('|', attribute='role') }} {{ xs|first }} {{ xs|last }} {{ empty|first }}|{{ 'abc'|first }} {{ s|list }}",
    "{{ msgs|selectattr('role', 'equalto', 'user')|list }} {{ msgs|rejectattr('role', 'eq', 'user')|map(attribute='content')|list }} {{ msgs|selectattr('extra')|list|length }} {{ msgs|selectattr('extra', 'defined')|map(attribute='role')|join }}",
    "{{ xs|select('odd')|list }} {{ xs|reject('gt', 1)|list }} {{ ['a', 'B', 'c']|map('upper')|list }} {{ xs|map('string')|join('+') }} {{ [[1, 2], [3]]|map('length')|list }} {{ xs|select|list }}",
    "{{ 42|string }} {{ '42'|int + 1 }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(5) }} {{ 4.7|int }} {{ '2.5'|float }} {{ 3|float }} {{ none|int }} {{ '  12 '|int }} {{ '1_0'|int }}",
    "{{ 'abc'|list }} {{ ['b', 'A', 'a', 'B']|unique|list }} {{ ['b', 'A', 'a']|unique(case_sensitive=true)|list }} {{ xs|reverse|list }} {{ 'abc'|reverse }} {{ xs|sort }} {{ xs|sort(reverse=true) }} {{ ['b', 'A', 'c']|sort }}",
    "{{ msgs|sort(attribute='role', reverse=true)|map(attribute='role')|list }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.567|round(2) }} {{ 2.1|round(0, 'ceil') }} {{ 7|round }} {{ -3|abs }} {{ -2.5|abs }} {{ xs|sum }} {{ xs|min }} {{ xs|max }}",
    "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ 'x\\n'|indent(3) }}|{{ 'a\\nb'|indent('> ') }}",
    "{{ '<a href=\"x\">&\\'</a>'|e }} {{ '<b>'|escape|escape }} {{ '<i>'|safe }} {{ '<i>'|safe + '<u>' }} {{ '<u>' + '<i>'|safe }} {{ ('<i>'|safe) ~ '<u>' }}",
    "{{ d|tojson }} {{ msgs|tojson }} {{ s|tojson }} {{ 'q\"\\\\\\n\\t\\u0001'|tojson }} {{ [1.0, 2.5e-7, 1e22, true, none]|tojson }} {{ {}|tojson }} {{ []|tojson(indent=2) }}",
    "{{ msgs|tojson(indent=2) }}\n{{ d|tojson(indent=4) }}\n{{ {'a': {'b': [1, {'c': []}]}}|tojson(indent=1) }}",
    "{{ {1: 'int key', true: 'bool key', none: 'none key'}|tojson }} {{ (1, 2)|tojson }}",
    # str methods
    "{{ words.strip() }}|{{ words.lstrip() }}|{{ words.rstrip() }}|{{ 'xxhixx'.strip('x') }}|{{ words.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}",
    "{{ s.startswith('Hé') }} {{ s.endswith('🦙') }} {{ s.startswith(('x', 'H')) }} {{ 'abc'.upper() }} {{ 'ABC'.lower() }} {{ 'a b'.title() }} {{ 'aXb'.replace('X', '-') }} {{ 'abcb'.find('b') }} {{ 'abcb'.count('b') }} {{ ', '.join(['x', 'y']) }}",
    "{{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 'fallback') }} {{ msgs[0].get('role') }} {{ 'a\\nb\\r\\nc'.splitlines() }} {{ '12'.isdigit() }}",
    # statements
    "{% for x in xs %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }};{% endfor %}",
    "{% for x in xs %}[{{ loop.previtem }}|{{ loop.nextitem }}|{{ loop.previtem is defined }}]{% endfor %}",
    "{% for x in xs if x > 1 %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% else %}none{% endfor %}|{% for x in empty %}x{% else %}empty{% endfor %}",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %} {% for k in d %}{{ k }}{% endfor %} {% for c in 'ab' %}{{ c }}.{% endfor %} {% for a, b in [[1, 2], (3, 4)] %}{{ a + b }}{% endfor %}",
    "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 4 %}{% break %}{% endif %}{{ x }}{% endfor %} {{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }}",
    "{% for x in [1, 2] %}{% for y in ['a', 'b'] %}{{ loop.index }}{{ x }}{{ y }} {% endfor %}{{ loop.last }} {% endfor %}",
    "{% for x in [1, 2] %}{{ loop.cycle('odd', 'even') }} {% endfor %}",
    "{% set a = 1 %}{% for x in xs %}{% set a = a + x %}{{ a }} {% endfor %}{{ a }}",
    "{% set ns = namespace(total=0, names=[]) %}{% for x in xs %}{% set ns.total = ns.total + x %}{% set ns.names = ns.names + [x] %}{% endfor %}{{ ns.total }} {{ ns.names }} {{ ns.missing }}|",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }} {% set t2 = 1, 2 %}{{ t2 }} {% set block %}  inner {{ n }}\n{% endset %}[{{ block }}] {% set up | upper %}shout{% endset %}{{ up }}",
    "{% if n > 10 %}big{% elif n > 5 %}medium{% elif n > 0 %}small{% else %}none{% endif %}",
    "{% macro greet(name, greeting='Hello', punct='!') %}{{ greeting }}, {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', 'Hi') }} {{ greet('C', punct='?') }} {{ greet(name='D') }}",
    "{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}inside {{ n }}{% endcall %} {% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(v) each(xs) %}<{{ v }}>{% endcall %}",
    "{% macro fact(k) %}{% if k <= 1 %}1{% else %}{{ k * fact(k - 1)|int }}{% endif %}{% endmacro %}{{ fact(6) }} {% macro m(x) %}{{ x }}{% endmacro %}[{{ m() }}]",
    "{% filter upper %}loud {{ n }}{% endfilter %} {% filter trim %}   padded   {% endfilter %}|{% filter replace('a', 'o') | upper %}banana{% endfilter %}",
    "{% set x = 5 %}{% macro show() %}{{ x }}{% endmacro %}{% set x = 6 %}{{ show() }}",
    "{% for m in msgs %}{% if m.role == 'user' %}{% set last_user = m.content %}{% endif %}{% endfor %}[{{ last_user }}]",
    "{% generation %}gen {{ n }}{% endgeneration %}",
    "{{ strftime_now('%Y-%m-%d %d %b %Y %A %H:%M') }}",
    "{{ namespace(a=1).a }} {{ dict(a=1, b=2) }} {{ {'a': 1}['a'] }} {{ [1, 2, 3][1] }} {{ ('a', 'b')[0] }}",
    "{{ xs|select('in', [1, 3])|list }} {{ msgs|map(attribute='missing', default='?')|list }} {{ msgs|map(attribute='extra.1')|list }}",
    "{{ xs|map('string')|first }} {{ xs|reverse|first }} {{ xs|select('odd') is iterable }} {{ (xs|select('odd')) is sequence }}",
    "{% if empty|select('odd') %}generator is true{% endif %} {% if d.items() %}items true{% endif %} {% if {}.items() %}never{% endif %}",
    "{{ (xs|map('string'))|tojson }}",
    "{{ d.items() }} {{ d.keys() }}",
    # errors jinja2 raises while rendering
    "{{ raise_exception('custom failure: ' ~ n) }}",
    "{{ undefined_thing.attr }}",
    "{{ undefined_thing + 1 }}",
    "{{ 'a' + 1 }}",
    "{{ 1 / 0 }}",
    "{{ 5 // 0 }}",
    "{{ none.attr.deeper }}",
    "{{ xs.append(4) }}",
    "{{ d.update({'x': 1}) }}",
    "{{ 'a' < 1 }}",
    "{% for x in 5 %}{% endfor %}",
    "{% set ns2 = 1 %}{% set ns2.x = 1 %}",
    "{{ xs|length + undefined_thing|length }}{{ n|length }}",
    "{{ undefined_thing|tojson }}",
    "{{ range(10**6)|length }}",
    "{{ fun() }}",
    "{{ 'abc'.nosuchmethod() }}",
    "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}",
    "{{ xs|map('upper')|list }}",
    "{{ (xs|select('odd'))|length }}",
    "{{ (xs|select('odd'))[0] }}|",
    "{{ d.items()[0] }}|",
]


def render_snippet(env, source):
    try:
        return {"output": env.from_string(source).render(**SNIPPET_CONTEXT)}
    except RaisedByTemplate as e:
        return {"error": str(e), "error_kind": "raise_exception"}
    except Exception as e:
        return {"error": str(e), "error_kind": type(e).__name__}


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
        "snippet_context": SNIPPET_CONTEXT,
        "snippets": [dict(template=source, **render_snippet(env, source)) for source in SNIPPETS],
    }
    with open(os.path.join(FOLDER, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(fixture, f, ensure_ascii=False, indent=1)
        f.write("\n")
    errors = sum(1 for c in cases if "error" in c)
    print(f"{len(cases)} cases over {len(names)} templates ({errors} expected errors), {len(SNIPPETS)} snippets", file=sys.stderr)


if __name__ == "__main__":
    main()
