"""docs/VLLM_COMPATIBILITY.md stays true: every flag of its table is in `pagellm serve --help`;
the flags marked ~ (no effect here) start the server together, each with its start-up note; the
flags marked ✘ fail start-up with "not supported by this engine"."""

import os
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "e2e"))
from pagellm_server import Server  # noqa: E402

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                   "VLLM_COMPATIBILITY.md")
# ~ flags whose effect depends on the value (checked in test_vllm_cli_compat.py and
# test_server_vllm_frontend.py): their default-like values print nothing.
VALUE_DEPENDENT = {"--revision", "--dtype", "--quantization", "--tensor-parallel-size",
                   "--pipeline-parallel-size", "--trust-remote-code", "--download-dir",
                   "--enforce-eager"}


def flag_rows():
    """(names in the first cell, status, explanation) of the Flags table."""
    text = open(DOC, encoding="utf-8").read()
    section = text.split("## Flags", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[1] not in ("✔", "~", "✘"):
            continue
        names = re.findall(r"`(-{1,2}[A-Za-z0-9][A-Za-z0-9_-]*)`", cells[0])
        if names:
            rows.append((names, cells[1], cells[2]))
    return rows


@pytest.fixture(scope="module")
def help_text(pagellm_binary):
    p = subprocess.run([pagellm_binary, "serve", "--help"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout


def takes_value(help_text, flag):
    m = re.search(r"(?m)^\s+(?:-\w+,\s*)?" + re.escape(flag) + r"(?:,\s*\S+)*\s+(\S+)", help_text)
    return bool(m) and re.match(r"(TEXT|INT|UINT|FLOAT|ENUM)", m.group(1)) is not None


def test_table_is_complete():
    rows = flag_rows()
    assert len(rows) > 180
    names = [n for r in rows for n in r[0]]
    assert len(names) == len(set(names)), "a flag is listed twice"
    for must in ("--tokenizer", "--config", "--allowed-origins", "--ssl-certfile",
                 "--compilation-config", "--cudagraph-capture-sizes", "--enable-lora"):
        assert must in names


def test_every_flag_is_in_help(help_text):
    for names, status, _ in flag_rows():
        for name in names:
            if name in ("-tp", "-pp", "-dp", "-asc"):  # spelled out by main.cc
                continue
            assert re.search(r"(?<![\w-])" + re.escape(name) + r"(?![\w-])", help_text), name


def test_no_effect_flags_start_with_their_notes(pagellm_binary, shared_dir, scratch_dir,
                                                help_text):
    args, flags = [], []
    for names, status, why in flag_rows():
        flag = names[0]
        if status != "~" or why.startswith("only") or flag in VALUE_DEPENDENT:
            continue
        flags.append(flag)
        args.append(flag)
        if takes_value(help_text, flag):
            args.append("1")
    assert len(flags) > 100
    s = Server(pagellm_binary, shared_dir, args, log_dir=scratch_dir).wait_ready()
    try:
        assert s.post("/v1/completions", {"prompt": "Once", "max_tokens": 2})[0] == 200
    finally:
        assert s.stop() == 0
    log = open(s.log_path).read()
    for flag in flags:
        assert re.search(re.escape(flag) + r"( \S+)? has no effect on this engine: ", log), flag
        assert log.count(flag + " has no effect") + log.count(flag + " 1 has no effect") == 1


def test_unsupported_flags_fail_start_up(pagellm_binary, shared_dir, help_text):
    model = os.path.join(shared_dir, "models", "stories260K")
    failing = [names[0] for names, status, _ in flag_rows() if status == "✘"]
    assert len(failing) >= 10
    for flag in failing:
        args = [flag] + (["1"] if takes_value(help_text, flag) else [])
        p = subprocess.run([pagellm_binary, "serve", model, "--port", "0"] + args,
                           capture_output=True, text=True, timeout=30)
        assert p.returncode != 0, flag
        assert "not supported by this engine" in p.stderr, (flag, p.stderr)
