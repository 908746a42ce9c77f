"""The per-process HTTP surface: /metrics, /ready (503 without the lease, or with the process's
problems listed), /reconcile?pairId=."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

MAX_ADMIN_BODY = 65536


class _Server(ThreadingHTTPServer):
    accepted: Callable[[socket.socket], socket.socket] | None = None

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, address = super().get_request()
        return (conn if self.accepted is None else self.accepted(conn)), address


class CellHttp:
    """Serves one process's endpoints on a daemon thread. Port 0 picks a free port."""

    def __init__(self, port: int, registry: CollectorRegistry, ready: Callable[[], bool],
                 reconcile: Callable[[int], dict[str, Any]] | None = None, host: str = "127.0.0.1",
                 problems: Callable[[], list[str]] | None = None,
                 admin: Callable[[str, str, str | None, bytes], tuple[int, dict[str, Any]]] | None = None,
                 accepted: Callable[[socket.socket], socket.socket] | None = None) -> None:
        """``problems``: why the process is not ready, if it can say (then it decides /ready, and
        /ready's body lists them for the operator). ``admin``: what answers ``/admin/…`` (method,
        path, the Authorization header, the body) with a status and a JSON object. ``accepted``:
        what each accepted connection's socket is made before it is served (the gateway moves
        its number out of QuickFIX's way: ``fixgw/descriptors.py``)."""
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep request logs out of the process log
                return

            def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _admin(self, method: str) -> bool:
                url = urlparse(self.path)
                if admin is None or not (url.path == "/admin" or url.path.startswith("/admin/")):
                    return False
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_ADMIN_BODY:
                    self._send(413, json.dumps({"error": f"body over {MAX_ADMIN_BODY} bytes"}).encode())
                    return True
                body = self.rfile.read(length) if length else b""
                try:
                    code, answer = admin(method, url.path, self.headers.get("Authorization"), body)
                except Exception as exc:  # report, do not kill the server thread
                    code, answer = 500, {"error": f"{type(exc).__name__}: {exc}"}
                self._send(code, json.dumps(answer).encode())
                return True

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                if not self._admin("POST"):
                    self._send(404, json.dumps({"error": "not found"}).encode())

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                url = urlparse(self.path)
                if self._admin("GET"):
                    return
                if url.path == "/metrics":
                    self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
                elif url.path == "/ready":
                    if problems is None:
                        ok = ready()
                        self._send(200 if ok else 503, json.dumps({"ready": ok}).encode())
                    else:
                        why = problems()
                        self._send(503 if why else 200, json.dumps({"ready": not why, "problems": why}).encode())
                elif url.path == "/reconcile" and owner.reconcile is not None:
                    raw = parse_qs(url.query).get("pairId", [""])[0]
                    if not raw.isdigit():
                        self._send(400, json.dumps({"error": "pairId must be a non-negative integer"}).encode())
                        return
                    try:
                        self._send(200, json.dumps(owner.reconcile(int(raw))).encode())
                    except Exception as exc:  # report, do not kill the server thread
                        self._send(500, json.dumps({"error": str(exc)}).encode())
                else:
                    self._send(404, json.dumps({"error": "not found"}).encode())

        self.reconcile = reconcile
        self.server = _Server((host, port), Handler)
        self.server.accepted = accepted
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, name="cell-http", daemon=True)

    def start(self) -> CellHttp:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
