"""Starts `pagellm serve` on a free port and talks to it with the standard library only.

Used by tests/test_server_*.py. The server runs the tiny stories260K model from ../shared with a
small KV cache (so that many test servers fit in memory) and a ChatML-like chat template (the
model has none of its own).
"""

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time

# stories260K has no chat template; this one writes BOS and ChatML-style turns as text.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

MODEL_NAME = "stories"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def model_dir(shared_dir):
    return os.path.join(shared_dir, "models", "stories260K")


class Server:
    def __init__(self, binary, shared_dir, extra_args=(), env=None, log_dir=None, model=None,
                 kv_cache_memory="64MiB"):
        self.port = free_port()
        self.host = "127.0.0.1"
        fd, self.template_path = tempfile.mkstemp(suffix=".jinja", dir=log_dir)
        with os.fdopen(fd, "w") as f:
            f.write(CHAT_TEMPLATE)
        fd, self.log_path = tempfile.mkstemp(suffix=".log", prefix="pagellm-serve-", dir=log_dir)
        self.log = os.fdopen(fd, "w")
        args = [
            binary, "serve", model or model_dir(shared_dir),
            "--port", str(self.port),
            "--served-model-name", MODEL_NAME,
            "--chat-template", self.template_path,
            "--kv-cache-memory", kv_cache_memory,
            "--disable-log-requests",
        ] + list(extra_args)
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=env or os.environ.copy())

    def wait_ready(self, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.read_log()}")
            try:
                status, _, _ = self.request("GET", "/health", timeout=2)
                if status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"server not ready after {timeout}s:\n{self.read_log()}")

    def read_log(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    @property
    def base_url(self):
        return f"http://{self.host}:{self.port}"

    def connection(self, timeout=60):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=60):
        """Returns (status, headers dict, body bytes). `body`: dict/list (sent as JSON), str or
        bytes (sent as is)."""
        conn = self.connection(timeout)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body)
            if isinstance(body, str):
                body = body.encode("utf-8")
            hdrs = {"Content-Type": "application/json"}
            hdrs.update(headers or {})
            conn.request(method, path, body=body, headers=hdrs)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        finally:
            conn.close()

    def post(self, path, body, headers=None, timeout=60):
        status, _, data = self.request("POST", path, body, headers, timeout)
        return status, json.loads(data) if data else None

    def get_json(self, path, headers=None):
        status, _, data = self.request("GET", path, None, headers)
        return status, json.loads(data) if data else None

    def stream(self, path, body, timeout=60):
        """POSTs a streaming request; returns (status, list of parsed events, saw_done)."""
        conn = self.connection(timeout)
        try:
            conn.request("POST", path, body=json.dumps(body),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                return resp.status, [json.loads(resp.read())], False
            events, done = parse_sse(resp.read().decode("utf-8"))
            return resp.status, events, done
        finally:
            conn.close()

    def metrics(self):
        status, headers, data = self.request("GET", "/metrics")
        assert status == 200, data
        assert headers["content-type"].startswith("text/plain"), headers
        return parse_prometheus(data.decode("utf-8"))


def parse_sse(text):
    """Splits an SSE body into parsed JSON events; checks the framing on the way."""
    events, done = [], False
    for block in text.split("\n\n"):
        if not block:
            continue
        assert block.startswith("data: "), repr(block)
        payload = block[len("data: "):]
        assert not done, "event after [DONE]"
        if payload == "[DONE]":
            done = True
        else:
            events.append(json.loads(payload))
    return events, done


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


class Metrics:
    """Parsed Prometheus text: families (name -> type) and samples."""

    def __init__(self):
        self.types = {}
        self.helps = {}
        self.samples = []  # (name, labels dict, value)

    def get(self, name, **labels):
        """Sum of the samples named `name` whose labels include `labels`."""
        found = [v for n, l, v in self.samples
                 if n == name and all(l.get(k) == str(val) for k, val in labels.items())]
        if not found:
            raise KeyError(f"{name} {labels} not found")
        return sum(found)

    def names(self):
        return {n for n, _, _ in self.samples}


def parse_prometheus(text):
    """A strict parser of the text format: every line is a comment we know or a sample of a
    declared family; raises AssertionError on anything else."""
    m = Metrics()
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# HELP "):
            name, _, help_text = line[len("# HELP "):].partition(" ")
            m.helps[name] = help_text
            continue
        if line.startswith("# TYPE "):
            name, typ = line[len("# TYPE "):].split(" ")
            assert typ in ("counter", "gauge", "histogram", "summary", "untyped"), line
            assert name not in m.types, f"family {name} declared twice"
            m.types[name] = typ
            continue
        assert not line.startswith("#"), line
        match = _SAMPLE.match(line)
        assert match, f"bad sample line: {line!r}"
        name, _, label_text, value = match.groups()
        labels = {}
        if label_text:
            pos = 0
            while pos < len(label_text):
                lm = _LABEL.match(label_text, pos)
                assert lm, f"bad labels in {line!r}"
                labels[lm.group(1)] = lm.group(2)
                pos = lm.end()
        family = name
        for suffix in ("_bucket", "_count", "_sum"):
            if name.endswith(suffix) and name[: -len(suffix)] in m.types:
                family = name[: -len(suffix)]
        assert family in m.types, f"sample {name} has no # TYPE"
        m.samples.append((name, labels, float(value)))
    return m
