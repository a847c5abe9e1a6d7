#!/usr/bin/env python3
"""Renders the tool conversations of tools_cases.json with the Qwen chat
templates through jinja2, set up as transformers' apply_chat_template sets
it up (trim_blocks, lstrip_blocks, tojson with ensure_ascii=False), and
writes tools_golden.json for chat's TestToolsAgainstJinja.

    python3 format/chat/testdata/gen_tools.py   # needs only jinja2

Qwen3's template is the one in the shared tiny-a model's
tokenizer_config.json, Qwen3.5's the one in tiny-q35's; Qwen3.6's is
Qwen3.5's with the two lines it changes (preserve_thinking, and argument
values other than strings through tojson); Qwen2.5's is below;
Qwen3-Coder's is qwen3coder.jinja, the copy of Qwen3-Coder-30B-A3B-
Instruct's that vLLM keeps as examples/tool_chat_template_qwen3coder.jinja. Tool-call
arguments given as a string are passed to Qwen3's template as the string
(it prints strings verbatim) and parsed to an object for the others
(which print them through tojson, or iterate their items), as vLLM and
llama-server do. A rendering the template refuses (raise_exception) is
left out.
"""
import json, os, sys
import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))

QWEN25 = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"""


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


class TemplateError(Exception):
    pass


def raise_exception(message):
    raise TemplateError(message)


def env():
    e = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    e.filters["tojson"] = tojson
    e.globals["raise_exception"] = raise_exception
    return e


def shared_template(model):
    shared = os.path.join(HERE, "..", "..", "..", "..", "shared", "reference", model, "tokenizer_config.json")
    with open(shared) as f:
        return json.load(f)["chat_template"]


# The two lines Qwen3.6 changes in Qwen3.5's template.
QWEN36_CHANGES = [
    ("{%- if loop.index0 > ns.last_query_index %}",
     "{%- if (preserve_thinking is defined and preserve_thinking is true) or (loop.index0 > ns.last_query_index) %}"),
    ("{%- set args_value = args_value | tojson | safe if args_value is mapping or (args_value is sequence and args_value is not string) else args_value | string %}",
     "{%- set args_value = args_value | string if args_value is string else args_value | tojson | safe %}"),
]


def qwen36_template(qwen35):
    for old, new in QWEN36_CHANGES:
        assert qwen35.count(old) == 1, old
        qwen35 = qwen35.replace(old, new)
    return qwen35


def main():
    with open(os.path.join(HERE, "tools_cases.json")) as f:
        cases = json.load(f)
    qwen35 = shared_template("tiny-q35")
    templates = {"qwen3": env().from_string(shared_template("tiny-a")), "qwen2.5": env().from_string(QWEN25),
                 "qwen3.5": env().from_string(qwen35), "qwen3.6": env().from_string(qwen36_template(qwen35))}
    with open(os.path.join(HERE, "qwen3coder.jinja")) as f:
        templates["qwen3-coder"] = env().from_string(f.read())
    # The Qwen3.6 template made here renders the reference's cases as
    # Hugging Face did.
    with open(os.path.join(HERE, "qwen35", "chat_cases.json")) as f:
        for c in json.load(f):
            msgs = json.loads(json.dumps(c["messages"]))
            for m in msgs:
                for tc in m.get("tool_calls", []):
                    tc["function"]["arguments"] = json.loads(tc["function"]["arguments"])
            kw = {k: c[k] for k in ("enable_thinking", "preserve_thinking") if c.get(k) is not None}
            text = templates[c["template"]].render(messages=msgs, tools=c["tools"], add_generation_prompt=c["add_generation_prompt"], **kw)
            assert text == c["rendered"], c["name"]
    out = []
    for c in cases:
        for fam, tmpl in templates.items():
            msgs = json.loads(json.dumps(c["messages"]))
            for m in msgs:
                m.setdefault("content", "")
                if m.get("content") is None:
                    m["content"] = ""
                for tc in m.get("tool_calls", []):
                    fn = tc["function"]
                    if fam != "qwen3" and isinstance(fn["arguments"], str):
                        fn["arguments"] = json.loads(fn["arguments"])
            for gen, think, preserve in [(True, True, False), (True, False, False), (False, True, False), (True, True, True)]:
                if fam == "qwen2.5" and not think or fam != "qwen3.6" and preserve:
                    continue
                kw = {"add_generation_prompt": gen}
                if not think:
                    kw["enable_thinking"] = False
                if preserve:
                    kw["preserve_thinking"] = True
                try:
                    text = tmpl.render(messages=msgs, tools=c.get("tools"), **kw)
                except TemplateError:
                    continue
                r = {"case": c["name"], "family": fam, "generation_prompt": gen, "thinking": think, "text": text}
                if preserve:
                    r["preserve_thinking"] = True
                out.append(r)
    texts = ['{"b": 1, "a": [1.0, 2.5e-7, 1e16, 1e15, 0.0001, 0.00001, -0.0, -0, 12345678901234567890123, 1E400, -1e400, 3.14159265358979323846]}',
             '{"k": "\\u00e9\\u4e2d <>&\\\\ \\" \\/ \\b\\f\\n\\r\\t \\u0001\\u001f\\u007f \\ud83d\\ude80"}',
             '{"dup": 1, "x": 2, "dup": 3}', '[]', '{}', '[{}, [], "", null, true, false]',
             '  {"spaced" :  [ 1 , 2 ]  }  ', '1.5', '100', '1e2', '-1.0E-10', '123456789.123456789']
    tojson_out = [{"in": t, "out": tojson(json.loads(t))} for t in texts]
    with open(os.path.join(HERE, "tojson_golden.json"), "w") as f:
        json.dump(tojson_out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    with open(os.path.join(HERE, "tools_golden.json"), "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{len(out)} renderings", file=sys.stderr)


main()
