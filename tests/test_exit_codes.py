"""Exit codes: 1 means "differences found" and nothing else; every failure is 2, one line.

A CI gate trusts the exit code, so each bad input below (one table over every command) must
exit 2 with a one-line message that names the problem, no traceback, and, for output
locations, before any validation starts. The commands run in-process through
``validator.cli.run``, the function the console script calls.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer

from tests.reports.sample import make_result
from tests.validator.resync.helpers import result_for, write_config
from validator import cli
from validator.config import load_validator_config


@dataclass(frozen=True)
class Case:
    """A command line built in a work directory, and what its message must say."""

    command: str
    argv: Callable[[Path], list[str]]
    says: str


def _config(work: Path) -> str:
    """A validation config whose source does not exist: nothing may get as far as it."""
    return str(
        write_config(
            work / "c.yaml",
            {"src": f"sqlite:///{work / 'none.db'}", "tgt": f"sqlite:///{work / 'tgt.db'}"},
            "  - name: people\n    source: {connection: src, table: people}\n"
            "    target: {connection: tgt, table: people}\n    key: [id]",
        )
    )


def _cdc_config(
    work: Path,
    state: str = "state",
    lake: str = "lake",
    source: str = "postgresql://u@127.0.0.1:1/db",
    target: str = "lake",
) -> str:
    path = work / "p.yaml"
    path.write_text(
        "connections:\n"
        f"  src: {{url: '{source}'}}\n"
        f"  lake: {{lake: '{work / lake}'}}\n"
        f"  db: {{url: 'sqlite:///{work / 'target.db'}'}}\n"
        "pipelines:\n"
        f"  - {{name: p, source: src, target: {target}, tables: [public.a],"
        f" state_dir: '{work / state}'}}\n",
        encoding="utf-8",
    )
    return str(path)


def _hana_config(work: Path) -> str:
    path = work / "h.yaml"
    path.write_text(
        "connections:\n"
        "  h01: {url: 'hana+hdbcli://monitor@127.0.0.1:1'}\n"
        "  pg: {url: 'postgresql://u@127.0.0.1:1/db'}\n",
        encoding="utf-8",
    )
    return str(path)


def _hana_log(work: Path, connection: str, position: str = "1") -> list[str]:
    return [
        *("-c", _hana_config(work), "--connection", connection),
        *("--position", position, "--volume", "2"),
    ]


def _result(work: Path, *, future: bool = False, other_sides: bool = False) -> str:
    config = load_validator_config(Path(_config(work)), environ={})
    finished = dt.datetime.now(dt.UTC) + dt.timedelta(days=1 if future else 0)
    document = result_for(config.comparison("people"), [("changed", ("2",))], finished)
    if other_sides:
        document["comparisons"][0]["target"] = "elsewhere:people"
    path = work / "result.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


def _sample_result(work: Path) -> str:
    path = work / "sample.json"
    path.write_text(json.dumps(make_result(comparisons=1, differences=2)), encoding="utf-8")
    return str(path)


def _fixtures(work: Path) -> None:
    (work / "afile").write_text("x")
    (work / "dangling").symlink_to(work / "nowhere")
    (work / "adir").mkdir()


CASES = [
    Case("validate", lambda w: ["-c", _config(w), "--out", str(w / "afile")], "is a file"),
    Case("validate", lambda w: ["-c", _config(w), "--out", str(w / "dangling")], "to nowhere"),
    Case("validate", lambda w: ["-c", _config(w), "--out", str(w / "afile/x")], "afile"),
    Case("validate", lambda w: ["-c", str(w / "missing.yaml")], "missing.yaml"),
    Case("validate", lambda w: ["-c", _config(w), "--set", "x=!!python/object:os.system"], "--set"),
    Case("validate", lambda w: ["-c", _config(w), "--set", "x=[1,"], "not plain YAML"),
    Case("validate", lambda w: ["-c", _config(w), "--bogus"], "--bogus"),
    Case("gate", lambda w: ["-c", _config(w), "--junit", str(w / "afile/j.xml")], "--junit"),
    Case("gate", lambda w: ["-c", _config(w), "--junit", str(w / "adir")], "is a directory"),
    Case("gate", lambda w: ["-c", _config(w), "--out", str(w / "afile")], "is a file"),
    Case("report", lambda w: [str(w / "none.json"), "--html", str(w / "r.html")], "none.json"),
    Case("report", lambda w: [_sample_result(w), "--html", str(w / "adir")], "is a directory"),
    Case("report", lambda w: [_sample_result(w), "--markdown", str(w / "afile/m")], "afile"),
    Case("report", lambda w: [str(w / "afile"), "--junit", str(w / "j.xml")], "not valid JSON"),
    Case("demo", lambda w: ["--workdir", str(w / "afile")], "--workdir"),
    Case("resync", lambda w: ["-c", _config(w), "--result", str(w / "none.json")], "none.json"),
    Case("resync", lambda w: ["-c", _config(w), "--result", _result(w, future=True)], "future"),
    Case(
        "resync",
        lambda w: ["-c", _config(w), "--result", _result(w, other_sides=True)],
        "elsewhere",
    ),
    Case(
        "resync",
        lambda w: ["-c", _config(w), "--result", _result(w), "--out", str(w / "afile")],
        "is a file",
    ),
    Case(
        "cdc run", lambda w: ["-c", _cdc_config(w, state="afile"), "--pipeline", "p"], "state_dir"
    ),
    Case("cdc run", lambda w: ["-c", _cdc_config(w, lake="afile"), "--pipeline", "p"], "lake"),
    Case("cdc run", lambda w: ["-c", _cdc_config(w), "--pipeline", "nope"], "nope"),
    Case(
        "cdc run",
        lambda w: ["-c", _cdc_config(w, target="db"), "--pipeline", "p"],
        "is a sqlite database",
    ),
    Case("cdc install-capture", lambda w: ["-c", _cdc_config(w), "--pipeline", "nope"], "nope"),
    Case(
        "cdc install-capture",
        lambda w: ["-c", _cdc_config(w), "--pipeline", "p", "--dry-run"],
        "capture=trigger",
    ),
    Case("cdc remove-capture", lambda w: ["-c", _cdc_config(w), "--pipeline", "nope"], "nope"),
    Case(
        "cdc remove-capture",
        lambda w: ["-c", _cdc_config(w, source=f"sqlite:///{w / 'none.db'}"), "--pipeline", "p"],
        "main schema only",
    ),
    Case("cdc status", lambda w: ["-c", _cdc_config(w), "--pipeline", "nope"], "nope"),
    Case("cdc status", lambda w: ["-c", str(w / "missing.yaml"), "--pipeline", "p"], "missing"),
    Case("package", lambda w: ["--out", str(w / "afile")], "afile"),
    Case("check-contract", lambda w: ["--master", "local[2]", "--bogus"], "--bogus"),
    Case("hana log-position", lambda w: _hana_log(w, "nope"), "nope"),
    Case("hana log-position", lambda w: _hana_log(w, "pg"), "not a HANA database"),
    Case("hana log-position", lambda w: _hana_log(w, "h01", "-5"), "--position"),
]


def _commands() -> set[str]:
    group = typer.main.get_command(cli.app)
    names = set()
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        subcommands = getattr(command, "commands", None)
        names |= {f"{name} {sub}" for sub in subcommands} if subcommands else {name}
    return names


def test_every_command_has_bad_inputs_in_the_table() -> None:
    assert _commands() == {case.command for case in CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.command}:{c.says}")
def test_bad_input_exits_2_with_one_line_naming_the_problem(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fixtures(tmp_path)
    code = cli.run([*case.command.split(), *case.argv(tmp_path)])
    printed = capsys.readouterr()
    assert code == 2, printed
    assert "Traceback" not in printed.out + printed.err
    assert "validating" not in printed.err  # refused before any validation started
    errors = [line for line in printed.err.splitlines() if line.lower().startswith("error")]
    assert len(errors) == 1 and case.says in errors[0], printed.err


def test_an_unexpected_exception_is_exit_2_and_its_traceback_only_under_verbose(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def explode(*_args: object, **_kwargs: object) -> None:
        raise KeyError("secret-value-42")

    monkeypatch.setattr("validator.commands.resync.run_resync", explode)
    argv = ["resync", "-c", _config(tmp_path), "--result", _result(tmp_path)]
    assert cli.run(argv) == 2
    quiet = capsys.readouterr().err
    assert "unexpected KeyError" in quiet and "--verbose" in quiet
    assert "Traceback" not in quiet and "secret-value-42" not in quiet
    assert cli.run(["--verbose", *argv]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_outputs_replace_a_planted_link_instead_of_writing_through_it(tmp_path: Path) -> None:
    elsewhere = tmp_path / "precious.txt"
    elsewhere.write_text("keep me")
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.html").symlink_to(elsewhere)
    result = _sample_result(tmp_path)
    assert cli.run(["report", result, "--html", str(out / "report.html")]) == 0
    assert elsewhere.read_text() == "keep me"
    assert not (out / "report.html").is_symlink()
    assert (out / "report.html").read_text().startswith("<!DOCTYPE html>")


def test_a_library_error_without_strerror_is_its_first_line_without_query_strings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    said = (
        "Generic MicrosoftAzure error\n  \x1b[31m↳\x1b[0m Error performing GET"
        " https://a.blob.core.windows.net/c/x?sv=2022&sig=secret-sas-42 in 2s\n"
    )

    def fail(*_args: object, **_kwargs: object) -> None:
        raise OSError(said.replace("error\n", "error at https://a/c?sig=secret-sas-42\n"))

    monkeypatch.setattr("validator.commands.resync.run_resync", fail)
    assert cli.run(["resync", "-c", _config(tmp_path), "--result", _result(tmp_path)]) == 2
    printed = capsys.readouterr().err
    assert "error: Generic MicrosoftAzure error at https://a/c" in printed, printed
    assert "secret-sas-42" not in printed and "\x1b" not in printed
