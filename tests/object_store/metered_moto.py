"""moto's S3 server with each request metered: one line per request to stdout,
``METER <method> <status> <bytes sent back> <path>``, for the object-store bench to price a command
(``bench/bench_object_store.py``). werkzeug's own request log has no response sizes.

    python -m tests.object_store.metered_moto HOST PORT
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

_WRITE = threading.Lock()


class Metered:
    """A WSGI middleware that counts the bytes of each response it passes on."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        status: list[str] = []

        def started(code: str, headers: Any, *rest: Any) -> Any:
            status.append(code.split()[0])
            return start_response(code, headers, *rest)

        request = f"{environ['REQUEST_METHOD']}"
        path = environ.get("PATH_INFO", "")
        return self._counted(request, path, status, self.app(environ, started))

    @staticmethod
    def _counted(
        method: str, path: str, status: list[str], body: Iterable[bytes]
    ) -> Iterator[bytes]:
        sent = 0
        try:
            for chunk in body:
                sent += len(chunk)
                yield chunk
        finally:
            close = getattr(body, "close", None)
            if close is not None:
                close()
            with _WRITE:
                print(f"METER {method} {status[0] if status else '-'} {sent} {path}", flush=True)


def main() -> None:
    from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    host, port = sys.argv[1], int(sys.argv[2])
    app = Metered(DomainDispatcherApplication(create_backend_app))
    server = make_server(host, port, app, True, request_handler=MotoRequestHandler)
    server.serve_forever()


if __name__ == "__main__":
    main()
