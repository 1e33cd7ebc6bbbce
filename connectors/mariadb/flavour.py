"""Which server a ``mysql://`` URL reaches, and whether replcheck is built for it.

MariaDB and MySQL share a client protocol and the binlog's framing, but not their GTID
events, status variables or statements, so every reader asks the server first and refuses
a product or version it has not been built for (exit 2, naming it) before anything is read.

How each product names itself:

- MariaDB: ``VERSION()`` holds ``MariaDB`` (``10.11.6-MariaDB-log``,
  https://mariadb.com/kb/en/version/);
- MySQL: ``VERSION()`` is ``8.0.36`` or ``8.4.0`` with a build suffix at most, and
  ``@@version_comment`` names the build (``MySQL Community Server - GPL``, ``(Ubuntu)``,
  https://dev.mysql.com/doc/refman/8.4/en/server-system-variables.html#sysvar_version_comment);
- other products speaking the protocol name themselves in one of the two (``TiDB`` in
  ``VERSION()``, ``Percona Server`` in ``@@version_comment``): refused by name, since
  their binlogs and status differ in ways no test here covers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from connectors.mariadb.errors import UnsupportedServerError

Product = Literal["MariaDB", "MySQL"]

# The versions replcheck is built for: MariaDB by major version, MySQL by release series
# (8.0 and the 8.4 LTS; the 8.1-8.3 innovation releases and 9.x are not).
BUILT_FOR: dict[Product, tuple[tuple[int, ...], ...]] = {
    "MariaDB": ((10,), (11,)),
    "MySQL": ((8, 0), (8, 4)),
}
_OTHER_PRODUCTS = (
    "TiDB",
    "Percona",
    "Vitess",
    "SingleStore",
    "MemSQL",
    "OceanBase",
    "PolarDB",
    "StarRocks",
    "Doris",
)
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True, slots=True)
class ServerFlavour:
    """The product and version of a server.

    Args:
        product: ``MariaDB`` or ``MySQL``.
        version: ``(major, minor, patch)``.
        text: ``VERSION()`` as the server answered, for messages.
    """

    product: Product
    version: tuple[int, int, int]
    text: str

    def __post_init__(self) -> None:
        if len(self.version) != 3:
            raise ValueError(f"a version is (major, minor, patch), not {self.version}")

    @property
    def is_mysql(self) -> bool:
        """Whether the server is MySQL (its GTID events, statements and status differ)."""
        return self.product == "MySQL"

    @property
    def series(self) -> str:
        """``MySQL 8.4`` / ``MariaDB 10.11``: how messages name it."""
        return f"{self.product} {self.version[0]}.{self.version[1]}"

    @property
    def binlog_status_statement(self) -> str:
        """The statement that shows the binlog's end: MySQL 8.4 removed ``SHOW MASTER
        STATUS`` for ``SHOW BINARY LOG STATUS``
        (https://dev.mysql.com/doc/refman/8.4/en/show-binary-log-status.html)."""
        if self.is_mysql and self.version >= (8, 4, 0):
            return "SHOW BINARY LOG STATUS"
        return "SHOW MASTER STATUS"

    def built_for(self) -> bool:
        """Whether replcheck is built for this product and version."""
        return any(self.version[: len(series)] == series for series in BUILT_FOR[self.product])


def flavour_of(version: str, comment: str, source: str) -> ServerFlavour:
    """The flavour of a server that answered ``VERSION()`` and ``@@version_comment``.

    Raises:
        UnsupportedServerError: Another product, or a version replcheck is not built for.
    """
    text = version.strip()
    named = f"{version} ({comment})" if comment else version
    other = [name for name in _OTHER_PRODUCTS if name.lower() in f"{version} {comment}".lower()]
    if other:
        raise UnsupportedServerError.product(source, other[0], named, _accepted())
    match = _VERSION.match(text)
    if match is None:
        raise UnsupportedServerError.product(source, "an unknown product", named, _accepted())
    product: Product = "MariaDB" if "mariadb" in text.lower() else "MySQL"
    major, minor, patch = (int(part) for part in match.groups())
    flavour = ServerFlavour(product, (major, minor, patch), text)
    if not flavour.built_for():
        raise UnsupportedServerError.version(source, flavour.series, named, _accepted())
    return flavour


def detect_flavour(cursor: Any, source: str) -> ServerFlavour:
    """Ask the server on ``cursor`` which product and version it is (see ``flavour_of``)."""
    cursor.execute("SELECT VERSION(), @@version_comment")
    version, comment = cursor.fetchone()
    return flavour_of(str(version or ""), str(comment or ""), source)


def _accepted() -> str:
    """``MariaDB 10.x, 11.x; MySQL 8.0, 8.4``."""
    return "; ".join(
        f"{product} " + ", ".join(".".join(map(str, s)) + (".x" if len(s) == 1 else "") for s in v)
        for product, v in BUILT_FOR.items()
    )
