"""The one HTTP reader of every network source: a total deadline and a maximum body size.

`get(url)` connects, sends one GET and reads the whole answer within `timeout()` seconds in
all (connect + headers + every body read: a server that drips one byte every few seconds, stalls
after its headers or streams an endless chunked body is cut off at the deadline), and refuses
bodies over `max_bytes`. Every failure is one `ZdebugError` line naming the URL. `--timeout
SECONDS` (commands/common.py) sets the default deadline for the whole process.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

from zephyr_debug.errors import EvidenceError, UsageError, ZdebugError
from zephyr_debug.jobstore import parse_json

DEFAULT_TIMEOUT_S = 15.0
MAX_BODY_BYTES = 256 << 20
CHUNK_BYTES = 1 << 16
_deadline_s = DEFAULT_TIMEOUT_S


def set_timeout(seconds: float | None) -> float | None:
    """The default total deadline of every request from now on (None: leave it)."""
    global _deadline_s
    if seconds is not None:
        if not seconds > 0:
            raise UsageError(f"--timeout {seconds}: must be a positive number of seconds")
        _deadline_s = float(seconds)
    return seconds


def timeout() -> float:
    return _deadline_s


@dataclass(frozen=True)
class Response:
    url: str
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self, what: str = "answer"):
        try:
            return parse_json(self.body)
        except RecursionError:
            raise EvidenceError(f"{self.url}: {what} is JSON nested too deeply") from None
        except json.JSONDecodeError:
            raise EvidenceError(f"{self.url}: {what} is not JSON ({self.body[:40]!r})") from None
        except ValueError:  # CPython refuses int() of more than 4300 digits
            raise EvidenceError(f"{self.url}: {what} holds a number of more than 4,300 digits") from None


class _Watchdog:
    """Shuts the connection's socket at the deadline, whatever read is blocked on it."""

    def __init__(self, conn: http.client.HTTPConnection, seconds: float):
        self.conn, self.fired = conn, False
        self.timer = threading.Timer(seconds, self._fire)
        self.timer.daemon = True

    def _fire(self) -> None:
        self.fired = True
        sock = self.conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> _Watchdog:
        self.timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.timer.cancel()
        self.conn.close()


def get(
    url: str,
    params: dict | None = None,
    *,
    timeout: float | None = None,
    max_bytes: int = MAX_BODY_BYTES,
    headers: dict[str, str] | None = None,
    what: str = "server",
) -> Response:
    """GET `url` (plus `params` as a query) within `timeout` seconds in all; any status."""
    seconds = _deadline_s if timeout is None else timeout
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{url}: not an http(s) URL")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if params:
        path += ("&" if parts.query else "?") + urlencode(params)
    try:
        port = parts.port
    except ValueError:
        raise UsageError(f"{url}: bad port") from None
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname, port, timeout=seconds)
    start = time.monotonic()
    got = 0
    with _Watchdog(conn, seconds) as dog:
        try:
            conn.request("GET", path, headers={"Accept-Encoding": "identity", **(headers or {})})
            reply = conn.getresponse()
            declared = reply.getheader("Content-Length")
            if declared and declared.isdigit() and int(declared) > max_bytes:
                raise EvidenceError(
                    f"{url}: {what} answer of {int(declared):,} bytes is over the limit of {max_bytes:,}"
                )
            chunks = []
            while chunk := reply.read1(CHUNK_BYTES):
                got += len(chunk)
                if got > max_bytes:
                    raise EvidenceError(f"{url}: {what} answer is over the limit of {max_bytes:,} bytes")
                chunks.append(chunk)
            if dog.fired:  # the shut socket read as the end of the body
                raise TimeoutError
            if reply.length:  # Content-Length not reached: the server closed early
                raise http.client.IncompleteRead(b"", reply.length)
        except ZdebugError:
            raise
        except (OSError, http.client.HTTPException) as exc:
            raise _explain(url, what, exc, seconds, got, dog.fired or time.monotonic() - start >= seconds) from None
    return Response(url, reply.status, {k.lower(): v for k, v in reply.getheaders()}, b"".join(chunks))


def _explain(url: str, what: str, exc: Exception, seconds: float, got: int, late: bool) -> ZdebugError:
    if late or isinstance(exc, TimeoutError):
        sent = f" (sent {got:,} bytes of its answer)" if got else ""
        return EvidenceError(
            f"{url}: {what} did not answer within {seconds:g}s{sent}; --timeout SECONDS to wait longer"
        )
    if isinstance(exc, http.client.IncompleteRead):
        return EvidenceError(f"{url}: {what} closed the connection mid-answer after {got:,} bytes")
    if isinstance(exc, (ConnectionRefusedError, socket.gaierror)):
        return EvidenceError(f"{url}: {what} unreachable (connection refused or no such host)")
    if isinstance(exc, ssl.SSLError):
        return EvidenceError(f"{url}: TLS failed: {exc.reason or exc}")
    if isinstance(exc, http.client.RemoteDisconnected | ConnectionResetError | http.client.BadStatusLine):
        return EvidenceError(f"{url}: {what} closed the connection without an HTTP answer")
    return EvidenceError(f"{url}: {what} failed: {type(exc).__name__}: {' '.join(str(exc).split())[:120]}")


def get_json(url: str, params: dict | None = None, *, what: str = "server", **options):
    """The JSON body of a 200 answer; any other status is one error line."""
    reply = get(url, params, what=what, **options)
    if reply.status != 200:
        raise EvidenceError(f"{url}: HTTP {reply.status} from the {what}")
    return reply.json(f"{what} answer")
