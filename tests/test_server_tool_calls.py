"""Tool calling end to end through the official `openai` npm client (tests/e2e/
openai_tools.test.mjs): tool_choice "required" and a named function, streamed and not, return
tool_calls whose arguments validate (python3-jsonschema) against the tool's parameters schema;
"auto" is a 400 without --enable-auto-tool-choice and well-formed with it. The tiny stories
model is random as far as tools go: the grammar alone makes its calls valid.

Skips when node or the client (scripts/setup.sh runs `npm install` in tests/e2e) is missing.
"""

import json
import os
import subprocess
import sys

import pytest

jsonschema = pytest.importorskip("jsonschema")

E2E_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "e2e")
sys.path.insert(0, E2E_DIR)
from pagellm_server import MODEL_NAME, Server  # noqa: E402

# The parameters schemas of tests/e2e/openai_tools.test.mjs's TOOLS, written out again.
SCHEMAS = {
    "get_weather": {
        "type": "object",
        "properties": {"city": {"type": "string", "enum": ["Paris", "Tokyo", "Lima"]},
                       "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False},
    "add": {
        "type": "object",
        "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99},
                       "b": {"type": "integer", "minimum": 0, "maximum": 99},
                       "exact": {"type": "boolean"}},
        "required": ["a", "b", "exact"], "additionalProperties": False},
}


@pytest.mark.parametrize("auto", [False, True], ids=["no-auto", "auto-hermes"])
def test_tool_calls_openai_node_client(node, pagellm_binary, shared_dir, scratch_dir, auto):
    extra = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"] if auto else []
    server = Server(pagellm_binary, shared_dir, extra_args=extra, log_dir=scratch_dir).wait_ready()
    try:
        proc = subprocess.run(
            [node, os.path.join(E2E_DIR, "openai_tools.test.mjs"), server.base_url, MODEL_NAME,
             "1" if auto else "0"],
            cwd=E2E_DIR, capture_output=True, text=True, timeout=600)
        print(proc.stdout)
        assert proc.returncode == 0, proc.stdout + proc.stderr + "\n--- server log ---\n" + \
            server.read_log()[-5000:]
        results = [json.loads(line[len("RESULT "):]) for line in proc.stdout.splitlines()
                   if line.startswith("RESULT ")]
        assert len(results) >= 12
        for r in results:
            args = json.loads(r["arguments"])
            errors = [e.message for e in
                      jsonschema.Draft202012Validator(SCHEMAS[r["tool"]]).iter_errors(args)]
            assert not errors, f"{r}: {errors}"
    finally:
        assert server.stop() == 0
