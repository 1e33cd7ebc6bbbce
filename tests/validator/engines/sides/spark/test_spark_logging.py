"""The JVM replcheck starts logs through replcheck's log4j2 file (no Spark needed here)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

from validator.engines.sides.spark.session import JAVA_OPTIONS, LOG4J_CONFIG, _with_log_config


def test_the_driver_jvm_reads_the_shipped_log4j2_file() -> None:
    options = _with_log_config({}, verbose=False)[JAVA_OPTIONS].split()
    assert options == [
        f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}",
        "-Dreplcheck.jvm.log.level=ERROR",
    ]
    assert Path(urlparse(options[0].partition("=")[2]).path).is_file()
    assert "${sys:replcheck.jvm.log.level:-ERROR}" in LOG4J_CONFIG.read_text()


def test_verbose_shows_warnings_and_the_users_options_come_last() -> None:
    conf = {JAVA_OPTIONS: "-Dlog4j2.configurationFile=mine.properties -Xss4m"}
    options = _with_log_config(conf, verbose=True)[JAVA_OPTIONS].split()
    assert options[1] == "-Dreplcheck.jvm.log.level=WARN"
    assert options[2:] == ["-Dlog4j2.configurationFile=mine.properties", "-Xss4m"]  # theirs wins
