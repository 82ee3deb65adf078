"""A real HTTP server on 127.0.0.1 for API servers that cannot run on these machines (Kubernetes, Kubeflow
Pipelines): the tests point the real client libraries at it, so their serialization and HTTP calls run."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# (method, path with query, body, lower-cased headers) -> (status code, JSON-able payload or text)
Handle = Callable[[str, str, bytes, dict], tuple[int, "str | dict"]]


@contextlib.contextmanager
def http_server(handle: Handle) -> Iterator[str]:
    """Serve ``handle`` in a thread; yields the base URL."""

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            code, payload = handle(self.command, self.path, body, {k.lower(): v for k, v in self.headers.items()})
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain" if isinstance(payload, str) else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = do_PATCH = do_PUT = _serve

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
