"""An HTTP proxy on loopback in front of the S3 server that can lose the answer to a Delta
commit: the request reaches the store, which writes the commit file, and the client's
connection is then closed without its response, as a network that drops mid-commit does;
or kept open and never answered, as a network that hangs mid-commit does.

One request per connection (``Connection: close`` both ways), enough for the SDKs, which
open another; ``Expect: 100-continue`` is answered here and chunked bodies are read whole.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlsplit

_END = b"\r\n\r\n"
_LAST_CHUNK = b"0\r\n\r\n"


def _headers(head: bytes, dropped: tuple[bytes, ...]) -> list[bytes]:
    return [line for line in head.split(b"\r\n") if not line.lower().startswith(dropped)]


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0


class LossyProxy:
    """Forwards every request to ``upstream``; loses the answers of the next ``lose``
    commit PUTs (``_delta_log/*.json``) the store accepted, recording their paths. With
    ``hang`` set, a lost answer's connection stays open, unanswered, until ``close``."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.lose = 0
        self.hang = False
        self.lost: list[str] = []
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.getsockname()[1]}"

    def close(self) -> None:
        self._closed.set()
        self._server.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with contextlib.suppress(OSError), client:
            request = self._request(client)
            if request is None:
                return
            head, body = request
            with socket.create_connection(self.upstream) as upstream:
                kept = _headers(head, (b"connection:", b"expect:"))
                upstream.sendall(b"\r\n".join([*kept, b"Connection: close"]) + _END + body)
                answer = b"".join(iter(lambda: upstream.recv(65536), b""))
            if self._loses(head, answer):
                if self.hang:
                    self._closed.wait()
                return  # closed without an answer
            answer_head, _, answer_body = answer.partition(_END)
            kept = _headers(answer_head, (b"connection:",))
            client.sendall(b"\r\n".join([*kept, b"Connection: close"]) + _END + answer_body)

    def _request(self, client: socket.socket) -> tuple[bytes, bytes] | None:
        """A request's head and whole body (None: the client went away)."""
        data = b""
        while _END not in data:
            chunk = client.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, body = data.split(_END, 1)
        lowered = head.lower()
        if b"expect: 100-continue" in lowered:
            client.sendall(b"HTTP/1.1 100 Continue" + _END)
        chunked = b"transfer-encoding: chunked" in lowered
        while (chunked and not body.endswith(_LAST_CHUNK)) or len(body) < _content_length(head):
            chunk = client.recv(65536)
            if not chunk:
                return None
            body += chunk
        return head, body

    def _loses(self, head: bytes, answer: bytes) -> bool:
        method, path = head.split(b"\r\n", 1)[0].decode().split(" ")[:2]
        key = path.split("?")[0]
        accepted = answer.split(b"\r\n", 1)[0].split(b" ")[1:2] == [b"200"]
        with self._lock:
            if method != "PUT" or "/_delta_log/" not in key or not key.endswith(".json"):
                return False
            if self.lose <= 0 or not accepted:
                return False
            self.lose -= 1
            self.lost.append(key)
            return True
