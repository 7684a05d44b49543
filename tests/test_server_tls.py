"""HTTPS: `pagellm serve --ssl-keyfile --ssl-certfile` with a self-signed certificate made by
`openssl req` here, exercised by the official `openai` npm client (tests/e2e) and by Python's
ssl module (a plain-HTTP request to the TLS port fails; a client that does not trust the
certificate is refused). Skips when node, the client or openssl is missing."""

import http.client
import os
import shutil
import ssl
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "e2e"))
from pagellm_server import MODEL_NAME, Server  # noqa: E402

E2E_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "e2e")


@pytest.fixture(scope="module")
def node():
    path = shutil.which("node")
    if path is None:
        pytest.skip("node is not installed")
    if not os.path.isfile(os.path.join(E2E_DIR, "node_modules", "openai", "package.json")):
        pytest.skip("the openai npm client is not installed (scripts/setup.sh)")
    return path


def make_certificate(directory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    key, cert = os.path.join(directory, "key.pem"), os.path.join(directory, "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return key, cert


class TlsServer(Server):
    def https(self, cert, path):
        ctx = ssl.create_default_context(cafile=cert)
        conn = http.client.HTTPSConnection(self.host, self.port, context=ctx, timeout=30)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def wait_tls(self, cert, timeout=60):
        import time
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(self.read_log())
            try:
                if self.https(cert, "/health")[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(self.read_log())


def test_https_with_openai_node_client(node, pagellm_binary, shared_dir, scratch_dir):
    key, cert = make_certificate(scratch_dir)
    env = {k: v for k, v in os.environ.items() if k not in ("PAGELLM_API_KEY", "VLLM_API_KEY")}
    env["VLLM_API_KEY"] = "tls-key"
    s = TlsServer(pagellm_binary, shared_dir, ["--ssl-keyfile", key, "--ssl-certfile", cert],
                  env=env, log_dir=scratch_dir).wait_tls(cert)
    try:
        # Plain HTTP to the TLS port gets no HTTP answer.
        with pytest.raises((OSError, http.client.HTTPException)):
            s.request("GET", "/health", timeout=5)
        # A client that does not trust the self-signed certificate is refused.
        with pytest.raises(ssl.SSLError):
            conn = http.client.HTTPSConnection(s.host, s.port, timeout=5,
                                               context=ssl.create_default_context())
            conn.request("GET", "/health")
        node_env = dict(os.environ, NODE_EXTRA_CA_CERTS=cert)
        proc = subprocess.run(
            [node, os.path.join(E2E_DIR, "openai_tls.test.mjs"), f"https://127.0.0.1:{s.port}",
             MODEL_NAME, "tls-key"], capture_output=True, text=True, timeout=120, env=node_env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "ok - https" in proc.stdout
    finally:
        assert s.stop() == 0
