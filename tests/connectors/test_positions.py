"""The three products' positions have one shape: ``position_of`` takes the log's own form
and gives a ``Position``; a malformed one is a ``PositionError`` naming it."""

from __future__ import annotations

import pytest

from cdc_core.capture.position import Position, PositionError
from cdc_core.errors import TerminalError
from connectors.mariadb import position as mariadb
from connectors.oracle import position as oracle
from connectors.postgres import position as postgres


def test_every_product_turns_its_log_form_into_an_ordered_position() -> None:
    cases = [
        (
            mariadb.position_of("mariadb-bin.000003", 4),
            mariadb.position_of("mariadb-bin.000004", 1),
        ),
        (postgres.position_of("16/B374D848"), postgres.position_of("17/0")),
        (oracle.position_of(99), oracle.position_of(100)),
    ]
    for earlier, later in cases:
        assert isinstance(earlier, Position) and earlier < later
    assert mariadb.position_of("mariadb-bin.000003", 4).text == "mariadb-bin.000003:4"
    assert postgres.position_of("16/b374d848").text == "16/B374D848"
    assert oracle.position_of(42).text == "42"


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: mariadb.position_of("mariadb-bin.x", 4), "mariadb-bin.x:4"),
        (lambda: mariadb.position_of("mariadb-bin.000001", -1), "mariadb-bin.000001:-1"),
        (lambda: postgres.position_of("16-B374"), "16-B374"),
        (lambda: postgres.lsn_to_text(2**64), str(2**64)),
    ],
)
def test_a_malformed_position_is_one_error_type_naming_it(make: object, named: str) -> None:
    with pytest.raises(PositionError, match=named.replace("+", r"\+")) as caught:
        make()  # type: ignore[operator]
    assert isinstance(caught.value, TerminalError)  # exit code 2, never retried
