"""The package installs offline into a fresh virtual environment (pip, no index, no build
isolation) from the source tree and the CMake build, and its entry points run the binary:
the `pagellm` console script, and `python -m pagellm.entrypoints.openai.api_server --model M`
serving the OpenAI API as `pagellm serve M` does."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def venv(pagellm_module, scratch_dir):
    build_dir = os.path.dirname(os.environ["PAGELLM_PYTHONPATH"])
    path = os.path.join(scratch_dir, "venv")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", path], check=True,
                   timeout=300)
    # No network: no index, no build isolation (which would download setuptools), and a proxy
    # that does not exist in case anything still tries.
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9",
               PAGELLM_BUILD_DIR=build_dir)
    env.pop("PAGELLM_BINARY", None)
    subprocess.run([os.path.join(path, "bin", "pip"), "install", "--no-build-isolation",
                    "--no-index", "--no-deps", REPO_ROOT], check=True, env=env, timeout=600,
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return path


def clean_env():
    env = dict(os.environ)
    for key in ("PAGELLM_BINARY", "PYTHONPATH", "PAGELLM_PYTHONPATH"):
        env.pop(key, None)
    return env


def test_installed_package_imports_and_runs_from_anywhere(venv, tmp_path, shared_dir):
    python = os.path.join(venv, "bin", "python")
    model = os.path.join(shared_dir, "models", "stories260K")
    script = (
        "import pagellm, os, sys\n"
        "assert os.path.dirname(pagellm.__file__).startswith(sys.prefix), pagellm.__file__\n"
        "from pagellm import LLM, SamplingParams\n"
        f"llm = LLM(model={model!r})\n"
        "out = llm.generate(['Once upon a time'], SamplingParams(temperature=0, max_tokens=8))\n"
        "print(len(out[0].outputs[0].token_ids), pagellm.__version__)\n")
    result = subprocess.run([python, "-c", script], cwd=tmp_path, env=clean_env(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["8", "0.1.0"]  # engine logs go to stderr


def test_console_script_runs_the_binary(venv, tmp_path):
    script = os.path.join(venv, "bin", "pagellm")
    result = subprocess.run([script, "--help"], cwd=tmp_path, env=clean_env(),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "serve" in result.stdout and "generate" in result.stdout
    # The binary's own exit code comes back (an unknown subcommand is an error).
    result = subprocess.run([script, "no-such-command"], cwd=tmp_path, env=clean_env(),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, proc, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("server did not become ready")


def test_api_server_module_serves_like_pagellm_serve(venv, tmp_path, shared_dir):
    python = os.path.join(venv, "bin", "python")
    model = os.path.join(shared_dir, "models", "stories260K")
    port = free_port()
    proc = subprocess.Popen(
        [python, "-m", "pagellm.entrypoints.openai.api_server", "--model", model,
         "--host", "127.0.0.1", "--port", str(port), "--served-model-name", "stories"],
        cwd=tmp_path, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_ready(port, proc)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10) as r:
            models = json.load(r)
        assert [m["id"] for m in models["data"]] == ["stories"]
        body = json.dumps({"model": "stories", "prompt": "Once upon a time", "max_tokens": 5,
                           "temperature": 0}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as r:
            completion = json.load(r)
        assert completion["usage"]["completion_tokens"] == 5
        # The module replaced itself with the installed binary (no Python in between).
        exe = os.readlink(f"/proc/{proc.pid}/exe")
        assert exe == os.path.realpath(os.path.join(
            venv, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}",
            "site-packages", "pagellm", "bin", "pagellm"))
    finally:
        proc.terminate()
        proc.wait(timeout=60)
