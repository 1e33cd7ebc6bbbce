"""Re-sync: repair exactly the rows a validation found different, then prove they are.

``resync(config, result)`` is what ``replcheck resync`` runs and what a service calls
after a failed gate. For each chosen comparison of the result:

1. its differing keys (missing, extra, changed) are turned back into typed values
   (``validator.resync.keys``); duplicate keys and differences the result did not detail
   cannot be repaired by key and are counted as skipped;
2. every target is a dry run by default and written only with ``apply``: a lake target
   gets refresh and delete events at the source's snapshot position
   (``validator.resync.lake``; a dry run lists those keys in the outcome); a database
   target gets repair SQL (``validator.resync.database``): written to
   ``repair-<comparison>.sql`` for review in a dry run, executed in batches with ``apply``;
3. the repaired keys are compared again (``validator.resync.revalidate``), or the whole
   comparison with ``full_revalidation``;
4. an audit record of every comparison goes to the lake or to ``resync-audit.jsonl``.

A comparison that fails is recorded as failed with its error, after what it already wrote,
so the outcome of a run exists whatever one comparison met.

Safety limits (``resync:`` config section) are checked before anything is touched: a
result older than ``max_result_age_h`` or a comparison with more than ``max_rows`` keys is
refused unless ``force``.
"""

from __future__ import annotations

import datetime as dt
import getpass
import logging
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdc_core.errors import ConfigError, ReplcheckError
from validator.config import ComparisonConfig, ValidatorConfig
from validator.key_masks import KeyMasker, is_token, masker_for_resync, resolve
from validator.result import MASK, Key
from validator.resync.audit import AuditRecord, audit_store
from validator.resync.context import ComparisonContext, all_keys, key_bytes_of, prepare
from validator.resync.database import (
    RepairPlan,
    apply_repairs,
    open_target,
    plan_repairs,
    write_repair_file,
)
from validator.resync.keys import TypedKey, display_key, masked_key, to_typed_key
from validator.resync.lake import resync_lake
from validator.resync.outcome import (
    ActionTaken,
    ComparisonResync,
    Mode,
    ResyncOutcome,
    Revalidation,
)
from validator.resync.repair_sql import RepairAction
from validator.resync.revalidate import (
    KeyCheck,
    KeyPair,
    revalidate_database,
    revalidate_full,
    revalidate_lake,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

REPAIRABLE = ("missing_in_target", "extra_in_target", "changed")
CLOCK_SKEW_H = 5 / 60  # how far in the future a result may say it finished (clocks differ)


class ResyncRefused(ConfigError):
    """A safety limit stops the re-sync; the message names the limit and the flag."""


@dataclass(frozen=True, slots=True)
class ResyncOptions:
    """How one re-sync runs (the CLI's flags).

    Attributes:
        comparisons: Only these comparisons (default: every one that found differences).
        apply: Write the repairs (default: a dry run that says what it would write).
        force: Go beyond ``max_rows`` and ``max_result_age_h``.
        max_rows: Overrides ``resync.max_rows``.
        full_revalidation: Validate whole comparisons afterwards, not just the keys.
        out_dir: Where repair SQL files (and, without a lake, the audit file) go.
    """

    comparisons: tuple[str, ...] = ()
    apply: bool = False
    force: bool = False
    max_rows: int | None = None
    full_revalidation: bool = False
    out_dir: Path = Path("replcheck-out")


@dataclass(frozen=True, slots=True)
class _Request:
    """One comparison's repairable keys, as the result lists them."""

    comparison: ComparisonConfig
    keys: tuple[Key, ...]
    skipped: dict[str, int] = field(default_factory=dict)
    # Keys the result says the source has (missing in the target, or changed): one found
    # on neither side is not this data's (or was deleted since), never "already equal".
    at_source: frozenset[Key] = frozenset()


@dataclass(frozen=True, slots=True)
class _Run:
    """What every comparison of one run shares."""

    config: ValidatorConfig
    options: ResyncOptions
    run_id: str
    result_finished: str
    spark: SparkSession | Callable[[], SparkSession] | None
    result_file: Path | None = None  # where the result was read (its mask.key is beside it)
    mask_key_id: str | None = None  # the result's: which secret masked its sensitive keys

    def masker(self) -> KeyMasker:
        """The secret the result's sensitive key parts were masked with."""
        configured = self.config.validation.mask_key
        return masker_for_resync(configured, self.result_file, self.mask_key_id)


def resync(
    config: ValidatorConfig,
    result_document: dict[str, Any],
    *,
    comparisons: Sequence[str] | None = None,
    apply: bool = False,
    force: bool = False,
    max_rows: int | None = None,
    full_revalidation: bool = False,
    out_dir: Path | None = None,
    spark: SparkSession | Callable[[], SparkSession] | None = None,
    result_file: Path | None = None,
) -> ResyncOutcome:
    """Repair the differences of a validation result and re-validate (module docstring).

    Args:
        config: The validator configuration the result was produced with.
        result_document: A ``result.json`` document.
        comparisons: Only these comparisons.
        apply: Write the repairs (default: a dry run; database targets: the repair SQL
            written for review).
        force: Override the ``max_rows`` and ``max_result_age_h`` limits.
        max_rows: Overrides ``resync.max_rows``.
        full_revalidation: Validate whole comparisons afterwards (needs Spark; ``spark``
            or a session built from the config).
        out_dir: Where files go (default ``replcheck-out``).
        spark: The Spark session (or a `LazySparkSession`) for a full re-validation.
        result_file: Where ``result_document`` was read: masked sensitive keys are resolved
            with the ``mask.key`` beside it (or ``validation.mask_key``).

    Raises:
        ResyncRefused: A safety limit was exceeded without ``force``.
        ConfigError: A named comparison is not in the result or the config.
    """
    out_dir = out_dir or Path("replcheck-out")
    options = ResyncOptions(
        tuple(comparisons or ()), apply, force, max_rows, full_revalidation, out_dir
    )
    started = dt.datetime.now(dt.UTC)
    check_result_age(result_document, config, force, started)
    requests = _requests(config, result_document, options.comparisons)
    check_row_limit(requests, options.max_rows or config.resync.max_rows, force)
    run_id = f"{started:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
    finished = str(result_document.get("finished", ""))
    key_id = result_document.get("mask_key_id")
    run = _Run(config, options, run_id, finished, spark, result_file, key_id)
    done = [_resync_comparison(run, request) for request in requests]
    records = [record for _, record in done if record is not None]
    if records:
        audit_store(config, out_dir).append(records)
    full = _full_revalidation(run, [c for c, _ in done])
    resynced = tuple(_with_full(c, full.get(c.name)) for c, _ in done)
    return ResyncOutcome(
        started=started.isoformat(),
        finished=dt.datetime.now(dt.UTC).isoformat(),
        user=_user(),
        result_finished=finished,
        comparisons=resynced,
        full_revalidation=full,
    )


def check_result_age(
    document: dict[str, Any], config: ValidatorConfig, force: bool, now: dt.datetime
) -> None:
    """Refuse a result older than ``resync.max_result_age_h`` unless forced."""
    finished = dt.datetime.fromisoformat(str(document["finished"]))
    if finished.tzinfo is None:
        finished = finished.replace(tzinfo=dt.UTC)
    age_h = (now - finished).total_seconds() / 3600
    if age_h < -CLOCK_SKEW_H and not force:
        raise ResyncRefused(
            f"the result says it finished {-age_h:.1f} h from now ({document['finished']}):"
            " a result from the future is edited or made on a wrong clock, so its age"
            " cannot be trusted; validate again, or pass --force",
            {"limit": "resync.max_result_age_h"},
        )
    limit = config.resync.max_result_age_h
    if age_h > limit and not force:
        raise ResyncRefused(
            f"the result finished {age_h:.1f} h ago, more than resync.max_result_age_h"
            f" ({limit:g} h): the differences may be stale; validate again, or pass --force"
            " to re-sync from this result anyway",
            {"limit": "resync.max_result_age_h"},
        )
    if age_h > limit:
        log.warning("re-syncing from a result %.1f h old (forced)", age_h)


def check_row_limit(requests: Sequence[_Request], limit: int, force: bool) -> None:
    """Refuse a comparison with more than ``limit`` keys to repair unless forced."""
    for request in requests:
        if len(request.keys) > limit and not force:
            raise ResyncRefused(
                f"comparison {request.comparison.name}: {len(request.keys):,} keys to repair,"
                f" more than the limit of {limit:,} (resync.max_rows or --max-rows); pass"
                " --force to repair them anyway",
                {"comparison": request.comparison.name, "limit": "resync.max_rows"},
            )


def _requests(
    config: ValidatorConfig, document: dict[str, Any], names: Sequence[str]
) -> list[_Request]:
    entries = {entry["name"]: entry for entry in document["comparisons"]}
    unknown = [name for name in names if name not in entries]
    if unknown:
        raise ConfigError(
            f"the result has no comparison named {', '.join(unknown)}; it has:"
            f" {', '.join(entries) or 'none'}"
        )
    chosen = list(names) or [n for n, e in entries.items() if e["status"] == "differences"]
    return [_request(_same_sides(config, entries[name]), entries[name]) for name in chosen]


def _same_sides(config: ValidatorConfig, entry: dict[str, Any]) -> ComparisonConfig:
    """The config's comparison of a result entry, refused unless it compares the same sides
    (a result from another config would repair the wrong table)."""
    comparison = config.comparison(entry["name"])
    found = (entry["source"], entry["target"])
    configured = (comparison.source_label, comparison.target_label)
    if found != configured:
        raise ConfigError(
            f"comparison {comparison.name}: the result compared {found[0]} with {found[1]},"
            f" the config compares {configured[0]} with {configured[1]}; re-sync with the"
            " config the result was made with, or validate again"
        )
    return comparison


def _request(comparison: ComparisonConfig, entry: dict[str, Any]) -> _Request:
    details = entry["differences"]
    keys = tuple(tuple(d["key"]) for d in details if d["kind"] in REPAIRABLE)
    skipped = {}
    duplicates = sum(1 for d in details if d["kind"] == "duplicate_key")
    if duplicates:
        skipped["duplicate_key"] = duplicates
    undetailed = entry["differences_total"] - len(details)
    if undetailed > 0:
        skipped["not_detailed"] = undetailed
    if entry["status"] == "error":
        skipped["not_validated"] = 1
    at_source = frozenset(
        tuple(d["key"]) for d in details if d["kind"] in ("missing_in_target", "changed")
    )
    return _Request(comparison, tuple(dict.fromkeys(keys)), skipped, at_source)


def _resync_comparison(run: _Run, request: _Request) -> tuple[ComparisonResync, AuditRecord | None]:
    name = request.comparison.name
    target = run.config.connections[request.comparison.target.connection]
    base = ComparisonResync(
        name, target.display(), Mode.NOTHING, len(request.keys), skipped=request.skipped
    )
    if not request.keys:
        return base, None
    key_columns = request.comparison.key  # the source's primary key when not configured
    try:
        context = prepare(run.config, request.comparison)
        key_columns = context.key
        pairs = _typed_pairs(run, context, request.keys)
        unresolved = len({k for k in request.keys if k in request.at_source} - dict(pairs).keys())
        claimed = _Claimed(request.at_source, unresolved)
        if context.target.is_lake:
            done = _resync_lake(run, context, pairs, base, claimed)
        else:
            done = _resync_database(run, context, pairs, base, claimed)
    except Exception as exc:  # one comparison's failure must not lose the run's outcome
        log.error("comparison %s could not be re-synced: %s", name, exc)
        done = replace(base, mode=Mode.FAILED, error=_error_text(exc))
    return done, _audit_record(run, done, _audit_keys(request, key_columns))


def _error_text(exc: Exception) -> str:
    """Our errors say what to do; anything else is named by its type, too."""
    return str(exc) if isinstance(exc, ReplcheckError) else f"{type(exc).__name__}: {exc}"


def _typed_pairs(run: _Run, context: ComparisonContext, keys: Sequence[Key]) -> list[KeyPair]:
    """The result's keys with their typed values; keys with masked (sensitive) parts are
    found again by scanning both sides' keys; one found on neither side needs nothing."""
    layout = context.reconciled.layout
    masked = [key for key in keys if any(is_token(part) for part in key)]
    found: dict[Key, TypedKey] = {}
    if masked:
        found = resolve(run.masker(), context.name, layout, masked, all_keys(context))
    return [
        (key, found[key] if key in masked else to_typed_key(key, layout, context.name))
        for key in keys
        if key in found or key not in masked
    ]


@dataclass(frozen=True, slots=True)
class _Claimed:
    """The keys the result says the source has, and how many of them (sensitive ones)
    could not be found again on either side."""

    at_source: frozenset[Key]
    unresolved: int

    def not_found(
        self, context: ComparisonContext, pairs: list[KeyPair], absent: set[bytes]
    ) -> int:
        """How many keys the source should have were found on neither side."""
        gone = [key for key, typed in pairs if key_bytes_of(context, typed) in absent]
        return self.unresolved + sum(1 for key in gone if key in self.at_source)


def _resync_lake(
    run: _Run,
    context: ComparisonContext,
    pairs: list[KeyPair],
    base: ComparisonResync,
    claimed: _Claimed,
) -> ComparisonResync:
    request_id, apply = f"{run.run_id}.{context.name}", run.options.apply
    repair = resync_lake(context, [typed for _, typed in pairs], request_id, apply)
    absent = {key_bytes_of(context, key) for key in repair.absent}
    shown = _shown_keys(context, pairs)
    actions = [ActionTaken("refresh", shown[key_bytes_of(context, k)]) for k in repair.refreshed]
    actions += [ActionTaken("delete", shown[key_bytes_of(context, k)]) for k in repair.deleted]
    done = replace(
        base,
        mode=Mode.REFRESHED if apply else Mode.DRY_RUN,
        actions=tuple(actions),
        not_found=claimed.not_found(context, pairs, absent),
        source_position=context.source.describe_position(repair.position),
    )
    if not apply or run.options.full_revalidation:
        return done
    timeout = run.config.validation.lake_wait_timeout_s
    return _checked(done, lambda: revalidate_lake(context, pairs, timeout))


def _resync_database(
    run: _Run,
    context: ComparisonContext,
    pairs: list[KeyPair],
    base: ComparisonResync,
    claimed: _Claimed,
) -> ComparisonResync:
    side = open_target(context)
    typed = [t for _, t in pairs]
    shown = _shown_keys(context, pairs)
    if not run.options.apply:
        plan = plan_repairs(context, side, typed)
        path = run.options.out_dir / f"repair-{_file_safe(context.name)}.sql"
        write_repair_file(context, side, plan, path, _sql_header(run, context, plan))
        done = replace(base, mode=Mode.DRY_RUN, sql_file=str(path))
    else:
        plan = apply_repairs(context, side, typed, run.config.resync.batch_size)
        done = replace(base, mode=Mode.APPLIED)
    actions = tuple(_action_taken(context, action, shown) for action in plan.actions)
    position = None if plan.position is None else context.source.describe_position(plan.position)
    not_found = claimed.not_found(context, pairs, set(plan.absent))
    done = replace(
        done,
        actions=actions,
        unchanged=plan.unchanged - not_found + claimed.unresolved,
        not_found=not_found,
        source_position=position,
    )
    if not run.options.apply or run.options.full_revalidation:
        return done
    return _checked(done, lambda: revalidate_database(run.config, context, side, pairs))


def _action_taken(
    context: ComparisonContext, action: RepairAction, shown: dict[bytes, Key]
) -> ActionTaken:
    key = shown.get(key_bytes_of(context, action.key))
    if key is None:  # a key re-read in another form than the result showed it
        key = masked_key(display_key(action.key), context.key, context.sensitive)
    columns = tuple(action.values) if action.kind == "update" else ()
    return ActionTaken(action.kind, key, columns)


def _shown_keys(context: ComparisonContext, pairs: Sequence[KeyPair]) -> dict[bytes, Key]:
    """Canonical key bytes -> the key as the result showed it (sensitive parts masked)."""
    sensitive = context.sensitive
    return {
        key_bytes_of(context, typed): masked_key(shown, context.key, sensitive)
        for shown, typed in pairs
    }


def _checked(done: ComparisonResync, revalidate: Callable[[], KeyCheck]) -> ComparisonResync:
    """``done`` with its re-validation; one that fails keeps what was written, with why."""
    try:
        check = revalidate()
    except Exception as exc:  # the repairs are written: the outcome must say so
        log.error("comparison %s: re-validation failed: %s", done.name, exc)
        return replace(done, error=f"re-validation failed: {_error_text(exc)}")
    return replace(
        done,
        revalidation=Revalidation.KEYS,
        remaining=check.differences,
        remaining_total=len(check.differences),
        in_flight=check.in_flight,
    )


def _full_revalidation(run: _Run, done: Sequence[ComparisonResync]) -> dict[str, dict[str, Any]]:
    names = [c.name for c in done if c.mode in (Mode.REFRESHED, Mode.APPLIED)]
    if not run.options.full_revalidation or not names:
        return {}
    from validator.engines.sides.spark.session import LazySparkSession

    spark = run.spark or LazySparkSession.for_config(run.config.spark)  # database engine: none
    return {name: revalidate_full(spark, run.config, name) for name in names}


def _with_full(done: ComparisonResync, result: dict[str, Any] | None) -> ComparisonResync:
    if result is None:
        return done
    if result["status"] == "error":
        return replace(done, error=f"full re-validation failed: {result['error']}")
    return replace(
        done,
        revalidation=Revalidation.FULL,
        remaining_total=int(result["differences_total"]),
        in_flight=tuple(tuple(k) for k in result["in_flight"]),
    )


def _sql_header(run: _Run, context: ComparisonContext, plan: RepairPlan) -> str:
    kinds = ("insert", "update", "delete")
    counts = ", ".join(f"{sum(a.kind == k for a in plan.actions)} {k}" for k in kinds)
    now = dt.datetime.now(dt.UTC)
    return "\n".join(
        [
            f"replcheck repair SQL for comparison {context.name} (dry run: nothing was applied)",
            f"target: {context.target.display()} table {context.comparison.target.table}",
            f"source read at {_position_words(context, plan.position)}; generated"
            f" {now:%Y-%m-%d %H:%M:%S} UTC"
            f" by {_user()} (re-sync {run.run_id}, result of {run.result_finished})",
            f"{counts}; {plan.unchanged} key(s) already equal",
            "review, then apply with: replcheck resync ... --apply (or run this file)",
            "sensitive columns appear as :placeholders: bind their values when running by hand",
        ]
    )


def _audit_record(run: _Run, done: ComparisonResync, keys: tuple[Key, ...]) -> AuditRecord:
    return AuditRecord(
        run_id=run.run_id,
        at=dt.datetime.now(dt.UTC),
        user=_user(),
        comparison=done.name,
        target=done.target,
        mode=done.mode.value,
        forced=run.options.force,
        keys=keys,
        actions=done.action_counts,
        source_position=done.source_position,
        result_finished=run.result_finished,
        error=done.error,
    )


def _audit_keys(request: _Request, key_columns: Sequence[str]) -> tuple[Key, ...]:
    """The request's keys for the audit, parts of sensitive key columns masked; a key
    whose columns are unknown (wrong shape) is masked whole when any column is sensitive."""
    sensitive = frozenset(request.comparison.columns.sensitive)
    return tuple(
        masked_key(key, key_columns, sensitive)
        if len(key) == len(key_columns)
        else tuple(MASK for _ in key)
        if sensitive
        else key
        for key in request.keys
    )


def _position_words(context: ComparisonContext, position: int | None) -> str:
    if position is None:
        return "no known position"
    return f"position {context.source.describe_position(position)}"


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name (e.g. a container's numeric user)
        return "unknown"


def _file_safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)
