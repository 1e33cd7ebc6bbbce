"""Hostile input files: each one is refused with exit 2 and a message naming the file, the
limit and its value, never run until the machine gives out (issue 37, items 7 and 10)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from cdc_core.errors import ConfigError
from tests.reports.sample import make_result
from validator import cli
from validator.config import load_validator_config

CONFIG = """\
connections:
  src: {url: "sqlite:///src.db"}
  tgt: {url: "sqlite:///tgt.db"}
comparisons:
  - name: people
    source: {connection: src, table: people}
    target: {connection: tgt, table: people}
    key: [id]
"""


def anchor_bomb(levels: int, width: int = 10) -> str:
    """``spark.conf`` whose one value is ``width ** levels`` scalars once aliases expand."""
    lines = ["spark:", "  conf:", "    a0: &a0 [x]"]
    for level in range(1, levels + 1):
        aliases = ", ".join([f"*a{level - 1}"] * width)
        lines.append(f"    a{level}: &a{level} [{aliases}]")
    return CONFIG + "\n".join(lines) + "\n"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_an_anchor_bomb_inside_spark_conf_is_refused(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", anchor_bomb(levels=7))  # 10 million nodes
    with pytest.raises(ConfigError, match=r"c\.yaml line \d+: .*aliases.*limit of 1,000,000 nodes"):
        load_validator_config(config, environ={})


def test_an_anchor_bomb_is_refused_by_the_command_with_exit_2(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", anchor_bomb(levels=9))  # a billion nodes

    options = ["--config", str(config), "--out", str(tmp_path / "out")]

    def limit_memory() -> None:  # a safety net: a regression must not eat the machine
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    done = subprocess.run(
        [sys.executable, "-c", "from validator.cli import main; main()", "validate", *options],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit_memory,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert "limit of 1,000,000 nodes" in done.stderr
    assert "replcheck bug" not in done.stderr


def test_a_config_over_the_size_limit_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", "#" * (1 << 20) + "\n" + CONFIG)
    with pytest.raises(ConfigError) as excinfo:
        load_validator_config(config, environ={})
    message = str(excinfo.value)
    assert str(config) in message and "limit of 1 MiB" in message


def test_a_deeply_nested_config_is_refused_without_recursion(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", CONFIG + "spark: {conf: {a: " + "[" * 5000 + "]" * 5000)
    with pytest.raises(ConfigError, match=r"c\.yaml line 9: .*nested deeper than 64"):
        load_validator_config(config, environ={})


def test_an_anchor_bomb_in_a_set_override_is_refused(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", CONFIG)
    levels = ["&a0 [x]"] + [f"&a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 8)]
    bomb = "[" + ", ".join(levels) + "]"
    with pytest.raises(ConfigError, match=r"spark\.conf.*limit of 1,000,000 nodes"):
        load_validator_config(config, {"spark.conf": bomb}, environ={})


def report(tmp_path: Path, result: Path) -> int:
    """``replcheck report RESULT --markdown FILE``, in-process: its exit code."""
    return cli.run(["report", str(result), "--markdown", str(tmp_path / "r.md")])


def test_a_deeply_nested_result_is_refused_by_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = make_result()
    document["extra"] = []
    text = json.dumps(document).replace('"extra": []', '"extra": ' + "[" * 200_000 + "]" * 200_000)
    result = write(tmp_path / "result.json", text)
    code = report(tmp_path, result)
    err = capsys.readouterr().err
    assert code == 2
    assert str(result) in err and "nested deeper than 64 levels" in err
    assert "RecursionError" not in err and "replcheck bug" not in err


def test_a_result_over_the_size_limit_is_refused_before_it_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = write(tmp_path / "result.json", json.dumps(make_result()))
    with result.open("r+b") as file:
        file.truncate(64 * 1024 * 1024 + 1)  # sparse: no disk used
    code = report(tmp_path, result)
    err = capsys.readouterr().err
    assert code == 2
    assert str(result) in err and "limit of 64 MiB" in err and "max_reported_rows" in err


def test_a_password_file_others_can_read_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("s3cr3t\n")
    os.chmod(secret, 0o644)
    text = CONFIG.replace(
        '"sqlite:///src.db"}', f'"sqlite:///src.db", password: {{file: {secret}}}}}'
    )
    config = write(tmp_path / "c.yaml", text)
    with pytest.raises(ConfigError) as excinfo:
        load_validator_config(config, environ={})
    message = str(excinfo.value)
    assert str(secret) in message and f"chmod 600 {secret}" in message
    assert "s3cr3t" not in message
    os.chmod(secret, 0o600)
    loaded = load_validator_config(config, environ={}).connections["src"].password
    assert loaded is not None and loaded.reveal() == "s3cr3t"


def test_resync_refuses_a_deeply_nested_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path / "c.yaml", CONFIG)
    result = write(tmp_path / "result.json", "[" * 200_000 + "]" * 200_000)
    code = cli.run(["resync", "--config", str(config), "--result", str(result)])
    err = capsys.readouterr().err
    assert code == 2
    assert str(result) in err and "nested deeper than 64 levels" in err
    assert "replcheck bug" not in err
