"""The ``replcheck`` command line: the only place that turns errors into exit codes.

Exit codes: 0 in sync (or the command succeeded), 1 differences found, 2 could not run
(bad input, unreachable database, a feature not available yet); ``hana log-position`` exits
3 when the log position asked about is gone. A configured ``spark.remote`` no Spark Connect
server answers at (``SparkUnreachableError``) stops the whole run with 2, like an
unreachable database.
"""

from __future__ import annotations

import atexit
import faulthandler
import inspect
import logging
import os
import re
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple, NoReturn

import typer
from typer.core import TyperGroup
from typer.exceptions import TyperException

from cdc_core.config import mask_url
from cdc_core.disk_full import is_disk_full
from cdc_core.errors import ConfigError, ReplcheckError
from validator.commands.package import PACKAGES
from validator.demo.setup import DemoSource
from validator.result import Coverage, Status

if TYPE_CHECKING:
    from cdc_core.lake_location import LakeLocation
    from validator.key_masks import KeyMasker

EXIT_OK = 0
EXIT_DIFFERENCES = 1
EXIT_ERROR = 2
EXIT_LOG_GONE = 3


class _CommandGroup(TyperGroup):
    """Lists each command by its docstring's first paragraph as one line of text: typer's
    rich help (its default) keeps the paragraph's line breaks in the command list, so a
    summary broke where its docstring wrapped ("... exit 0" / "all repaired ...")."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:  # typer's own (vendored) click
        command = super().get_command(ctx, cmd_name)
        if command is not None and command.short_help is None and command.help:
            first = inspect.cleandoc(command.help).split("\n\n")[0]
            command.short_help = " ".join(first.split())
        return command


app = typer.Typer(
    name="replcheck",
    help="Prove that a replicated copy of a database equals its source, and repair what differs.",
    no_args_is_help=True,
    add_completion=False,
    cls=_CommandGroup,
)
_VERBOSE = False


def _print_version(asked: bool) -> None:
    """``--version``: the installed replcheck's version, then exit 0."""
    if asked:
        from importlib import metadata

        try:
            version = metadata.version("replcheck")
        except metadata.PackageNotFoundError:
            version = "unknown (not installed: run from a checkout)"
        typer.echo(f"replcheck {version}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def options(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show Spark's log and full tracebacks.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Prove that a replicated copy of a database equals its source, and repair what differs."""
    global _VERBOSE
    _VERBOSE = verbose


cdc_app = typer.Typer(
    help="Change data capture (from the source's log, or by triggers) into a Delta lake or a"
    " database.",
    no_args_is_help=True,
    cls=_CommandGroup,
)
app.add_typer(cdc_app, name="cdc")
hana_app = typer.Typer(help="Checks of SAP HANA sources.", no_args_is_help=True, cls=_CommandGroup)
app.add_typer(hana_app, name="hana")


@app.command("check-contract")
def check_contract_command(
    spark: Annotated[
        bool | None,
        typer.Option(
            help="Also replay the vectors through Spark (default: when pyspark is installed;"
            " --spark: it must be)."
        ),
    ] = None,
    master: Annotated[str, typer.Option(help="Spark master for the check.")] = "local[2]",
) -> None:
    """Check that this installation reproduces the hash contract's golden vectors (each
    engine that is installed; the others are named as skipped)."""
    from validator.commands.check_contract import check_contract

    session = None
    if spark is not False:
        from validator.engines.sides.spark.session import build_spark_session

        def session() -> object:
            return build_spark_session(
                app_name="replcheck-check-contract", master=master, verbose=_VERBOSE
            )

    checks = check_contract(session, spark_required=spark is True)
    for check in checks:
        if check.skipped is not None:
            typer.echo(f"{check.engine:>7}: skipped: {check.skipped}")
            continue
        verdict = "ok" if check.passed else f"{len(check.mismatched)} MISMATCHED"
        typer.echo(f"{check.engine:>7}: {check.vectors} golden vectors, {verdict}")
        for vector_id in check.mismatched[:20]:
            typer.echo(f"         mismatch: {vector_id}")
    raise typer.Exit(EXIT_OK if all(c.passed for c in checks) else EXIT_DIFFERENCES)


def _overrides(pairs: list[str]) -> dict[str, str]:
    result = {}
    for pair in pairs:
        path, sep, value = pair.partition("=")
        if not sep or not path:
            raise ConfigError(f"--set takes path=value, not {pair!r}")
        result[path] = value
    return result


def _run_validation(config_path: Path, names: list[str], sets: list[str]) -> Validated:
    from validator.config import load_validator_config
    from validator.engines.sides.spark.session import LazySparkSession, under_spark_submit
    from validator.job import validate as run_validation
    from validator.key_masks import KeyMasker

    config = load_validator_config(config_path, _overrides(sets))
    for name in names:
        config.comparison(name)  # unknown names fail before anything starts
    typer.echo(f"validating {len(names) or len(config.comparisons)} comparison(s)...", err=True)
    spark = LazySparkSession.for_config(config.spark, _VERBOSE)
    if under_spark_submit():
        typer.echo(f"replcheck imported from {Path(__file__).parents[1]}", err=True)
        spark()  # spark-submit started the JVM already: use it
    masker = KeyMasker.for_run(config.validation.mask_key)
    # The run's history is kept in the first lake connection of the config, if any.
    lake = next((c.lake for c in config.connections.values() if c.lake is not None), None)
    return Validated(run_validation(spark, config, names, masker), masker, lake)


class Validated(NamedTuple):
    """A run's result document, the secret its sensitive key parts are hashed under, and the
    lake its history goes to (the config is loaded once per command)."""

    document: dict[str, Any]
    masker: KeyMasker
    lake: Path | LakeLocation | None


NOT_COMPARED = "not compared"  # in place of the row counts of a comparison its error stopped


def _print_summary(document: dict[str, Any]) -> None:
    from reports.model import compared, schema_counts

    for comparison in document["comparisons"]:
        counts = [f"{k}: {v}" for k, v in sorted(comparison["counts_by_kind"].items())]
        counts += [f"column {k}: {v}" for k, v in schema_counts(comparison).items()]
        detail = comparison["error"] or ", ".join(counts) or "no differences"
        failed = _failed_expectations(comparison)
        if failed:
            detail += f"; {failed} expectation(s) failed"
        detail += _how_checked(comparison)
        counted = f"{comparison['source_rows']:>10} / {comparison['target_rows']:<10}"
        typer.echo(
            f"{comparison['name']:<24} {comparison['status']:<12} "
            f"{counted if compared(comparison) else f'{NOT_COMPARED:<23}'} {detail}"
        )
    typer.echo(f"overall: {document['status']} ({document['duration_s']:.1f} s)")


def _how_checked(comparison: dict[str, Any]) -> str:
    """What a comparison checked (a full run, or which leaves an incremental run re-hashed),
    the engine that checked it and why; nothing when it could not be validated."""
    if comparison["status"] == Status.ERROR:
        return ""
    coverage = comparison.get("coverage")
    checked = Coverage(**coverage).summary() if coverage else "full run"
    why = comparison.get("engine_reason")
    said = f" ({why})" if why and why not in checked else ""  # the coverage may say it
    return f"; {checked}; engine {comparison.get('engine', 'spark')}{said}"


def _failed_expectations(comparison: dict[str, Any]) -> int:
    return sum(1 for e in comparison.get("expectations", []) if not e["success"])


def gate_verdict(document: dict[str, Any], max_differences: int) -> tuple[int, str]:
    """The gate's exit code and its one-line verdict for a result document.

    Differences (rows and schema differences) are tolerated up to ``max_differences`` in
    total, which is for rows a copy may lag behind in; a schema difference (a column on one
    side only, or of types that cannot be compared) and a failed data-quality expectation
    never are.
    """
    from reports.model import schema_counts, total_differences

    if document["status"] == Status.ERROR:
        return EXIT_ERROR, "gate FAILED: a comparison could not be validated"
    total = sum(total_differences(c) for c in document["comparisons"])
    schema = sum(sum(schema_counts(c).values()) for c in document["comparisons"])
    failed = sum(_failed_expectations(c) for c in document["comparisons"])
    passed = total <= max_differences and not schema and not failed
    verdict = f"gate {'passed' if passed else 'FAILED'}: {total} difference(s), "
    verdict += f"{max_differences} allowed"
    if schema:
        verdict += f"; {schema} of them schema difference(s), never allowed"
    if failed:
        verdict += f"; {failed} expectation(s) failed"
    return (EXIT_OK if passed else EXIT_DIFFERENCES), verdict


ConfigOption = Annotated[Path, typer.Option("--config", "-c", help="The YAML config file.")]
NamesOption = Annotated[
    list[str], typer.Option("--comparison", help="Only this comparison (repeatable).")
]
SetOption = Annotated[
    list[str], typer.Option("--set", help="Override a config value: path=value (repeatable).")
]
IncrementalOption = Annotated[
    bool,
    typer.Option(
        "--incremental",
        help="Keep the validated digests in the lake and re-hash only the leaves changed"
        " since, plus a sweep (local and hybrid engines, integer keys; validation.incremental;"
        " elsewhere the run is full and says why).",
    ),
]
FullOption = Annotated[
    bool,
    typer.Option(
        "--full", help="Re-hash every leaf this run, and store the digests for later runs."
    ),
]
JUnitOption = Annotated[Path | None, typer.Option(help="Also write JUnit XML here.")]
MarkdownOption = Annotated[
    Path | None, typer.Option(help="Also write a Markdown summary here (a CI step summary).")
]


def _mode_overrides(incremental: bool, full: bool) -> list[str]:
    """``--incremental`` and ``--full`` as the config overrides they stand for."""
    return [
        *(["validation.incremental=true"] if incremental else []),
        *(["validation.force_full=true"] if full else []),
    ]


@app.command()
def validate(
    config: ConfigOption,
    out: Annotated[Path, typer.Option(help="Directory for result.json.")] = Path("replcheck-out"),
    comparison: NamesOption = [],  # noqa: B006 - typer reads the default, never mutates it
    set_: SetOption = [],  # noqa: B006
    incremental: IncrementalOption = False,
    full: FullOption = False,
    junit: JUnitOption = None,
    markdown: MarkdownOption = None,
) -> None:
    """Validate sources against targets; exit 0 in sync, 1 differences, 2 could not validate."""
    from validator.commands.outputs import check_outputs, write_outputs

    check_outputs(out, junit, markdown=markdown)
    sets = [*set_, *_mode_overrides(incremental, full)]
    document, masker, lake = _run_validation(config, comparison, sets)
    outputs = write_outputs(document, out, junit, lake=lake, masker=masker, markdown=markdown)
    _print_summary(document)
    typer.echo("\n".join(outputs.lines()))
    raise typer.Exit(Status(document["status"]).exit_code)


@app.command()
def gate(
    config: ConfigOption,
    max_differences: Annotated[int, typer.Option(help="Differences tolerated in total.")] = 0,
    out: Annotated[Path, typer.Option(help="Directory for result.json.")] = Path("replcheck-out"),
    junit: JUnitOption = None,
    markdown: MarkdownOption = None,
    comparison: NamesOption = [],  # noqa: B006
    set_: SetOption = [],  # noqa: B006
    incremental: IncrementalOption = False,
    full: FullOption = False,
) -> None:
    """CI gate: exit 1 when more than --max-differences differences are found, a column
    differs (schema differences are never tolerated) or an expectation failed; 2 on errors."""
    from validator.commands.outputs import check_outputs, write_outputs

    check_outputs(out, junit, markdown=markdown)
    sets = [*set_, *_mode_overrides(incremental, full)]
    document, masker, lake = _run_validation(config, comparison, sets)
    outputs = write_outputs(document, out, junit, lake=lake, masker=masker, markdown=markdown)
    _print_summary(document)
    typer.echo("\n".join(outputs.lines()))
    code, verdict = gate_verdict(document, max_differences)
    if code != EXIT_ERROR:
        typer.echo(verdict)
    raise typer.Exit(code)


@app.command()
def demo(
    workdir: Annotated[Path, typer.Option(help="Where the demo writes its files.")] = Path(
        "replcheck-demo"
    ),
    source: Annotated[
        DemoSource,
        typer.Option(
            help="sqlite: an embedded SQLite source with trigger capture, replicated into the"
            " lake, drifted, validated (in DuckDB: no Spark), re-synced and validated again;"
            " duckdb: an embedded DuckDB source and a drifted lake copy, validated in Spark"
            " (replcheck[spark]); mariadb: a private MariaDB server replicated into the lake"
            " by the CDC pipeline."
        ),
    ] = DemoSource.SQLITE,
) -> None:
    """Run the demo: a source, a drifted Delta lake copy, validation (see --source)."""
    from validator.commands.outputs import check_outputs, write_outputs
    from validator.demo.setup import found_differences
    from validator.demo.start import demo_source

    check_outputs(workdir, option="--workdir")
    with demo_source(source, workdir.resolve(), lambda line: typer.echo(line, err=True)) as setup:
        typer.echo(f"demo source, lake and config written under {workdir.resolve()}", err=True)
        document, masker, lake = _run_validation(setup.config, [], [])
        outputs = write_outputs(document, workdir.resolve() / "out", lake=lake, masker=masker)
        _print_summary(document)
        typer.echo(f"result: {outputs.result}\nreport: {outputs.html}")
        _demo_ran(document)
        found = found_differences(document)
        if found != setup.expected:
            typer.echo(
                f"demo FAILED: missed {sorted(setup.expected - found)}, "
                f"unexpected {sorted(found - setup.expected)}",
                err=True,
            )
            raise typer.Exit(EXIT_DIFFERENCES)
        typer.echo(f"demo: exactly the {len(found)} injected differences were found")
        if setup.repairs:
            _demo_repairs(setup.config, outputs.result)
    typer.echo("demo ok")


def _demo_ran(document: dict[str, Any]) -> None:
    """Exit 2 when a comparison of the demo could not run (a missing extra, say: its line
    above names the ``pip install``), never 1: nothing was found to differ."""
    if document["status"] == Status.ERROR:
        typer.echo("demo FAILED: a comparison could not run (see its line above)", err=True)
        raise typer.Exit(EXIT_ERROR)


def _demo_repairs(config: Path, result: Path) -> None:
    """The demo's last act: re-sync what the validation found, then validate everything."""
    from validator.commands.outputs import write_outputs
    from validator.commands.resync import ResyncArguments, run_resync, summary_lines

    outcome, files = run_resync(ResyncArguments(config, result, apply=True, verbose=_VERBOSE))
    for line in summary_lines(outcome):
        typer.echo(f"resync: {line}")
    document, masker, lake = _run_validation(config, [], [])
    outputs = write_outputs(document, result.parent.parent / "after", lake=lake, masker=masker)
    _print_summary(document)
    typer.echo(f"re-sync report: {files.html}\nresult after the re-sync: {outputs.result}")
    _demo_ran(document)
    if document["status"] != "in_sync":
        typer.echo("demo FAILED: the lake is not in sync after the re-sync", err=True)
        raise typer.Exit(EXIT_DIFFERENCES)
    typer.echo("demo: the re-sync repaired them; the lake equals the source again")


@app.command()
def resync(
    config: ConfigOption,
    result: Annotated[Path, typer.Option(help="The result.json whose differences to repair.")],
    comparison: NamesOption = [],  # noqa: B006 - typer reads the default, never mutates it
    apply: Annotated[
        bool, typer.Option("--apply", help="Write the repairs (default: a dry run).")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Go beyond resync.max_rows / max_result_age_h.")
    ] = False,
    max_rows: Annotated[
        int | None, typer.Option(help="Most keys to repair per comparison (resync.max_rows).")
    ] = None,
    full_revalidation: Annotated[
        bool, typer.Option("--full-revalidation", help="Validate whole comparisons after.")
    ] = False,
    out: Annotated[
        Path | None, typer.Option(help="Directory for resync.json and SQL (default: result's).")
    ] = None,
    set_: SetOption = [],  # noqa: B006
) -> None:
    """Repair exactly the rows a validation found different, then re-validate them; exit 0
    all repaired (or dry-run SQL written), 1 differences remain, 2 could not re-sync."""
    from validator.commands.resync import ResyncArguments, run_resync, summary_lines

    outcome, files = run_resync(
        ResyncArguments(
            config=config,
            result=result,
            comparisons=comparison,
            apply=apply,
            force=force,
            max_rows=max_rows,
            full_revalidation=full_revalidation,
            out=out,
            overrides=_overrides(set_),
            verbose=_VERBOSE,
        )
    )
    for line in summary_lines(outcome):
        typer.echo(line)
    typer.echo(f"outcome: {files.outcome}\nreport: {files.html}")
    raise typer.Exit(outcome.exit_code)


@app.command()
def report(
    result: Annotated[Path, typer.Argument(help="A result.json written by validate or gate.")],
    html: Annotated[Path | None, typer.Option(help="Write the HTML report here.")] = None,
    junit: Annotated[Path | None, typer.Option(help="Write JUnit XML here.")] = None,
    markdown: Annotated[Path | None, typer.Option(help="Write a Markdown summary here.")] = None,
) -> None:
    """Render an existing result.json as HTML, JUnit XML or Markdown."""
    from cdc_core.files import check_output_file, write_atomic
    from reports.html import build_html_report
    from reports.junit import build_junit
    from reports.model import read_result
    from validator.commands.outputs import render_markdown

    renderings = [
        (path, option, render)
        for path, option, render in (
            (html, "--html", build_html_report),
            (junit, "--junit", build_junit),
            (markdown, "--markdown", render_markdown),
        )
        if path is not None
    ]
    if not renderings:
        raise ConfigError("say what to render: --html FILE, --junit FILE and/or --markdown FILE")
    if not result.is_file():
        raise ConfigError(f"result file {result} does not exist; give a validate run's result.json")
    for path, option, _ in renderings:
        check_output_file(path, option)
    document = read_result(result)
    for path, _, render in renderings:
        write_atomic(path, render(document))
        typer.echo(f"wrote {path}")


@cdc_app.command("run")
def cdc_run(
    config: ConfigOption,
    pipeline: Annotated[str, typer.Option(help="The pipeline's name in the config.")],
    until_caught_up: Annotated[
        bool, typer.Option(help="Stop once everything committed at the start is in the lake.")
    ] = False,
    set_: SetOption = [],  # noqa: B006 - typer reads the default, never mutates it
) -> None:
    """Run a CDC pipeline from a source's log into the lake (SIGTERM/SIGINT stop it cleanly)."""
    from validator.commands.cdc import reached_line, run_pipeline

    overrides = _overrides(set_)
    reached = run_pipeline(config, pipeline, until_caught_up=until_caught_up, overrides=overrides)
    typer.echo(reached_line(config, pipeline, reached, overrides))


@cdc_app.command("status")
def cdc_status(
    config: ConfigOption,
    pipeline: Annotated[str, typer.Option(help="The pipeline's name in the config.")],
    set_: SetOption = [],  # noqa: B006 - typer reads the default, never mutates it
) -> None:
    """How a pipeline stands (position, lag, last commit, log retention, state directory);
    exit 0 healthy, 1 attention needed, 2 cannot tell."""
    from validator.commands.cdc_status import pipeline_status

    status = pipeline_status(config, pipeline, _overrides(set_))
    for line in status.lines():
        typer.echo(line)
    raise typer.Exit(int(status.health))


@hana_app.command("log-position")
def hana_log_position(
    config: ConfigOption,
    connection: Annotated[str, typer.Option(help="The HANA connection's name in the config.")],
    position: Annotated[int, typer.Option(min=0, help="The log position to resume at.")],
    volume: Annotated[
        int, typer.Option(min=1, help="Its log volume (VOLUME_ID in M_LOG_SEGMENTS).")
    ],
    partition: Annotated[int, typer.Option(min=0, help="Its log partition.")] = 0,
) -> None:
    """Say whether a HANA log position is online, in a log backup, or gone; exit 0 online or
    archived, 3 gone, 2 could not check."""
    from connectors.hana.log_retention import Availability
    from validator.commands.hana_log import describe_location, locate_position

    location = locate_position(config, connection, position, volume=volume, partition=partition)
    typer.echo(describe_location(location, volume))
    raise typer.Exit(EXIT_LOG_GONE if location.kind is Availability.GONE else EXIT_OK)


DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Print the statements only; change nothing.")
]


@cdc_app.command("install-capture")
def cdc_install_capture(
    config: ConfigOption,
    pipeline: Annotated[str, typer.Option(help="The pipeline's name in the config.")],
    dry_run: DryRunOption = False,
    set_: SetOption = [],  # noqa: B006 - typer reads the default, never mutates it
) -> None:
    """Set up trigger capture (logging tables, triggers) of a pipeline's tables, printing
    each statement (idempotent)."""
    _change_capture(config, pipeline, "install", dry_run, set_)


@cdc_app.command("remove-capture")
def cdc_remove_capture(
    config: ConfigOption,
    pipeline: Annotated[str, typer.Option(help="The pipeline's name in the config.")],
    dry_run: DryRunOption = False,
    set_: SetOption = [],  # noqa: B006 - typer reads the default, never mutates it
) -> None:
    """Remove a pipeline's trigger capture, printing each statement (idempotent)."""
    _change_capture(config, pipeline, "remove", dry_run, set_)


def _change_capture(
    config: Path,
    pipeline: str,
    action: Literal["install", "remove"],
    dry_run: bool,
    sets: list[str],
) -> None:
    from validator.commands.capture import change_capture

    plan = change_capture(
        config, pipeline, action, typer.echo, dry_run=dry_run, overrides=_overrides(sets)
    )
    done = "would run" if dry_run else "ran"
    typer.echo(
        f"-- {action} capture of {', '.join(plan.tables)}: {done} {len(plan.statements)} statements"
    )


def _configure_logging() -> None:
    """Progress (INFO: comparisons, phases, rows, rates, what a run waits for) from
    replcheck's own packages; warnings from everything else (Spark's Python side, drivers).

    One handler on the root logger, so records keep propagating (nothing is hidden from a
    host's own handlers); the packages' loggers let INFO through, the others stay at the
    root's WARNING. Spark's JVM logs through log4j, not here (``engines.spark.session``).
    """
    root = logging.getLogger()
    if not root.handlers:  # this process's logging is ours to set (as basicConfig would)
        root.setLevel(logging.WARNING)
    # Replaced, not added: run() may be called many times in one process.
    root.handlers = [h for h in root.handlers if not isinstance(h, _StandardError)]
    handler = _StandardError()
    handler.setFormatter(_LineFormatter())
    root.addHandler(handler)
    for name in PACKAGES:
        logging.getLogger(name).setLevel(logging.INFO)


class _LineFormatter(logging.Formatter):
    """Progress as ``HH:MM:SS message``; a warning or an error with its level and logger."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(message)s", "%H:%M:%S")
        self._problem = logging.Formatter("%(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        if record.levelno >= logging.WARNING:
            return self._problem.format(record)
        return super().format(record)


class _StandardError(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record comes (not when it was made)."""

    @property
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass  # StreamHandler's constructor sets it; the property decides


@app.command()
def package(
    out: Annotated[Path, typer.Option(help="Directory for the bundle.")] = Path("dist"),
) -> None:
    """Bundle replcheck for spark-submit on a cluster (see the README)."""
    from validator.commands.package import build_bundle

    bundle = build_bundle(out)
    typer.echo(f"wrote {bundle.archive} and {bundle.launcher}")
    typer.echo(
        f"run: spark-submit --master yarn --py-files {bundle.archive} {bundle.launcher} "
        "validate --config FILE --out DIR"
    )


def main() -> None:
    """Console-script entry point. ``kill -USR1 <pid>`` prints every thread's stack to
    stderr (where a long run is stuck), and the run goes on."""
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    _exit(run(sys.argv[1:]))


def _exit(code: int) -> NoReturn:
    """End the process with ``code`` once its exit handlers ran and its output is flushed,
    without the interpreter's teardown: freeing pyarrow's, DuckDB's and pandas' modules takes
    0.2 s (a tenth of an incremental validation) and nothing a finished command needs. While
    another thread still works, the ordinary exit waits for it."""
    others = [t for t in threading.enumerate() if t is not threading.current_thread()]
    if any(not t.daemon for t in others):
        sys.exit(code)
    atexit._run_exitfuncs()  # logging's shutdown, temporary files, a Spark session's stop
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run(argv: list[str]) -> int:
    """Run one command and return its exit code: the only place exceptions become codes.

    1 is returned only by the commands themselves, for differences; every failure is 2 with
    a one-line message (the traceback of an unexpected one only under ``--verbose``).
    """
    _configure_logging()
    try:
        code = app(args=argv, prog_name="replcheck", standalone_mode=False)
    except TyperException as exc:
        _show_usage_error(exc)
        return EXIT_ERROR
    except (KeyboardInterrupt, typer.Abort):
        typer.echo("error: interrupted", err=True)
        return EXIT_ERROR
    except ReplcheckError as exc:
        typer.echo(f"error: {exc}", err=True)
        return exc.exit_code
    except BaseException as exc:  # a Rust panic (pyo3's PanicException) is no Exception
        if is_disk_full(exc):  # a write no ``cdc_core.disk_full.naming_full_disk`` covers
            typer.echo(f"error: {_disk_full(exc)}", err=True)
        elif isinstance(exc, OSError):
            typer.echo(f"error: {_os_error(exc)}", err=True)
        elif isinstance(exc, Exception):
            typer.echo(f"error: {_unexpected(exc)}", err=True)
        else:
            raise
        return EXIT_ERROR
    return code if isinstance(code, int) else EXIT_OK


def _show_usage_error(exc: TyperException) -> None:
    show = getattr(exc, "show", None)
    if callable(show):
        show()  # click's usage message: the command's usage line and what is wrong
    else:
        typer.echo(f"error: {exc}", err=True)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # colours in delta-rs's error chains
_QUERY = re.compile(r"\?\S*")


def _os_error(exc: OSError) -> str:
    """A file or network failure in one line: what, where, and the fix's direction."""
    where = " -> ".join(str(name) for name in (exc.filename, exc.filename2) if name)
    # delta-rs's errors have no strerror: their first line says what failed (its URLs
    # without query strings, which may hold an Azure SAS token).
    said = _QUERY.sub("", _ANSI.sub("", str(exc))).strip().splitlines()
    what = exc.strerror or (mask_url(said[0]) if said else type(exc).__name__)
    return f"{where}: {what}; check the path and its permissions" if where else str(what)


def _disk_full(exc: BaseException) -> str:
    """A full disk in one line: the file, when the error names it, and the fix."""
    where = getattr(exc, "filename", None)
    if where:
        return f"no space left on device writing {where}: free space there and run again"
    return "no space left on device: free space where replcheck writes, and run again"


def _unexpected(exc: Exception) -> str:
    """An exception replcheck did not expect: its type and where, never its text (it could
    carry a value of a sensitive column); the traceback under ``--verbose``."""
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" in {Path(frame.filename).name}:{frame.lineno}" if frame else ""
    if _VERBOSE:
        traceback.print_exception(exc, file=sys.stderr)
    hint = "" if _VERBOSE else "; run with --verbose for the traceback"
    return f"unexpected {type(exc).__name__}{where} (a replcheck bug: please report it){hint}"


if __name__ == "__main__":
    main()
