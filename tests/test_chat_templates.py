"""Chat-template conformance: pagellm's C++ Jinja engine against Python's jinja2.

Every chat template (the real ones in ../shared/tokenizers/*/tokenizer_config.json plus the
fixtures in tests/chat_templates/) is rendered with every message set in
tests/chat_templates/message_sets.json, once by Python jinja2 configured exactly as
transformers' apply_chat_template configures it and once by our engine, and the outputs must
be byte-identical. Where Python raises through the template's raise_exception, our engine
must fail with the same message; where Python fails otherwise, ours must fail too. The engine
snippets in tests/chat_templates/snippets.json are compared the same way, without the chat
layer.

The C++ side runs through the gtest driver ChatTemplateConformance.RenderCasesFromFile in the
test_chat binary (found next to $PAGELLM_BINARY, or via $PAGELLM_TEST_CHAT).

Message normalization is vLLM's: content parts are joined with "\\n" for templates that use
string content (or kept as parts for templates that loop over content), null content becomes
empty, and tool-call arguments (JSON text in the OpenAI API) are parsed into objects.
"""

import datetime
import glob
import json
import os
import subprocess
import tempfile

import pytest

jinja2 = pytest.importorskip("jinja2")
from jinja2 import nodes  # noqa: E402
from jinja2.ext import Extension, loopcontrols  # noqa: E402
from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
FIXTURES = os.path.join(HERE, "chat_templates")


# --- the reference: transformers' template environment --------------------------------------


class RaisedByTemplate(jinja2.exceptions.TemplateError):
    """What the template's raise_exception() raises (transformers raises TemplateError)."""


class GenerationBlock(Extension):
    """transformers' {% generation %} tag; outside assistant-mask mode it renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise RaisedByTemplate(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlock, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


ENV = make_env()


def loops_over_content(template):
    """vLLM's content-format detection: does the template iterate over a message's content?"""
    ast = ENV.parse(template)

    def unwrap(node):
        while isinstance(node, (nodes.Filter, nodes.Test)) or (
                isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Slice)):
            node = node.node
        return node

    def is_content(node):
        node = unwrap(node)
        if isinstance(node, nodes.Getattr):
            return node.attr == "content"
        if isinstance(node, nodes.Getitem):
            return isinstance(node.arg, nodes.Const) and node.arg.value == "content"
        return False

    content_vars = {a.target.name for a in ast.find_all(nodes.Assign)
                    if isinstance(a.target, nodes.Name) and is_content(a.node)}
    for loop in ast.find_all(nodes.For):
        it = unwrap(loop.iter)
        if is_content(it) or (isinstance(it, nodes.Name) and it.name in content_vars):
            return True
    return False


def normalize_messages(messages, openai_format):
    out = []
    for m in messages:
        content = m.get("content")
        parts = []
        if isinstance(content, str):
            if not openai_format:
                parts = None
            else:
                parts = [{"type": "text", "text": content}]
        elif isinstance(content, list):
            for p in content:
                if isinstance(p, str):
                    parts.append({"type": "text", "text": p})
                elif p.get("type", "text") == "text" and "text" in p:
                    parts.append({"type": "text", "text": p["text"]})
                elif openai_format:
                    parts.append(p)
        if parts is None:
            new_content = content
        elif openai_format:
            new_content = parts
        else:
            new_content = "\n".join(p["text"] for p in parts)
        n = {"role": m["role"], "content": new_content}
        for k, v in m.items():
            if k not in ("role", "content"):
                n[k] = json.loads(json.dumps(v))
        if m["role"] == "assistant" and isinstance(n.get("tool_calls"), list):
            for call in n["tool_calls"]:
                fn = call.get("function")
                if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                    fn["arguments"] = json.loads(fn["arguments"])
        out.append(n)
    return out


def cut_after_final_message(rendered, final_content):
    """transformers' continue_final_message post-processing."""
    final_message = final_content
    if isinstance(final_message, list):
        final_message = next(p["text"] for p in reversed(final_message) if "text" in p)
    if final_message.strip() not in rendered:
        raise ValueError("continue_final_message: final message not found in the output")
    loc = rendered.rindex(final_message.strip())
    if rendered[loc:loc + len(final_message.lstrip())] == final_message:
        return rendered[:loc + len(final_message.lstrip())]
    return rendered[:loc + len(final_message.strip())]


def reference_chat(template, messages, options):
    """Renders as vLLM + transformers would; returns ("ok", text) or ("error", kind, message)."""
    openai_format = loops_over_content(template)
    msgs = normalize_messages(messages, openai_format)
    ctx = {k: options[k] for k in ("bos_token", "eos_token", "unk_token", "pad_token")
           if k in options}
    ctx.update(messages=msgs, tools=options.get("tools"), documents=options.get("documents"),
               add_generation_prompt=bool(options.get("add_generation_prompt", False)))
    ctx.update(options.get("chat_template_kwargs") or {})
    try:
        out = ENV.from_string(template).render(**ctx)
        if options.get("continue_final_message"):
            out = cut_after_final_message(out, msgs[-1]["content"])
        return ("ok", out)
    except RaisedByTemplate as e:
        return ("error", "raised", str(e))
    except Exception as e:  # noqa: BLE001 - any Python failure must be a C++ failure too
        return ("error", type(e).__name__, str(e))


def reference_raw(template, context):
    # A fresh copy each time: some filters mutate their input in place in Python
    # (list|indent appends to the list), which must not leak into the next snippet.
    context = json.loads(json.dumps(context))
    try:
        return ("ok", ENV.from_string(template).render(**context))
    except RaisedByTemplate as e:
        return ("error", "raised", str(e))
    except Exception as e:  # noqa: BLE001
        return ("error", type(e).__name__, str(e))


# --- cases ------------------------------------------------------------------------------------


def shared_dir():
    path = os.environ.get("PAGELLM_SHARED_DIR") or os.path.join(os.path.dirname(REPO_ROOT),
                                                                "shared")
    return path if os.path.isdir(path) else None


def load_templates():
    """name -> (source, special tokens)."""
    templates = {}
    shared = shared_dir()
    if shared:
        for path in sorted(glob.glob(os.path.join(shared, "tokenizers", "*",
                                                  "tokenizer_config.json"))):
            with open(path, encoding="utf-8") as f:
                config = json.load(f)
            source = config.get("chat_template")
            if isinstance(source, list):
                source = next((t["template"] for t in source if t.get("name") == "default"), None)
            if not isinstance(source, str):
                continue
            tokens = {}
            for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
                value = config.get(key)
                if isinstance(value, dict):
                    value = value.get("content")
                if isinstance(value, str):
                    tokens[key] = value
            templates["real_" + os.path.basename(os.path.dirname(path))] = (source, tokens)
    with open(os.path.join(FIXTURES, "templates.json"), encoding="utf-8") as f:
        index = json.load(f)
    for name, entry in index.items():
        if name.startswith("_"):
            continue
        with open(os.path.join(FIXTURES, entry["file"]), encoding="utf-8") as f:
            templates[name] = (f.read(), entry.get("special_tokens", {}))
    return templates


def load_message_sets():
    with open(os.path.join(FIXTURES, "message_sets.json"), encoding="utf-8") as f:
        return json.load(f)


def load_snippets():
    with open(os.path.join(FIXTURES, "snippets.json"), encoding="utf-8") as f:
        data = json.load(f)
    return data["context"], data["snippets"]


TEMPLATES = load_templates()
MESSAGE_SETS = load_message_sets()
SNIPPET_CONTEXT, SNIPPETS = load_snippets()
CHAT_IDS = [f"{t}:{m['name']}" for t in TEMPLATES for m in MESSAGE_SETS]
SNIPPET_IDS = [f"snippet{i:03d}" for i in range(len(SNIPPETS))]


def build_cases():
    cases, expected = [], {}
    for t_name, (source, tokens) in TEMPLATES.items():
        for mset in MESSAGE_SETS:
            case_id = f"{t_name}:{mset['name']}"
            options = dict(tokens)
            options.update(mset["options"])
            cases.append({"id": case_id, "mode": "chat", "template": source,
                          "messages": mset["messages"], "options": options})
            expected[case_id] = reference_chat(source, mset["messages"], options)
    for case_id, source in zip(SNIPPET_IDS, SNIPPETS):
        cases.append({"id": case_id, "mode": "raw", "template": source,
                      "context": SNIPPET_CONTEXT})
        expected[case_id] = reference_raw(source, SNIPPET_CONTEXT)
    return cases, expected


def find_driver():
    explicit = os.environ.get("PAGELLM_TEST_CHAT")
    candidates = [explicit] if explicit else []
    binary = os.environ.get("PAGELLM_BINARY")
    if binary:
        candidates.append(os.path.join(os.path.dirname(binary), "test_chat"))
    candidates.append(os.path.join(REPO_ROOT, "build", "test_chat"))
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


@pytest.fixture(scope="module")
def outcomes():
    driver = find_driver()
    if driver is None:
        pytest.skip("test_chat driver not built (set PAGELLM_TEST_CHAT or PAGELLM_BINARY)")
    cases, expected = build_cases()
    with tempfile.TemporaryDirectory() as tmp:
        cases_path = os.path.join(tmp, "cases.json")
        results_path = os.path.join(tmp, "results.json")
        with open(cases_path, "w", encoding="utf-8") as f:
            json.dump(cases, f, ensure_ascii=False)
        env = dict(os.environ, PAGELLM_CHAT_CASES=cases_path, PAGELLM_CHAT_RESULTS=results_path)
        proc = subprocess.run(
            [driver, "--gtest_filter=ChatTemplateConformance.RenderCasesFromFile"],
            env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
        with open(results_path, encoding="utf-8") as f:
            actual = {r["id"]: r for r in json.load(f)}
    return expected, actual


def check(outcomes, case_id):
    expected, actual = outcomes
    want, got = expected[case_id], actual[case_id]
    if want[0] == "ok":
        assert got["ok"], f"Python rendered, C++ failed: {got.get('error')}"
        assert got["output"] == want[1]
    elif want[1] == "raised":
        assert not got["ok"], f"Python raised {want[2]!r}, C++ rendered {got.get('output')!r}"
        assert got["error"] == want[2]
    else:
        assert not got["ok"], (f"Python failed ({want[1]}: {want[2]}), "
                               f"C++ rendered {got.get('output')!r}")


def test_enough_real_and_fixture_templates():
    assert len(TEMPLATES) >= 8, sorted(TEMPLATES)
    if shared_dir():
        assert any(name.startswith("real_") for name in TEMPLATES)


@pytest.mark.parametrize("case_id", CHAT_IDS)
def test_chat_template(outcomes, case_id):
    check(outcomes, case_id)


@pytest.mark.parametrize("case_id", SNIPPET_IDS)
def test_engine_snippet(outcomes, case_id):
    check(outcomes, case_id)


def test_most_chat_cases_render(outcomes):
    """Guards the suite itself: most template x message-set pairs must render, not error."""
    expected, _ = outcomes
    rendered = sum(1 for case_id in CHAT_IDS if expected[case_id][0] == "ok")
    assert rendered >= len(CHAT_IDS) // 2, (rendered, len(CHAT_IDS))
