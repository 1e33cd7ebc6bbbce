"""Configuration plumbing shared by every component: located YAML, secrets, connections.

One YAML file holds ``connections:`` (shared), ``comparisons:`` (validator) and
``pipelines:`` (CDC). Each component reads its own section into frozen dataclasses with a
``Section`` reader that knows where every value came from, so an error names the key path,
the file and the line, and says how to fix it. Unknown keys and duplicate keys are errors.
Precedence: the file, then environment variables ``REPLCHECK__<PATH>`` (``__`` separates
path parts, e.g. ``REPLCHECK__SPARK__MASTER``), then command-line ``--set path=value``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from cdc_core.errors import ConfigError
from cdc_core.input_limits import (
    CONFIG_LIMITS,
    SECRET_MAX_BYTES,
    LimitedLoader,
    check_private,
    read_limited,
)
from cdc_core.lake_location import (
    SECRET_STORAGE_OPTIONS,
    STORAGE_OPTIONS,
    LakeLocation,
    Revealable,
    as_location,
    plain,
)

T = TypeVar("T")
ENV_PREFIX = "REPLCHECK__"
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SUBSTITUTED: set[str] = set()  # values ${NAME} put into URLs (mask_url hides them)


class Secret:
    """A value that must never reach a log, a report or an error message."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret itself, for the one place that needs it (a driver's connect call)."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    def __str__(self) -> str:
        return "***"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))


# -- YAML that remembers where each value was ----------------------------------------------


class LocatedDict(dict[str, Any]):
    """A mapping from YAML that knows the line of itself and of each key (1-based)."""

    line: int = 0
    key_lines: dict[str, int]


class LocatedList(list[Any]):
    """A sequence from YAML that knows its line (1-based)."""

    line: int = 0


class _LocatingLoader(LimitedLoader):
    def construct_mapping(  # type: ignore[override]
        self, node: yaml.MappingNode, deep: bool = False
    ) -> LocatedDict:
        result = LocatedDict()
        result.line = node.start_mark.line + 1
        result.key_lines = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if not isinstance(key, str):
                raise ConfigError(f"line {line}: keys must be text, not {key!r}")
            if key in result:
                raise ConfigError(f"line {line}: key {key!r} appears twice in the same mapping")
            result[key] = self.construct_object(value_node, deep=True)
            result.key_lines[key] = line
        return result

    def construct_sequence(self, node: yaml.SequenceNode, deep: bool = False) -> LocatedList:
        result = LocatedList(self.construct_object(child, deep=True) for child in node.value)
        result.line = node.start_mark.line + 1
        return result


_LocatingLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _LocatingLoader.construct_mapping
)
_LocatingLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _LocatingLoader.construct_sequence
)


def load_yaml(text: str, source: str) -> LocatedDict:
    """Parse a config document; the top level must be a mapping."""
    try:
        document = yaml.load(text, Loader=_LocatingLoader)
    except yaml.MarkedYAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {_describe(exc)}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML ({exc})") from exc
    except ConfigError as exc:
        raise ConfigError(f"{source} {exc.message}") from exc
    if not isinstance(document, LocatedDict):
        raise ConfigError(f"{source}: the top level must be a mapping of sections")
    return document


def _describe(exc: yaml.MarkedYAMLError) -> str:
    parts = []
    if exc.problem_mark is not None:
        parts.append(f"line {exc.problem_mark.line + 1}: {exc.problem}")
    if exc.context and exc.context_mark is not None:
        parts.append(f"{exc.context} that starts at line {exc.context_mark.line + 1}")
    return ", ".join(parts) or str(exc)


def read_config_file(path: Path) -> LocatedDict:
    """Read and parse a config file, with a clear error when it cannot be read."""
    try:
        data = read_limited(path, CONFIG_LIMITS.max_bytes, CONFIG_LIMITS.what, CONFIG_LIMITS.fix)
        text = data.decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text (byte {exc.start})") from exc
    return load_yaml(text, str(path))


SECTIONS = ("connections", "comparisons", "pipelines", "spark", "validation", "resync")
"""The top-level sections of a config file: one file serves the pipeline and the validator,
so each loader accepts every section and reads its own."""


def load_root(
    path: Path | str,
    overrides: Mapping[str, str] | None,
    environ: Mapping[str, str],
    allowed: Sequence[str],
    required: Sequence[str],
) -> Section:
    """A config file's top level with environment, then command-line overrides applied,
    its keys checked (file < environment < flags); ``path`` a ``Path`` or a string."""
    path = Path(path)
    document = read_config_file(path)
    apply_overrides(document, environment_overrides(environ))
    apply_overrides(document, overrides or {})
    root = Section(document, "", str(path))
    root.check_keys(allowed, required=required)
    return root


def apply_overrides(document: LocatedDict, overrides: Mapping[str, str]) -> None:
    """Set ``a.b.c = value`` paths (values parsed as YAML scalars) in place.

    In a list, a path part is an index (``pipelines.0.state_dir``) or the ``name`` of an
    entry (``pipelines.shop.state_dir``, ``comparisons.orders.key``).
    """
    for path, raw in overrides.items():
        parts = path.split(".")
        node: Any = document
        for part in parts[:-1]:
            node = _override_child(node, part, path)
        value = _override_value(path, raw)
        if isinstance(node, list):
            node[_list_index(node, parts[-1], path)] = value
        else:
            node[parts[-1]] = value


def _override_value(path: str, raw: str) -> Any:
    """An override's value, parsed as YAML (plain data only: no tags)."""
    if not raw:
        return ""
    try:
        return yaml.load(raw, Loader=LimitedLoader)
    except ConfigError as exc:  # over a limit: anchors that expand too far, too deep
        raise ConfigError(f"--set {path}=...: {exc.message}") from exc
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise ConfigError(
            f"--set {path}=...: the value is not plain YAML ({problem}); quote it, e.g."
            f" --set '{path}=\"text\"'"
        ) from exc


def _override_child(node: Any, part: str, path: str) -> Any:
    if isinstance(node, list):
        return node[_list_index(node, part, path)]
    child = node.get(part)
    if child is None:
        child = LocatedDict()
        child.key_lines = {}
        node[part] = child
    if not isinstance(child, dict | list):
        raise ConfigError(f"override {path}: {part!r} is not a mapping or list")
    return child


def _list_index(items: list[Any], part: str, path: str) -> int:
    if part.isdigit() and int(part) < len(items):
        return int(part)
    for index, item in enumerate(items):
        if isinstance(item, dict) and item.get("name") == part:
            return index
    raise ConfigError(f"override {path}: no list entry {part!r} (an index or a name)")


def environment_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """``REPLCHECK__SPARK__MASTER=x`` becomes ``{"spark.master": "x"}``."""
    return {
        key[len(ENV_PREFIX) :].lower().replace("__", "."): value
        for key, value in environ.items()
        if key.startswith(ENV_PREFIX)
    }


def expand_placeholders(
    text: str, environ: Mapping[str, str], where: str, *, masked: bool = False
) -> str:
    """Replace ``${NAME}`` with environment variables; a missing one is an error.

    With ``masked`` (URLs), every value put in is remembered and ``mask_url`` shows it as
    ``***`` wherever a URL is printed: a user name or host from the environment may be as
    private as the password.
    """

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise ConfigError(f"{where}: environment variable {name} is not set")
        if masked and environ[name]:
            _SUBSTITUTED.add(environ[name])
        return environ[name]

    return _PLACEHOLDER.sub(value, text)


# -- typed reading with locations ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Section:
    """A mapping being read, with its path and source for error messages."""

    data: Mapping[str, Any]
    path: str
    source: str

    def _line(self, key: str | None = None) -> int:
        lines = getattr(self.data, "key_lines", {})
        if key is not None and key in lines:
            return int(lines[key])
        return int(getattr(self.data, "line", 0))

    def where(self, key: str | None = None) -> str:
        """``file line N, key a.b.c`` for messages."""
        dotted = f"{self.path}.{key}" if key and self.path else (key or self.path or "(top)")
        line = self._line(key)
        return f"{self.source}{f' line {line}' if line else ''}, key {dotted}"

    def error(self, key: str | None, problem: str) -> ConfigError:
        """A ConfigError located at ``key``."""
        return ConfigError(f"{self.where(key)}: {problem}")

    def check_keys(self, allowed: Sequence[str], required: Sequence[str] = ()) -> None:
        """Unknown keys and missing required keys are errors."""
        for key in self.data:
            if key not in allowed:
                raise self.error(key, f"unknown key; expected one of: {', '.join(allowed)}")
        for key in required:
            if key not in self.data:
                raise self.error(None, f"missing required key {key!r}")

    def child(self, key: str) -> Section:
        """The mapping under ``key`` (which must be a mapping)."""
        value = self.data.get(key)
        if not isinstance(value, Mapping):
            raise self.error(key, "must be a mapping")
        return Section(value, f"{self.path}.{key}" if self.path else key, self.source)

    def optional_child(self, key: str) -> Section | None:
        """The mapping under ``key``, or None when absent."""
        return self.child(key) if key in self.data else None

    def items(self, key: str) -> Iterator[Section]:
        """Each mapping of the list under ``key``."""
        value = self.data.get(key, [])
        if not isinstance(value, list):
            raise self.error(key, "must be a list")
        for index, item in enumerate(value):
            path = f"{self.path}.{key}[{index}]" if self.path else f"{key}[{index}]"
            if not isinstance(item, Mapping):
                raise self.error(key, f"item {index} must be a mapping")
            yield Section(item, path, self.source)

    def get(self, key: str, kind: type[T], default: T | None = None) -> T | None:
        """A scalar of type ``kind`` (``default`` when absent)."""
        if key not in self.data or self.data[key] is None:
            return default
        value = self.data[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.error(key, f"must be {kind.__name__}, not {type(value).__name__}")
        return value

    def require(self, key: str, kind: type[T]) -> T:
        """A scalar that must be present."""
        value = self.get(key, kind)
        if value is None:
            raise self.error(None, f"missing required key {key!r}")
        return value

    def names(self, key: str) -> tuple[str, ...]:
        """A list of names (a single name is accepted as a list of one)."""
        value = self.data.get(key)
        if value is None:
            return ()
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(key, "must be a list of names")
        return tuple(value)


# -- connections (shared by the validator and the pipelines) -------------------------------

# The keys of one connection (its storage options: cdc_core.lake_location.STORAGE_OPTIONS).
CONNECTION_KEYS = ("url", "lake", "password", "storage_options")


@dataclass(frozen=True, slots=True)
class ConnectionConfig:
    """A named place data lives: a database (SQLAlchemy URL) or a Delta lake directory."""

    name: str
    url: str | None = None
    password: Secret | None = None
    # A lake: its folder when on local disk, else its object-store location.
    lake: Path | LakeLocation | None = None

    def __post_init__(self) -> None:
        if (self.url is None) == (self.lake is None):
            raise ConfigError(f"connection {self.name}: give exactly one of 'url' or 'lake'")

    @property
    def is_lake(self) -> bool:
        """True for a Delta lake, False for a database."""
        return self.lake is not None

    @property
    def location(self) -> LakeLocation | None:
        """Where the lake is, local or not (None for a database)."""
        return None if self.lake is None else as_location(self.lake)

    def display(self) -> str:
        """A form safe for logs and reports: no password, ever."""
        if self.lake is not None:
            return f"lake {self.lake}"
        return mask_url(self.url or "")


# A password written into a URL: after the user name, or as a query parameter (drivers
# read ``?password=`` too: libpq, PyMySQL through SQLAlchemy).
_USERINFO_PASSWORD = re.compile(r"(://[^:/@?#]*):[^@]*@")
_QUERY_SECRET = re.compile(r"(?i)([?&](?:password|passwd|pwd|pass|secret|token)=)[^&#]*")


def inline_password(url: str) -> str | None:
    """Where ``url`` holds a password of its own (None: nowhere): the user info or a query
    parameter."""
    if _USERINFO_PASSWORD.search(url):
        return "after the user name"
    found = _QUERY_SECRET.search(url)
    return None if found is None else f"in its query string ({found[1][1:-1]}=)"


def mask_url(url: str) -> str:
    """The URL with any password (in the user info or the query string), and every value
    ``${NAME}`` put into a URL, as ``***``."""
    masked = _USERINFO_PASSWORD.sub(r"\1:***@", url)
    masked = _QUERY_SECRET.sub(r"\1***", masked)
    for value in sorted(_SUBSTITUTED, key=len, reverse=True):
        masked = masked.replace(value, "***")
    return masked


def read_secret(section: Section, key: str, environ: Mapping[str, str]) -> Secret | None:
    """A secret setting (a password, a key): ``{env: NAME}`` or ``{file: PATH}``, never
    inline, so it is never in the file, a diff or a message."""
    spec = section.data.get(key)
    if spec is None:
        return None
    if not isinstance(spec, Mapping) or len(spec) != 1 or not {"env", "file"} & set(spec):
        raise section.error(key, "must be {env: VARIABLE} or {file: PATH}, never inline")
    if "env" in spec:
        name = str(spec["env"])
        if name not in environ:
            raise section.error(key, f"environment variable {name} is not set")
        return Secret(environ[name])
    return _read_secret_file(section, key, Path(str(spec["file"])))


def _read_secret_file(section: Section, key: str, path: Path) -> Secret:
    """A secret from a file: any file the process can read, by design (the operator owns the
    config), but only one private to its owner (mode 0600 or 0400), as ssh requires of keys."""
    try:
        check_private(path, "secret file")
        data = read_limited(path, SECRET_MAX_BYTES, "secret file", "it should hold one secret")
        return Secret(data.decode("utf-8").strip())
    except OSError as exc:
        raise section.error(key, f"cannot read the file {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise section.error(key, f"the file {path} is not UTF-8 text") from exc
    except ConfigError as exc:
        raise section.error(key, exc.message) from exc


def read_connections(root: Section, environ: Mapping[str, str]) -> dict[str, ConnectionConfig]:
    """The ``connections:`` section."""
    if "connections" not in root.data:
        raise root.error(None, "missing required section 'connections'")
    section = root.child("connections")
    connections = {}
    for name in section.data:
        entry = section.child(name)
        entry.check_keys(CONNECTION_KEYS)
        url = entry.get("url", str)
        if url is not None:
            url = expand_placeholders(url, environ, entry.where("url"), masked=True)
            where = inline_password(url)
            if where is not None:
                raise entry.error(
                    "url", f"has an inline password {where}; use password: {{env: NAME}}"
                )
        lake = entry.get("lake", str)
        if url is not None and "storage_options" in entry.data:
            raise entry.error("storage_options", "applies to a lake connection only")
        if (url is None) == (lake is None):
            raise entry.error(None, "give exactly one of 'url' (a database) or 'lake' (a path)")
        connections[name] = ConnectionConfig(
            name=name,
            url=url,
            password=read_secret(entry, "password", environ),
            lake=_lake_location(entry, lake, environ) if lake is not None else None,
        )
    return connections


def _lake_location(entry: Section, lake: str, environ: Mapping[str, str]) -> Path | LakeLocation:
    """A lake connection's ``lake:`` (a local folder as a path, as ever) or its object-store
    URL with ``storage_options`` (cdc_core.lake_location)."""
    options: dict[str, Revealable] = {}
    child = entry.optional_child("storage_options")
    if child is not None:
        child.check_keys(list(STORAGE_OPTIONS))
        for key, value in child.data.items():
            if isinstance(value, str) and key not in SECRET_STORAGE_OPTIONS:
                options[key] = plain(value)
            else:
                secret = read_secret(child, key, environ)
                if secret is not None:
                    options[key] = secret
    try:
        location = LakeLocation.from_config(lake, options)
    except ConfigError as exc:
        raise entry.error("lake", exc.message) from exc
    return location.place()
