"""The server side of ``caching_sha2_password``, MySQL 8's default authentication, for the
fake server (https://dev.mysql.com/doc/dev/mysql-server/latest/page_caching_sha2_authentication_exchanges.html):

- the client's first answer is ``XOR(SHA256(password), SHA256(SHA256(SHA256(password)),
  nonce))``; a server that has the user's hash cached checks it and says
  ``fast_auth_success`` (``0x01 0x03``), then OK;
- otherwise it asks for the password (``perform_full_authentication``, ``0x01 0x04``): over
  TLS the client sends it as is, ``NUL``-terminated; without TLS it asks for the server's
  RSA public key (``0x02``; answered ``0x01`` + PEM) and sends the password, ``NUL``-ended
  and XORed with the nonce, encrypted with RSA-OAEP (SHA-1).

``Sha2Auth.outcomes`` records how each connection got in (``fast``, ``tls``, ``rsa``) or
was refused (``refused``).
"""

from __future__ import annotations

import hashlib
import ssl
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

PLUGIN = "caching_sha2_password"
FAST_AUTH_SUCCESS, PERFORM_FULL_AUTHENTICATION, REQUEST_PUBLIC_KEY = 3, 4, 2
ER_ACCESS_DENIED = 1045


class Exchange(Protocol):
    """The session's packet exchange (``fake_server._Session``)."""

    def read(self) -> bytes: ...

    def write(self, payload: bytes) -> None: ...


@dataclass
class Sha2Auth:
    """A user's password and whether the server has its hash cached.

    Args:
        password: The one password that gets in.
        cached: Whether the fast path is taken (a cache filled by an earlier login).
        tls: The server's TLS context (None: it offers no TLS).
    """

    password: str
    cached: bool = False
    tls: ssl.SSLContext | None = None
    outcomes: list[str] = field(default_factory=list)

    @cached_property
    def _key(self) -> rsa.RSAPrivateKey:
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def admits(self, exchange: Exchange, scrambled: bytes, nonce: bytes, secure: bool) -> bool:
        """Run the exchange after the client's first answer; whether it may log in (the
        caller then writes OK or the error)."""
        if self.cached:
            if scrambled != scramble(self.password, nonce):
                return self._refused()
            exchange.write(bytes([1, FAST_AUTH_SUCCESS]))
            self.outcomes.append("fast")
            return True
        exchange.write(bytes([1, PERFORM_FULL_AUTHENTICATION]))
        answer = exchange.read()
        if secure:
            return self._checked(answer, "tls")
        if answer != bytes([REQUEST_PUBLIC_KEY]):
            return self._refused()  # a client must not send it in clear without TLS
        public = self._key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        exchange.write(b"\x01" + public)
        oaep = padding.OAEP(padding.MGF1(hashes.SHA1()), hashes.SHA1(), None)
        mixed = self._key.decrypt(exchange.read(), oaep)
        plain = bytes(byte ^ nonce[index % len(nonce)] for index, byte in enumerate(mixed))
        return self._checked(plain, "rsa")

    def _checked(self, sent: bytes, how: str) -> bool:
        if sent != self.password.encode() + b"\0":
            return self._refused()
        self.outcomes.append(how)
        return True

    def _refused(self) -> bool:
        self.outcomes.append("refused")
        return False


def scramble(password: str, nonce: bytes) -> bytes:
    """What the client sends first for ``password`` and the server's ``nonce``."""
    first = hashlib.sha256(password.encode()).digest()
    second = hashlib.sha256(hashlib.sha256(first).digest() + nonce).digest()
    return bytes(a ^ b for a, b in zip(first, second, strict=True))
