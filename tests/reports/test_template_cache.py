"""The report's compiled templates are cached between runs, and a cache that cannot be
written never stops a report."""

from __future__ import annotations

from pathlib import Path

from jinja2 import DictLoader, Environment

from reports.html import _TemplateCache


def _render(cache: _TemplateCache) -> str:
    env = Environment(loader=DictLoader({"t.j2": "{{ 1 + 2 }}"}), bytecode_cache=cache)
    return env.get_template("t.j2").render()


def test_compiled_templates_are_kept_for_the_next_run(tmp_path: Path) -> None:
    assert _render(_TemplateCache(str(tmp_path))) == "3"
    kept = list(tmp_path.iterdir())
    assert len(kept) == 1 and kept[0].stat().st_size > 0
    assert _render(_TemplateCache(str(tmp_path))) == "3"  # read back from the file


def test_a_cache_that_cannot_be_written_or_read_is_passed_over(tmp_path: Path) -> None:
    assert _render(_TemplateCache(str(tmp_path / "no such folder"))) == "3"
    unreadable = tmp_path / "cache"
    unreadable.mkdir()
    assert _render(_TemplateCache(str(unreadable))) == "3"
    for kept in unreadable.iterdir():  # a folder where the file should be
        kept.unlink()
        kept.mkdir()
    assert _render(_TemplateCache(str(unreadable))) == "3"
