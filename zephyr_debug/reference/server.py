"""HTTP JSON API of the reference coordinator, plus Prometheus `/metrics`.

Workers POST to /register, /pull_task, /report_result, /report_error, /heartbeat.
Readers GET /status (JobStatus), /counters, /workers, /job and /metrics.
Binds 127.0.0.1 on a free port unless told otherwise.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from zephyr_debug.errors import ZdebugError
from zephyr_debug.reference.coordinator import Coordinator
from zephyr_debug.reference.metrics import CoordinatorCollector

LOOPBACK = "127.0.0.1"


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up (a worker killed mid-request) is routine here, not a traceback."""

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class CoordinatorServer:
    """Serves one Coordinator until `close()`."""

    def __init__(self, coordinator: Coordinator, job_info: dict[str, Any], host: str = LOOPBACK, port: int = 0):
        if host not in (LOOPBACK, "localhost", "::1"):
            print(f"warning: coordinator listening on {host}, reachable from other machines", file=sys.stderr)
        self.coordinator = coordinator
        self.job_info = job_info
        registry = CollectorRegistry()
        registry.register(CoordinatorCollector(coordinator))
        self.registry = registry
        try:
            self.httpd = _QuietServer((host, port), _handler(self))
        except OSError as exc:
            raise ZdebugError(f"{host}:{port}: coordinator cannot listen ({exc.strerror or exc})") from None
        self.httpd.daemon_threads = True
        self.closed = False
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="coordinator-http", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.closed = True  # keep-alive connections outlive the listener: refuse on them too
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- routes ------------------------------------------------------------------------
    def get(self, path: str) -> tuple[int, str, bytes]:
        c = self.coordinator
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)
        routes = {
            "/status": lambda: {"execution_id": c.execution_id, **c.get_status().to_dict()},
            "/counters": c.get_counters,
            "/workers": c.worker_details,
            "/job": lambda: {**self.job_info, "progress_time": c.progress_time},
        }
        if path not in routes:
            return 404, "application/json", b'{"error": "not found"}'
        return 200, "application/json", json.dumps(routes[path](), default=str).encode()

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        c = self.coordinator
        worker = body.pop("worker")
        c.authorize(path, worker, body.pop("token", None))  # Refused (400): a bad id, or not its token
        if path == "/register":
            return c.register(worker, body.get("pid"))
        if path == "/pull_task":
            return c.pull_task(worker)
        if path == "/heartbeat":
            return c.heartbeat(worker, body.get("sample"))
        if path in ("/report_result", "/report_error"):
            stage, shard, attempt = body.pop("stage_index"), body.pop("shard"), body.pop("attempt")
            method = c.report_result if path == "/report_result" else c.report_error
            return method(worker, stage, shard, attempt, **body)
        raise KeyError(path)


def _handler(server: CoordinatorServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

        def log_message(self, *args) -> None:  # no access log on stderr
            pass

        def _send(self, code: int, ctype: str, payload: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _refuse_if_closed(self) -> bool:
            if server.closed:
                self.close_connection = True
                self._send(503, "application/json", b'{"error": "coordinator closed"}')
            return server.closed

        def do_GET(self) -> None:
            if not self._refuse_if_closed():
                self._send(*server.get(self.path.split("?", 1)[0]))

        def do_POST(self) -> None:
            if self._refuse_if_closed():
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                reply = server.post(self.path, body)
            except (KeyError, TypeError, ValueError) as exc:
                self._send(400, "application/json", json.dumps({"error": repr(exc)}).encode())
                return
            self._send(200, "application/json", json.dumps(reply, default=str).encode())

    return Handler
