"""Reconcile the two sides' column types into one row layout both sides hash.

For each column pair the less precise logical type wins (with a warning), a side that
stores a richer type as text (JSON or UUID kept as a string in the lake) is read as the
richer type, and incompatible pairs or columns missing on one side become schema
differences — reported, never a crash — and are left out of the row hash. ``exclude`` names
source columns, and target-only columns by their own name: neither is compared or reported.

Integer columns the comparison lists under ``columns.boolean`` are compared as booleans
(MariaDB's BOOLEAN is TINYINT(1)). When one side keeps a time at a lower precision than
the other, that side's product rounded it when it was stored, so unless the comparison
names a ``timestamp_rounding``, the other side is reduced by the same product's rule.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from cdc_core.errors import ConfigError
from merkle import types as lt
from merkle.layout import ColumnSpec, RowLayout
from merkle.options import DEFAULT_ROUNDING, ComparisonOptions, TimeRounding
from validator.result import SchemaDifference

log = logging.getLogger(__name__)

_TEXTUAL = (lt.JsonType, lt.UuidType)
_TEMPORAL = (lt.TimeType, lt.TimeTzType, lt.TimestampType, lt.TimestampTzType)


@dataclass(frozen=True, slots=True)
class SideRounding:
    """How each side's product rounds the times it stores (None: unknown or never)."""

    source: TimeRounding | None = None
    target: TimeRounding | None = None


@dataclass(frozen=True, slots=True)
class Reconciled:
    """The layout to hash (columns named as the source names them) and what was left out."""

    layout: RowLayout
    target_names: Mapping[str, str]  # source column name -> target column name
    schema_differences: tuple[SchemaDifference, ...]


def reconcile_pair(source: lt.LogicalType, target: lt.LogicalType) -> lt.LogicalType | None:
    """The logical type both sides are hashed as, or None when they cannot be compared
    (arrays: an array of the type their elements are compared as)."""
    if source == target:
        return source
    if isinstance(source, lt.ArrayType) and isinstance(target, lt.ArrayType):
        element = reconcile_pair(source.element, target.element)
        return None if element is None else lt.ArrayType(element)
    for first, second in ((source, target), (target, source)):
        combined = _combine(first, second)
        if combined is not None:
            return combined
    return None


def _combine(a: lt.LogicalType, b: lt.LogicalType) -> lt.LogicalType | None:
    if isinstance(a, lt.IntegerType) and isinstance(b, lt.DecimalType):
        return b  # integers and decimals share canonical bytes ("5" either way)
    if isinstance(a, lt.DecimalType) and isinstance(b, lt.DecimalType):
        return lt.DecimalType()  # normalised encoding: scale does not change equal values
    if isinstance(a, lt.FloatType) and isinstance(b, lt.FloatType):
        return lt.FloatType(32)  # the narrower of two widths
    if isinstance(a, lt.StringType) and isinstance(b, lt.StringType):
        return lt.StringType(padded=True)  # CHAR on one side: trim_char may apply
    if isinstance(a, _TEXTUAL) and isinstance(b, lt.StringType):
        return a  # JSON and UUID text is parsed, so CHAR padding does not matter
    if isinstance(a, lt.TimeType) and isinstance(b, lt.IntegerType):
        return a  # the lake keeps times as microseconds since midnight
    for kind in _TEMPORAL:
        if isinstance(a, kind) and isinstance(b, kind):
            return kind(min(a.precision, b.precision))
    return None


def reconcile(
    source: Mapping[str, lt.LogicalType | None],
    target: Mapping[str, lt.LogicalType | None],
    key: Sequence[str],
    rename: Mapping[str, str],
    exclude: Sequence[str],
    sensitive: Sequence[str],
    options: ComparisonOptions,
    *,
    boolean: Sequence[str] = (),
    rounding: SideRounding = SideRounding(),
    whole_row: bool = False,
) -> Reconciled:
    """Build the row layout of a comparison from both sides' columns (in source order).

    ``boolean`` lists source columns whose integers are compared as booleans; ``rounding``
    says how each side's product rounds stored times (see ``choose_rounding``);
    ``whole_row``: ``key`` is every source column (a table without a key), and the key is
    the columns both sides can compare (the others are schema differences, as always).
    """
    _check_boolean_names(boolean, source)
    specs: list[ColumnSpec] = []
    names: dict[str, str] = {}
    differences: list[SchemaDifference] = []
    rounded_by: dict[str, TimeRounding | None] = {}
    for name, source_type in source.items():
        if name in exclude:
            continue
        target_name = rename.get(name, name)
        target_type = target.get(target_name)
        if name in boolean:
            source_type = _as_boolean(name, source_type, "source")
            target_type = _as_boolean(name, target_type, "target")
        difference, ltype = _pair(name, source_type, target_type, target_name in target)
        if difference is not None:
            differences.append(difference)
            continue
        assert ltype is not None and source_type is not None and target_type is not None
        specs.append(ColumnSpec(name, ltype, sensitive=name in sensitive))
        names[name] = target_name
        if _fraction_digits(source_type) != _fraction_digits(target_type):
            coarser = _fraction_digits(source_type) < _fraction_digits(target_type)
            rounded_by[name] = rounding.source if coarser else rounding.target
    claimed = {rename.get(name, name) for name in source}  # matched, even if not comparable
    extra = sorted(set(target) - claimed - set(exclude))
    differences += [SchemaDifference(n, "extra in target", "extra_in_target") for n in extra]
    if whole_row:  # a table without a key: its rows are compared by what both sides hold
        key = [k for k in key if k in names]
        if not key:
            raise ConfigError(
                "the table has no key, and none of its columns is comparable on both sides;"
                " check the comparison's target table"
            )
    missing_keys = [k for k in key if k not in names]
    if missing_keys:
        raise ConfigError(f"key columns {missing_keys} are not comparable on both sides")
    layout = RowLayout(tuple(specs), tuple(key), choose_rounding(options, rounded_by))
    return Reconciled(layout, names, tuple(differences))


def _fraction_digits(ltype: lt.LogicalType) -> int:
    """Fractional-second digits a side keeps (an integer time is lake microseconds; an
    array keeps its elements')."""
    if isinstance(ltype, lt.ArrayType):
        return _fraction_digits(ltype.element)
    if isinstance(ltype, _TEMPORAL):
        return ltype.precision
    return lt.MAX_FRACTION_DIGITS


def choose_rounding(
    options: ComparisonOptions, rounded_by: Mapping[str, TimeRounding | None]
) -> ComparisonOptions:
    """``options`` with the rounding rule in effect: the configured one, else the rule of
    the product that stored the lower precision (``rounded_by``: column -> that rule)."""
    if options.timestamp_rounding is not None:
        return options
    rules = {column: rule for column, rule in rounded_by.items() if rule is not None}
    if not rules:
        return replace(options, timestamp_rounding=DEFAULT_ROUNDING)
    chosen = next(iter(rules.values()))
    if len(set(rules.values())) > 1:
        log.warning(
            "times were rounded by products with different rules (%s); comparing with %s, so"
            " exact halves may differ: set options.timestamp_rounding or split the comparison",
            ", ".join(f"{column}: {rule}" for column, rule in rules.items()),
            chosen,
        )
    else:
        log.info("comparing times rounded as %s, as the product that stored them", chosen)
    return replace(options, timestamp_rounding=chosen)


def _check_boolean_names(boolean: Sequence[str], source: Mapping[str, object]) -> None:
    unknown = sorted(set(boolean) - set(source))
    if unknown:
        raise ConfigError(f"columns.boolean lists columns the source does not have: {unknown}")


def _as_boolean(name: str, ltype: lt.LogicalType | None, side: str) -> lt.LogicalType | None:
    """A column listed in ``columns.boolean``: its integers are booleans on this side."""
    if ltype is None or isinstance(ltype, lt.BooleanType | lt.IntegerType):
        return None if ltype is None else lt.BooleanType()
    raise ConfigError(
        f"columns.boolean lists {name}, which is {ltype} on the {side} side; only integer"
        " columns (such as MariaDB's TINYINT(1)) can be compared as boolean"
    )


def _pair(
    name: str,
    source_type: lt.LogicalType | None,
    target_type: lt.LogicalType | None,
    in_target: bool,
) -> tuple[SchemaDifference | None, lt.LogicalType | None]:
    if not in_target:
        return SchemaDifference(name, "missing in target", "missing_in_target"), None
    if source_type is None or target_type is None:
        side = "source" if source_type is None else "target"
        return SchemaDifference(name, f"type not supported on the {side} side", "changed"), None
    ltype = reconcile_pair(source_type, target_type)
    if ltype is None:
        problem = f"incompatible types {source_type} (source) and {target_type} (target)"
        if {type(source_type), type(target_type)} == {lt.IntegerType, lt.BooleanType}:
            problem += (
                "; MariaDB keeps BOOLEAN as TINYINT(1): to compare it as a boolean, list it"
                f" in the comparison's columns: {{boolean: [{name}]}}"
            )
        return SchemaDifference(name, problem, "changed"), None
    if ltype not in (source_type, target_type) or source_type != target_type:
        # Said, not warned: a lake holds many types in its own representation (a UUID as
        # text, a CHAR unpadded), and every run would warn of the pipeline's own design.
        log.info(
            "column %s: comparing %s (source) with %s (target) as %s",
            name,
            source_type,
            target_type,
            ltype,
        )
    return None, ltype


def logical_type_of_arrow(arrow_type: object) -> lt.LogicalType | None:
    """The logical type a lake (Arrow/Parquet) column is read as: a list is an array of its
    items' type, the struct ``merkle.types.TIME_TZ_FIELDS`` names a ``time_tz``."""
    import pyarrow as pa
    import pyarrow.types as pat

    assert isinstance(arrow_type, pa.DataType)
    if pat.is_list(arrow_type) or pat.is_large_list(arrow_type):
        element = logical_type_of_arrow(arrow_type.value_type)
        return None if element is None else lt.ArrayType(element)
    if pat.is_struct(arrow_type):
        names = tuple(arrow_type.field(i).name for i in range(arrow_type.num_fields))
        return lt.TimeTzType() if names == lt.TIME_TZ_FIELDS else None
    if pat.is_integer(arrow_type):
        return lt.IntegerType()
    if pat.is_decimal(arrow_type):
        return lt.DecimalType(arrow_type.precision, arrow_type.scale)
    if pat.is_floating(arrow_type):
        return lt.FloatType(32 if arrow_type.bit_width == 32 else 64)
    if pat.is_timestamp(arrow_type):
        digits = {"s": 0, "ms": 3}.get(arrow_type.unit, 6)
        return lt.TimestampTzType(digits) if arrow_type.tz else lt.TimestampType(digits)
    simple: list[tuple[object, lt.LogicalType]] = [
        (pat.is_string, lt.StringType()),
        (pat.is_large_string, lt.StringType()),
        (pat.is_binary, lt.BytesType()),
        (pat.is_large_binary, lt.BytesType()),
        (pat.is_boolean, lt.BooleanType()),
        (pat.is_date32, lt.DateType()),
        (pat.is_duration, lt.IntervalType()),
    ]
    for test, ltype in simple:
        if test(arrow_type):  # type: ignore[operator]
            return ltype
    return None
