"""Drives `pagellm serve` with the official `openai` npm client (tests/e2e/*.test.mjs).

Skips when node or the client (scripts/setup.sh runs `npm install` in tests/e2e) is missing.
"""

import os
import subprocess
import sys

import pytest

E2E_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "e2e")
sys.path.insert(0, E2E_DIR)
from pagellm_server import MODEL_NAME, Server  # noqa: E402


def test_openai_node_client(node, pagellm_binary, shared_dir, scratch_dir):
    server = Server(pagellm_binary, shared_dir, log_dir=scratch_dir).wait_ready()
    try:
        proc = subprocess.run(
            [node, os.path.join(E2E_DIR, "openai_client.test.mjs"), server.base_url, MODEL_NAME],
            cwd=E2E_DIR, capture_output=True, text=True, timeout=300)
        print(proc.stdout)
        assert proc.returncode == 0, proc.stdout + proc.stderr + "\n--- server log ---\n" + \
            server.read_log()[-5000:]
        assert server.proc.poll() is None
    finally:
        assert server.stop() == 0
