"""Hostile connections for the chaos tests and bench/slow_client_probe.py: idle connections
that never send a byte, and slow ones that trickle a request head one byte at a time and
never finish it."""

import resource
import socket
import threading
import time

SLOW_HEAD = (b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n"
             b"Content-Type: application/json\r\nX-Trickle: ")


def raise_file_limit(needed):
    """Raises this process's open-file limit toward `needed`; returns what is allowed."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(soft, needed)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class Flood:
    """`idle` silent connections and `slow` trickling ones to host:port."""

    def __init__(self, host, port, idle, slow, trickle_interval=0.2):
        self.host, self.port = host, port
        self.idle, self.slow = [], []
        self.interval = trickle_interval
        self._stop = threading.Event()
        self._thread = None
        for _ in range(idle):
            self.idle.append(self._connect())
        for _ in range(slow):
            s = self._connect()
            s.sendall(SLOW_HEAD)
            self.slow.append(s)

    def _connect(self):
        s = socket.create_connection((self.host, self.port), timeout=10)
        s.setblocking(False)
        return s

    def start_trickling(self):
        def run():
            while not self._stop.wait(self.interval):
                for s in self.slow:
                    try:
                        s.send(b"a")
                    except OSError:
                        pass  # closed by the server (the head deadline): expected
        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        return self

    def closed_by_server(self, sockets):
        """How many of `sockets` the server has closed (EOF or reset, a 408 read first)."""
        closed = 0
        for s in sockets:
            try:
                while True:
                    data = s.recv(65536)
                    if not data:
                        closed += 1
                        break
            except BlockingIOError:
                continue
            except OSError:
                closed += 1
        return closed

    def close(self):
        self._stop.set()
        if self._thread:
            self._thread.join()
        for s in self.idle + self.slow:
            s.close()


def timed_completion(host, port, body, timeout=30):
    """One completion on a fresh connection; returns (status, seconds)."""
    import http.client
    import json
    start = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("POST", "/v1/completions", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        return resp.status, time.perf_counter() - start
    finally:
        conn.close()
