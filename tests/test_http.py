"""The shared HTTP reader against real misbehaving servers on 127.0.0.1: each one a one-line
error within the deadline, through `http.get`, the coordinator and Prometheus sources and the CLI."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading

import pytest

from zephyr_debug.errors import ZdebugError
from zephyr_debug.sources import http, live, prometheus

DEADLINE_S = 0.5  # a hang past it is cut off by pytest-timeout; the error's text says which limit ended the read
HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"


def _drip(conn, stop):  # headers, then one byte every second: no single read waits long
    conn.sendall(HEADERS + b"Content-Length: 1000\r\n\r\n")
    while not stop.wait(1.0):
        conn.sendall(b" ")


def _stall(conn, stop):  # headers, then nothing
    conn.sendall(HEADERS + b"Content-Length: 1000\r\n\r\n")
    stop.wait(60)


def _endless(conn, stop):  # a chunked body that never ends, as fast as the reader takes it
    conn.sendall(HEADERS + b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n%s\r\n" % (1 << 16, b"x" * (1 << 16))
    while not stop.is_set():
        conn.sendall(chunk)


def _slow_chunks(conn, stop):  # a chunked body, one small chunk every half second, forever
    conn.sendall(HEADERS + b"Transfer-Encoding: chunked\r\n\r\n")
    while not stop.wait(0.5):
        conn.sendall(b"1\r\n \r\n")


def _mid_body(conn, stop):  # promises 1000 bytes, sends 10, closes
    conn.sendall(HEADERS + b"Content-Length: 1000\r\n\r\n" + b'{"stage": ')


def _silent(conn, stop):  # reads the request, never answers
    stop.wait(60)


def _ok(conn, stop):
    body = b'{"status": "success", "data": {"result": []}}'
    conn.sendall(HEADERS + b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


SCENARIOS = {
    "drip": _drip,
    "stall": _stall,
    "endless": _endless,
    "slow-chunks": _slow_chunks,
    "mid-body": _mid_body,
    "silent": _silent,
    "ok": _ok,
}
SLOW = ("drip", "stall", "slow-chunks", "silent")  # cut off by the deadline


class Server:
    """A real TCP server on 127.0.0.1 answering every connection with one scenario."""

    def __init__(self, scenario):
        self.scenario, self.stop = scenario, threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        with conn:
            try:
                conn.recv(65536)  # the request
                self.scenario(conn, self.stop)
            except OSError:  # the client hung up: expected
                pass

    def close(self):
        self.stop.set()
        self.sock.close()


@pytest.fixture(scope="module")
def servers():
    running = {name: Server(fn) for name, fn in SCENARIOS.items()}
    yield {name: s.url for name, s in running.items()}
    for s in running.values():
        s.close()


def _error(fn, *args, **kwargs) -> str:
    with pytest.raises(ZdebugError) as info:
        fn(*args, **kwargs)
    return str(info.value)


@pytest.mark.parametrize("name", SLOW)
def test_a_slow_server_is_cut_off_at_the_deadline(servers, name):
    message = _error(http.get, servers[name] + "/status", timeout=DEADLINE_S)
    assert f"did not answer within {DEADLINE_S:g}s" in message and "\n" not in message


def test_an_endless_body_stops_at_the_size_limit(servers):
    message = _error(http.get, servers["endless"], timeout=30, max_bytes=1 << 20)
    assert "over the limit of 1,048,576 bytes" in message  # the size limit, not the 30 s deadline, ended it


def test_a_server_closing_mid_body_is_named(servers):
    message = _error(http.get, servers["mid-body"], timeout=30)
    assert "closed the connection mid-answer after 10 bytes" in message


def test_a_refused_connection_and_a_good_answer():
    free = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{free.getsockname()[1]}"
    free.close()
    message = _error(http.get, url, what="coordinator")
    assert message == f"{url}: coordinator unreachable (connection refused or no such host)"


@pytest.mark.slow
def test_every_network_source_uses_the_deadline(servers):
    """The coordinator and Prometheus sources, with the process-wide default set as --timeout does."""
    before = http.timeout()
    http.set_timeout(DEADLINE_S)
    try:
        for fn, arg in (
            (live.fetch, (servers["drip"], "/status")),
            (prometheus.Client(servers["stall"]).query, ("up",)),
        ):
            message = _error(fn, *arg)
            assert f"did not answer within {DEADLINE_S:g}s" in message, message
        assert prometheus.Client(servers["ok"]).query("up") == []
    finally:
        http.set_timeout(before)


@pytest.mark.parametrize("seconds", [0, -1])
def test_the_timeout_must_be_positive(seconds):
    with pytest.raises(ZdebugError, match="positive"):
        http.set_timeout(seconds)


@pytest.mark.slow
def test_the_cli_reports_each_bad_server_in_one_line_within_the_deadline(servers, tmp_path):
    """`zdebug status URL --timeout 2` for every scenario (run side by side: one deadline in all)."""
    targets = {name: servers[name] for name in (*SLOW, "endless", "mid-body")}
    targets["prometheus-drip"] = "prometheus+" + servers["drip"] + "?run=r1"
    env = {**os.environ, "ZDEBUG_HOME": str(tmp_path)}
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "zephyr_debug.cli", "status", url, "--timeout", "2"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name, url in targets.items()
    }
    results = {name: proc.communicate(timeout=120) + (proc.returncode,) for name, proc in procs.items()}
    for name, (out, err, code) in results.items():
        assert code != 0 and out == "", (name, out, err)
        assert err.count("\n") == 1 and err.startswith("zdebug: error: ") and "Traceback" not in err, (name, err)
    for name in (*SLOW, "prometheus-drip"):
        assert "did not answer within 2s" in results[name][1], (name, results[name][1])
    assert "closed the connection mid-answer" in results["mid-body"][1]  # communicate's timeout: no hang


def test_a_bad_prometheus_answer_is_evidence_exit_3(servers, tmp_path):
    """A Prometheus that answers, but with no Zephyr run: unreadable evidence (3), not usage (2)."""
    proc = subprocess.run(
        [sys.executable, "-m", "zephyr_debug.cli", "status", "prometheus+" + servers["ok"]],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ZDEBUG_HOME": str(tmp_path)},
    )
    assert proc.returncode == 3 and "no Zephyr run" in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
