"""Oracle datetime format models: reading the datetime text LogMiner puts in SQL_REDO.

LogMiner renders DATE and TIMESTAMP values with the mining session's NLS formats, or with
an explicit model as ``TO_TIMESTAMP_TZ(text, model)``'s second argument. The elements read
here (Oracle Database SQL Language Reference, "Format Models", "Datetime Format Elements"):

- ``YYYY MM DD HH24 MI SS`` the wall clock; ``X`` the radix character (``.`` or ``,``);
- ``FF`` / ``FF1``..``FF9`` the fraction, 0 to 9 digits (a TIMESTAMP(0) prints ``SS.``
  with none). Digits beyond microseconds are truncated, as python-oracledb does for values
  it fetches, so a change and a snapshot read of the same value agree;
- ``TZH:TZM`` an offset (``-03:30``), ``TZH`` alone (``+05``);
- ``TZR`` a region, which Oracle prints in upper case (``EUROPE/BERLIN``), matched to the
  IANA name without regard to case; a value stored with an offset prints it as its region;
- ``TZD`` the daylight abbreviation (``CEST``). Alone it is ambiguous (``CST`` is both
  US Central and China Standard time) and is refused; after ``TZR`` it picks the side of
  a DST overlap, which a region alone cannot ("TZD ... must correspond with the region
  specified in TZR", same reference).

A zoned value's text may carry any of these zone forms whatever the model says (a region
where the session format has ``TZH:TZM``: LogMiner prints region-stored values with their
region), so a model's zone part is retried with each form of ``ZONE_MASKS``.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import zoneinfo
from collections.abc import Iterator, Mapping

from connectors.oracle.errors import RedoParseError

DATE_FORMAT = "YYYY-MM-DD HH24:MI:SS"
TIMESTAMP_FORMAT = "YYYY-MM-DD HH24:MI:SS.FF"
TIMESTAMP_TZ_FORMAT = "YYYY-MM-DD HH24:MI:SS.FF TZH:TZM"
ZONE_MASKS = ("TZH:TZM", "TZR TZD", "TZR", "TZH")
"""Every zone form a zoned value's text may end with, tried in this order."""

_ELEMENTS = {
    "YYYY": r"(?P<year>\d{4})",
    "MM": r"(?P<month>\d{1,2})",
    "DD": r"(?P<day>\d{1,2})",
    "HH24": r"(?P<hour>\d{1,2})",
    "MI": r"(?P<minute>\d{1,2})",
    "SS": r"(?P<second>\d{1,2})",
    "X": r"[.,]",
    "FF": r"(?P<fraction>\d{0,9})",
    "TZH": r"(?P<tzh>[-+]\d{1,2})",
    "TZM": r"(?P<tzm>\d{2})",
    "TZR": r"(?P<tzr>[-+]\d{1,2}:\d{2}|[A-Za-z][A-Za-z0-9_/+\-]*)",
    "TZD": r"(?P<tzd>[A-Za-z]{1,6}|[-+]\d{2,4})",
}
_ELEMENT = re.compile(r"YYYY|MM|DD|HH24|MI|SS|X|FF[1-9]?|TZH|TZM|TZR|TZD")
_ZONE_ELEMENT = re.compile(r"TZH|TZR|TZD")
_OFFSET = re.compile(r"^(?P<tzh>[-+]\d{1,2}):(?P<tzm>\d{2})$")


class DatetimeTextError(RedoParseError):
    """Datetime text that does not fit its model (names the model, never the value)."""


class AmbiguousLocalTimeError(DatetimeTextError):
    """A wall-clock time a region shows twice (a DST overlap) with nothing saying which."""


def parse_datetime(text: str, model: str) -> dt.datetime:
    """``text`` read with the Oracle format ``model``: naive, or aware when it has a zone.

    Raises:
        AmbiguousLocalTimeError: A region's time inside a DST overlap without ``TZD``.
        DatetimeTextError: The text fits neither the model nor any ``ZONE_MASKS`` variant,
            or names an unknown region, or a time a region skips.
    """
    stripped = text.strip()
    for candidate in _models(model):
        match = _format_regex(candidate).match(stripped)
        if match is not None:
            return _datetime(match.groupdict(), model)
    raise DatetimeTextError(f"a datetime does not match the format {model}")


def _models(model: str) -> Iterator[str]:
    """``model``, then ``model`` with its zone part replaced by each of ``ZONE_MASKS``."""
    yield model
    zone = _ZONE_ELEMENT.search(model.upper())
    if zone is None:
        return
    for mask in ZONE_MASKS:
        if model[zone.start() :].upper() != mask:
            yield model[: zone.start()] + mask


@functools.cache
def _format_regex(model: str) -> re.Pattern[str]:
    parts: list[str] = []
    position, upper = 0, model.upper()
    for match in _ELEMENT.finditer(upper):
        literal = model[position : match.start()]
        element = match.group()
        if element.startswith("FF"):
            # The radix before FF goes with it: a fraction of no digits may drop it too.
            after_x = not literal and bool(parts) and parts[-1] == _ELEMENTS["X"]
            radix = after_x or literal.endswith(".")
            if after_x:
                parts.pop()
            elif radix:
                literal = literal[:-1]
            parts.append(re.escape(literal))
            parts.append(rf"(?:[.,]{_ELEMENTS['FF']})?" if radix else _ELEMENTS["FF"])
        else:
            parts.append(re.escape(literal))
            parts.append(_ELEMENTS[element])
        position = match.end()
    parts.append(re.escape(model[position:]))
    return re.compile("^" + "".join(parts).replace(r"\ ", r"\s+") + "$")


def _datetime(fields: Mapping[str, str | None], model: str) -> dt.datetime:
    fraction = (fields.get("fraction") or "")[:6].ljust(6, "0")  # truncate to microseconds
    try:
        value = dt.datetime(
            int(fields["year"] or 0), int(fields.get("month") or 1), int(fields.get("day") or 1),
            int(fields.get("hour") or 0), int(fields.get("minute") or 0),
            int(fields.get("second") or 0), int(fraction),
        )  # fmt: skip
    except (KeyError, ValueError) as exc:
        raise DatetimeTextError(f"a datetime of the format {model} is out of range") from exc
    return _zoned(value, fields)


def _zoned(value: dt.datetime, fields: Mapping[str, str | None]) -> dt.datetime:
    tzh, region, tzd = fields.get("tzh"), fields.get("tzr"), fields.get("tzd")
    if tzh is not None:
        return value.replace(tzinfo=_offset(tzh, fields.get("tzm")))
    if region is None:
        if tzd is not None:
            raise DatetimeTextError("a time zone abbreviation (TZD) without a region is ambiguous")
        return value
    offset = _OFFSET.match(region)
    if offset is not None:
        return value.replace(tzinfo=_offset(offset["tzh"], offset["tzm"]))
    return localize(value, region_zone(region), tzd)


def _offset(hours: str, minutes: str | None) -> dt.timezone:
    sign = -1 if hours.startswith("-") else 1
    return dt.timezone(sign * dt.timedelta(hours=abs(int(hours)), minutes=int(minutes or 0)))


@functools.cache
def _regions() -> dict[str, str]:
    return {name.upper(): name for name in zoneinfo.available_timezones()}


def region_zone(region: str) -> dt.tzinfo:
    """The zone of an Oracle region name, in any case (Oracle prints ``EUROPE/BERLIN``).

    Raises:
        DatetimeTextError: No IANA zone has that name (install the ``tzdata`` package if
            the system has no zone database).
    """
    if region.upper() in ("UTC", "Z"):
        return dt.UTC
    name = _regions().get(region.upper())
    if name is None:
        raise DatetimeTextError(
            f"unknown time zone region {region!r}; the zone database (tzdata) lacks it"
        )
    return zoneinfo.ZoneInfo(name)


def localize(value: dt.datetime, zone: dt.tzinfo, abbreviation: str | None) -> dt.datetime:
    """The instant the wall-clock ``value`` names in ``zone``.

    Raises:
        AmbiguousLocalTimeError: ``value`` is in a DST overlap and ``abbreviation`` (TZD) is
            missing or names neither side.
        DatetimeTextError: ``value`` is in a DST gap (a time the zone skips).
    """
    sides = [value.replace(tzinfo=zone, fold=fold) for fold in (0, 1)]
    real = [side for side in sides if _exists(side)]
    if not real:
        raise DatetimeTextError(f"a local time that zone {zone} skips (a DST gap)")
    if len({side.utcoffset() for side in real}) == 1:
        return real[0]
    named = [s for s in real if abbreviation and (s.tzname() or "").upper() == abbreviation.upper()]
    if len(named) != 1:
        raise AmbiguousLocalTimeError(
            f"a local time zone {zone} shows twice (a DST overlap) without a daylight"
            " abbreviation (TZD) saying which"
        )
    return named[0]


def _exists(value: dt.datetime) -> bool:
    """Whether the aware wall-clock ``value`` survives a round trip through UTC."""
    back = value.astimezone(dt.UTC).astimezone(value.tzinfo)
    return back.replace(tzinfo=None) == value.replace(tzinfo=None)
