"""The article's first command line, word for word with `vllm` replaced by `pagellm`:

    pagellm serve M --tensor-parallel-size 4 --gpu-memory-utilization 0.90 --max-model-len 8192
        --block-size 16 --swap-space 4 --max-num-seqs 256

starts four ranks (mpirun, oversubscribed on this small machine) on a model whose head counts
divide by 4 (stories260K: 8 query heads, 4 KV heads) and answers the official `openai` npm
client (tests/e2e/openai_client.test.mjs: completions, chat, streaming, seeds, errors; it
expects that trained model's text). stories260K has 512 positions, so --max-model-len 8192
needs vLLM's own override, VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, as it would under vLLM.
Skips without node / the npm client, or without ../shared.
"""

import os
import signal
import subprocess
import sys
import tempfile

import pytest

E2E_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "e2e")
sys.path.insert(0, E2E_DIR)
from pagellm_server import CHAT_TEMPLATE, MODEL_NAME, free_port, model_dir  # noqa: E402

ARTICLE_FLAGS = ["--tensor-parallel-size", "4", "--gpu-memory-utilization", "0.90",
                 "--max-model-len", "8192", "--block-size", "16", "--swap-space", "4",
                 "--max-num-seqs", "256"]


def test_article_command_tp4_answers_openai_client(node, pagellm_binary, shared_dir,
                                                   scratch_dir):
    import urllib.request
    import time

    port = free_port()
    fd, template = tempfile.mkstemp(suffix=".jinja", dir=scratch_dir)
    with os.fdopen(fd, "w") as f:
        f.write(CHAT_TEMPLATE)
    log_path = os.path.join(scratch_dir, "article-tp4.log")
    log = open(log_path, "w")
    args = [pagellm_binary, "serve", model_dir(shared_dir)] + ARTICLE_FLAGS + [
        "--port", str(port), "--served-model-name", MODEL_NAME, "--chat-template", template,
        "--threads", "1", "--disable-log-requests"]
    env = dict(os.environ, VLLM_ALLOW_LONG_MAX_MODEL_LEN="1")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            assert proc.poll() is None, open(log_path).read()
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.time() < deadline, "not ready in 120 s:\n" + open(log_path).read()
            time.sleep(0.2)
        # The client's over-long prompt must exceed this server's 8192-token context.
        run = subprocess.run([node, os.path.join(E2E_DIR, "openai_client.test.mjs"), base,
                              MODEL_NAME, "8200"], cwd=E2E_DIR, capture_output=True, text=True,
                             timeout=600)
        print(run.stdout)
        text = open(log_path).read()
        assert run.returncode == 0, run.stdout + run.stderr + "\n--- server log ---\n" + \
            text[-5000:]
        # Four ranks, each with its share of the KV heads (4 KV heads / 4 ranks = 1).
        for rank in range(4):
            assert f"tensor-parallel rank {rank}/4" in text, text[-5000:]
        assert proc.poll() is None
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
    assert proc.returncode == 0, open(log_path).read()[-5000:]
