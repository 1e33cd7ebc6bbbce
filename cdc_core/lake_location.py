"""Where a lake lives: a local folder or a prefix in an object store, with its storage options.

``lake:`` in a connection takes a local path, a ``file://`` URL, an ``s3://bucket/prefix`` URL
or an Azure one (``az://container/prefix``, ``abfss://container@account.dfs.core.windows.net/
prefix``, ``abfs://``) (DESIGN.md, "Lake URLs"). A ``LakeLocation`` is that URL plus the
storage options that reach the store; it hands them to the two libraries that read and write
the lake, in the forms each takes: ``delta_options()`` for deltalake (delta-rs) and
``filesystem()`` for a pyarrow filesystem.

Credentials and endpoints come from the store's standard environment first (``OBJECT_STORES``:
``AWS_ACCESS_KEY_ID``, ... for S3, ``AZURE_STORAGE_ACCOUNT_NAME``, ... for Azure;
``AWS_PROFILE`` is left to the SDKs' own credential chain), then the connection's
``storage_options`` override them. Every value stays masked until it is handed
to a library: ``display()`` and every error message show the URL only, which holds no secret
(a URL with user info or a query string is refused when the config is read).

Delta commits on S3 need an atomic put-if-absent. The lake asks delta-rs for S3 conditional
writes (``conditional_put: etag``: a commit file is written with ``If-None-Match: *``, so of
two writers racing for one version exactly one wins and the other retries on the next); an
unsafe rename (``AWS_S3_ALLOW_UNSAFE_RENAME``) is never set. Azure Blob Storage needs no
option: delta-rs's object store writes a commit file with ``If-None-Match: *`` there natively
(Blob's own conditional create), with the same outcome.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol
from urllib.parse import urlsplit

from cdc_core.errors import ConfigError, TerminalError

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs
    from deltalake import DeltaTable


class StorageOption(NamedTuple):
    """One storage option a connection may set: the environment variable it overrides (None:
    the config only), its name in delta-rs's ``storage_options``, and whether it is a secret
    (then it must be ``{env: NAME}`` or ``{file: PATH}``; the others may also be written
    out)."""

    env: str | None
    delta: str
    secret: bool = False


@dataclass(frozen=True, slots=True)
class ObjectStore:
    """A kind of object store a lake URL may name: its name and its word for the top level
    (for messages), its storage options, and the endpoint used when none is set."""

    name: str
    container: str
    options: Mapping[str, StorageOption]
    default_endpoint: str


# How long one request may go unanswered (``30s``, ``500ms``): delta-rs's ``timeout`` and
# pyarrow's S3 request timeout. A store that accepts a connection and never answers fails
# after it, retried within ``DELTA_RETRIES``.
REQUEST_TIMEOUT = StorageOption(None, "timeout")
DEFAULT_REQUEST_TIMEOUT = "30s"
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s)$")

S3 = ObjectStore(
    "S3",
    "bucket",
    {
        "access_key_id": StorageOption("AWS_ACCESS_KEY_ID", "aws_access_key_id", True),
        "secret_access_key": StorageOption("AWS_SECRET_ACCESS_KEY", "aws_secret_access_key", True),
        "session_token": StorageOption("AWS_SESSION_TOKEN", "aws_session_token", True),
        "region": StorageOption("AWS_REGION", "aws_region"),
        "endpoint_url": StorageOption("AWS_ENDPOINT_URL", "aws_endpoint_url"),
        "request_timeout": REQUEST_TIMEOUT,
    },
    "the default AWS endpoint",
)
AZURE = ObjectStore(
    "Azure",
    "container",
    {
        "account_name": StorageOption("AZURE_STORAGE_ACCOUNT_NAME", "azure_storage_account_name"),
        "account_key": StorageOption(
            "AZURE_STORAGE_ACCOUNT_KEY", "azure_storage_account_key", True
        ),
        "sas_token": StorageOption("AZURE_STORAGE_SAS_TOKEN", "azure_storage_sas_token", True),
        # A service principal (client secret credential).
        "client_id": StorageOption("AZURE_CLIENT_ID", "azure_storage_client_id"),
        "client_secret": StorageOption("AZURE_CLIENT_SECRET", "azure_storage_client_secret", True),
        "tenant_id": StorageOption("AZURE_TENANT_ID", "azure_storage_tenant_id"),
        # The account's blob endpoint: https://ACCOUNT.blob.core.windows.net, or path style
        # http://127.0.0.1:10000/ACCOUNT for an emulator (Azurite).
        "endpoint_url": StorageOption("AZURE_STORAGE_ENDPOINT", "azure_storage_endpoint"),
        "request_timeout": REQUEST_TIMEOUT,
    },
    "the default Azure endpoint",
)
# One registry of the stores a lake URL may name, keyed by the schemes users write.
OBJECT_STORES: Mapping[str, ObjectStore] = {"s3": S3, "az": AZURE, "abfs": AZURE, "abfss": AZURE}
# Schemes whose URL names the account too: abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/...
ACCOUNT_IN_URL = ("abfs", "abfss")
LOCAL_SCHEMES = ("", "file")

# Every storage option name of any store (the config's allowed keys), and the secret ones;
# derived from OBJECT_STORES, which a lake checks its own options against.
STORAGE_OPTIONS = tuple(dict.fromkeys(k for s in OBJECT_STORES.values() for k in s.options))
SECRET_STORAGE_OPTIONS = tuple(
    dict.fromkeys(k for s in OBJECT_STORES.values() for k, o in s.options.items() if o.secret)
)
DEFAULT_REGION = "us-east-1"
REQUEST_CHECKSUMS = "AWS_REQUEST_CHECKSUM_CALCULATION"  # the AWS SDK's setting
# delta-rs's S3 commit mechanism: conditional writes (If-None-Match), see the module docstring.
CONDITIONAL_PUT = "etag"
READ_ATTEMPTS = 5  # reads of an object replaced while it is read (``read_bytes``)
# delta-rs's own requests (Delta logs, data files, commits): a bounded number of retries in
# a bounded time, and a connection that fails fast (object_store's ClientOptions and
# RetryConfig; its defaults are 10 retries over up to 3 minutes). A commit itself is one
# conditional PUT, never retried blindly: a failed one leaves no version behind.
DELTA_RETRIES = {
    "max_retries": "3",
    "retry_timeout": "60s",
    "connect_timeout": "5s",
    "timeout": DEFAULT_REQUEST_TIMEOUT,
}
# Bounded waits: a wrong endpoint must fail in seconds, not after the SDKs' default retries.
CONNECT_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class StoreAccess:
    """An object store's kind and resolved settings, shipped to processes that read its
    files without the config (Spark's executors). The settings hold credentials: its
    ``repr`` shows the store only, and it is never logged."""

    scheme: str
    settings: tuple[tuple[str, str], ...] = field(repr=False)

    def filesystem(self) -> pafs.FileSystem:
        """The store's pyarrow filesystem (one per process and settings: cached)."""
        if OBJECT_STORES[self.scheme] is AZURE:
            return _azure_filesystem(self.settings)
        return _s3_filesystem(self.settings)

    def path_of(self, uri: str) -> str:
        """A data file's URI (as Delta lists it) as a path in ``filesystem()``."""
        return _path_in_store(uri)


class Revealable(Protocol):
    """A masked value (``cdc_core.config.Secret``) that shows itself only when asked."""

    def reveal(self) -> str: ...


@dataclass(frozen=True, slots=True)
class _Plain:
    """A storage option written out in the config (not a secret: a region, an endpoint)."""

    value: str

    def reveal(self) -> str:
        return self.value


def plain(value: str) -> Revealable:
    """A storage option that is not a secret, as the location holds its values."""
    return _Plain(value)


@dataclass(frozen=True, slots=True)
class LakeLocation:
    """A lake's root: a local folder or an object-store URL, plus its storage options.

    Args:
        url: ``s3://bucket/prefix`` for an object store, else the local folder as a path.
        storage_options: The connection's overrides of the environment, by option name
            (``STORAGE_OPTIONS``); values stay masked.
    """

    url: str
    storage_options: Mapping[str, Revealable] = field(
        default_factory=dict, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        if self.scheme and self.scheme not in OBJECT_STORES:
            raise ConfigError(f"lake {self.url}: not a local path nor a store in {_stores()}")
        known = self.object_store.options if not self.is_local else {}
        unknown = sorted(set(self.storage_options) - set(known))
        if unknown:
            raise ConfigError(f"lake {self.url}: unknown storage option(s) {unknown}")
        timeout = self.storage_options.get("request_timeout")
        if timeout is not None:
            duration_s(timeout.reveal(), f"lake {self.url}: storage option request_timeout")
        if not self.is_local and not self.bucket:
            word = self.object_store.container
            raise ConfigError(
                f"lake {self.url}: name a {word} ({self.scheme}://{word.upper()}/...)"
            )

    @classmethod
    def from_config(cls, text: str, options: Mapping[str, Revealable]) -> LakeLocation:
        """The location a config's ``lake:`` names: a path, ``file://`` or a store URL."""
        parts = urlsplit(text)
        scheme = parts.scheme.lower() if "://" in text else ""
        if scheme in LOCAL_SCHEMES:
            if scheme and parts.netloc not in ("", "localhost"):
                raise ConfigError(f"lake {text}: a file URL takes an absolute path: file:///PATH")
            if options:
                raise ConfigError(f"lake {text}: storage_options apply to object stores only")
            return cls(str(Path(parts.path if scheme else text)))
        # abfss://CONTAINER@ACCOUNT...: the container is the URL's user part, no credential.
        named_user = parts.username if scheme not in ACCOUNT_IN_URL else None
        if named_user or parts.password or parts.query or parts.fragment:
            raise ConfigError(
                f"lake {scheme}://{parts.hostname or ''}{parts.path}: the URL must not hold"
                " credentials or a query; use storage_options with {env: NAME} values"
            )
        return cls(f"{scheme}://{parts.netloc}/{parts.path.strip('/')}".rstrip("/"), options)

    @property
    def scheme(self) -> str:
        """``s3`` for an object store, ``""`` for a local folder."""
        return urlsplit(self.url).scheme if "://" in self.url else ""

    @property
    def is_local(self) -> bool:
        """True for a folder on local disk."""
        return not self.scheme

    @property
    def object_store(self) -> ObjectStore:
        """The kind of store an object-store lake is on (OBJECT_STORES)."""
        return OBJECT_STORES[self.scheme]

    @property
    def store(self) -> str:
        """The store's name for messages: ``S3``, ``Azure``, or ``local disk``."""
        return self.object_store.name if not self.is_local else "local disk"

    @property
    def bucket(self) -> str:
        """The bucket (Azure: container) of an object-store lake (``""`` for a local one)."""
        return _container(self.url) if not self.is_local else ""

    @property
    def local_path(self) -> Path:
        """The folder of a local lake; an object-store lake has none."""
        if not self.is_local:
            raise ConfigError(
                f"lake {self.url} is on {self.store}: this step works on a lake on local disk"
                " only so far (docs/object-storage.md)"
            )
        return Path(self.url)

    def place(self) -> Path | LakeLocation:
        """This location as the code holds a lake: its folder when on local disk (whose files
        are written as ever, through temporary files), else the location itself."""
        return self.local_path if self.is_local else self

    def join(self, *parts: str) -> LakeLocation:
        """A location below this one (parts are already encoded: ``cdc_core.names``)."""
        if self.is_local:
            return LakeLocation(str(Path(self.url).joinpath(*parts)), self.storage_options)
        return LakeLocation("/".join([self.url, *parts]), self.storage_options)

    def display(self) -> str:
        """A form safe for logs, results and messages: the URL (it never holds a secret)."""
        return self.url

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"LakeLocation({self.url!r})"  # never the options, even masked

    def is_within(self, other: LakeLocation) -> bool:
        """Whether this location is ``other`` or below it."""
        return self.url == other.url or self.url.startswith(other.url.rstrip("/") + "/")

    def relative_to(self, other: LakeLocation) -> str:
        """This location's path below ``other`` (``a/b``)."""
        if not self.is_within(other):
            raise ValueError(f"{self.url} is not below {other.url}")
        return self.url[len(other.url) :].strip("/")

    def settings(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """Each storage option's value: the connection's, else the environment's (an
        ``abfss://`` URL's account wins over both: it is the most explicit)."""
        environ = os.environ if environ is None else environ
        options = self.object_store.options.items()
        found = {key: environ[o.env] for key, o in options if o.env and environ.get(o.env)}
        found.update({key: value.reveal() for key, value in self.storage_options.items()})
        account = _url_account(self.url)
        if account:
            found["account_name"] = account
        return found

    def delta_options(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The ``storage_options`` deltalake takes (empty for a local lake)."""
        if self.is_local:
            return {}
        settings = self.settings(environ)
        known = self.object_store.options
        options = {**DELTA_RETRIES, **{known[key].delta: v for key, v in settings.items()}}
        http = settings.get("endpoint_url", "").startswith("http://")
        if self.object_store is AZURE:
            # No commit option: Blob Storage's put-if-absent is native (module docstring).
            if http:
                options["azure_allow_http"] = "true"
            return options
        options.setdefault("aws_region", DEFAULT_REGION)
        options["conditional_put"] = CONDITIONAL_PUT
        if http:
            options["aws_allow_http"] = "true"
        return options

    def filesystem(self, environ: Mapping[str, str] | None = None) -> tuple[pafs.FileSystem, str]:
        """A pyarrow filesystem of the store and this location's path in it."""
        import pyarrow.fs as pafs

        if self.is_local:
            return pafs.LocalFileSystem(), self.url
        return self.access(environ).filesystem(), _path_in_store(self.url)

    def access(self, environ: Mapping[str, str] | None = None) -> StoreAccess:
        """What another process needs to read this lake's files: its store and settings,
        resolved here (a Spark executor has neither the config nor, maybe, the variables)."""
        if self.is_local:
            raise ValueError(f"lake {self.url} is on local disk: its files are read as paths")
        return StoreAccess(self.scheme, tuple(sorted(self.settings(environ).items())))

    def check_reachable(self, environ: Mapping[str, str] | None = None) -> None:
        """Fail with one line naming the store, the URL and the fix when the lake's bucket
        cannot be reached: the endpoint does not answer, or the bucket does not exist."""
        if self.is_local:
            return
        import pyarrow.fs as pafs

        filesystem, _ = self.filesystem(environ)
        try:
            found = filesystem.get_file_info(self.bucket)
        except OSError as exc:
            raise StoreError.of(self, exc, environ) from exc
        if found.type == pafs.FileType.NotFound:
            raise StoreError(_missing_bucket(self), {"lake": self.display()})

    # -- Delta tables ----------------------------------------------------------------------

    def open_delta(self, version: int | None = None) -> DeltaTable:
        """The Delta table at this location (at ``version``: that version)."""
        from deltalake import DeltaTable

        return DeltaTable(self.url, version=version, storage_options=self._delta_or_none())

    def write_delta(self, data: pa.Table, **options: Any) -> None:
        """``write_deltalake`` to the Delta table at this location (created if need be)."""
        from deltalake import write_deltalake

        write_deltalake(self.url, data, storage_options=self._delta_or_none(), **options)

    def _delta_or_none(self) -> dict[str, str] | None:
        return None if self.is_local else self.delta_options()

    # -- the few file operations the lake's own files need (progress, marks) -------------

    def is_dir(self) -> bool:
        """Whether anything is stored at or below this location (a folder, locally)."""
        if self.is_local:
            return Path(self.url).is_dir()
        import pyarrow.fs as pafs

        filesystem, path = self.filesystem()
        with _store_errors(self):
            return filesystem.get_file_info(path).type == pafs.FileType.Directory

    def read_bytes(self, *, written_once: bool = False) -> bytes | None:
        """The object's (or file's) bytes; None when there is none.

        pyarrow reads an object as a HEAD (its size) and then a GET of that many bytes: an
        object replaced between the two reads as a prefix of the new one (a torn progress
        file: mariadb-full S3 soak seed 942). So the read is kept only when the object's
        size after it is the size read; else it is read again. An object ``written_once``
        (a Delta commit file) cannot be replaced: one read."""
        if self.is_local:
            try:
                return Path(self.url).read_bytes()
            except FileNotFoundError:
                return None
        filesystem, path = self.filesystem()
        with _store_errors(self):
            for _ in range(READ_ATTEMPTS):
                try:
                    with filesystem.open_input_stream(path) as stream:
                        data = bytes(stream.read())
                    if written_once or filesystem.get_file_info(path).size == len(data):
                        return data
                except FileNotFoundError:
                    return None
        raise StoreError(
            f"lake {self.display()}: the object was replaced under each of {READ_ATTEMPTS}"
            " reads of it (another process rewrites it without pause); try again",
            {"lake": self.display()},
        )

    def write_bytes(self, data: bytes) -> None:
        """Replace the object with ``data`` in one PUT: readers see the old or the new one,
        never a part (an object store's writes are atomic per object). Object stores only:
        local files are written through a temporary file by their owners."""
        filesystem, path = self.filesystem()
        with _store_errors(self), filesystem.open_output_stream(path) as stream:
            stream.write(data)

    def list_names(self, suffix: str) -> list[str]:
        """The names of the files directly below this location ending with ``suffix``."""
        if self.is_local:
            folder = Path(self.url)
            if not folder.is_dir():
                return []
            return sorted(p.name for p in folder.glob(f"*{suffix}"))
        import pyarrow.fs as pafs

        filesystem, path = self.filesystem()
        with _store_errors(self):
            found = filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        return sorted(
            info.base_name
            for info in found
            if info.type == pafs.FileType.File and info.base_name.endswith(suffix)
        )

    def file_of(self, uri: str) -> tuple[str, pafs.FileSystem | None]:
        """A data file Delta lists (``file_uris``) as pyarrow opens it: its path and the
        filesystem it is on (None: a local path, opened as ever)."""
        if self.is_local or "://" not in uri:
            return uri, None
        return _path_in_store(uri), self.filesystem()[0]

    def file_exists(self, uri: str) -> bool:
        """Whether a data file Delta lists is there."""
        path, filesystem = self.file_of(uri)
        if filesystem is None:
            return os.path.exists(path)
        import pyarrow.fs as pafs

        with _store_errors(self):
            return filesystem.get_file_info(path).type == pafs.FileType.File

    def list_folders(self) -> list[str]:
        """The names of the folders (common prefixes) directly below this location."""
        import pyarrow.fs as pafs

        filesystem, path = self.filesystem()
        with _store_errors(self):
            found = filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        return sorted(info.base_name for info in found if info.type == pafs.FileType.Directory)

    def copy_tree(self, target: LakeLocation) -> None:
        """Copy every object at or below this location to the same names below ``target``
        (object stores: one server-side copy per object, nothing read through here)."""
        import pyarrow.fs as pafs

        filesystem, path = self.filesystem()
        to = target.filesystem()[1]
        with _store_errors(self):
            selector = pafs.FileSelector(path, recursive=True, allow_not_found=True)
            for info in filesystem.get_file_info(selector):
                if info.type == pafs.FileType.File:
                    filesystem.copy_file(info.path, to + info.path[len(path) :])

    def delete(self) -> None:
        """Delete the file (object) here; nothing there: nothing to do."""
        if self.is_local:
            Path(self.url).unlink(missing_ok=True)
            return
        filesystem, path = self.filesystem()
        with _store_errors(self):
            try:
                filesystem.delete_file(path)
            except FileNotFoundError:
                return

    def delete_tree(self) -> None:
        """Delete everything at or below this location (nothing there: nothing to do)."""
        filesystem, path = self.filesystem()
        with _store_errors(self):
            try:
                filesystem.delete_dir(path)
            except FileNotFoundError:
                return


def duration_s(text: str, what: str) -> float:
    """Seconds in a duration as delta-rs writes one (``30s``, ``500ms``).

    Raises:
        ConfigError: Not such a duration, or not above zero; names ``what``.
    """
    found = _DURATION.match(text.strip())
    seconds = float(found[1]) / (1000 if found[2] == "ms" else 1) if found else 0.0
    if seconds <= 0:
        raise ConfigError(f"{what}: {text!r} is not a duration such as 30s or 500ms")
    return seconds


@functools.lru_cache(maxsize=8)
def _s3_filesystem(settings: tuple[tuple[str, str], ...]) -> pafs.S3FileSystem:
    """One pyarrow S3 filesystem per set of settings (a validation opens many files)."""
    import pyarrow.fs as pafs

    found = dict(settings)
    if ("access_key_id" in found) != ("secret_access_key" in found):
        given, lacking = ("access key id", "secret access key")
        if "secret_access_key" in found:
            given, lacking = lacking, given
        raise ConfigError(
            f"an S3 {given} is given without its {lacking}: set both (AWS_ACCESS_KEY_ID and"
            " AWS_SECRET_ACCESS_KEY, or storage_options), or neither to use AWS_PROFILE"
        )
    request_s = duration_s(found.get("request_timeout", DEFAULT_REQUEST_TIMEOUT), "request_timeout")
    endpoint = urlsplit(found.get("endpoint_url", ""))
    if endpoint.netloc:
        # An S3-compatible store may not decode the aws-chunked uploads with a trailing
        # checksum that the AWS SDK sends by default since 2025: s3rver stores the chunk
        # framing as the object's bytes, and a progress file read back is "corrupt". A
        # checksum only where an operation requires one, as before; the user's choice wins.
        os.environ.setdefault(REQUEST_CHECKSUMS, "when_required")
    return pafs.S3FileSystem(
        access_key=found.get("access_key_id"),
        secret_key=found.get("secret_access_key"),
        session_token=found.get("session_token"),
        region=found.get("region", DEFAULT_REGION),
        endpoint_override=endpoint.netloc or None,
        scheme=endpoint.scheme or "https",
        connect_timeout=min(CONNECT_TIMEOUT_S, request_s),
        request_timeout=request_s,
        retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=2),
    )


@functools.lru_cache(maxsize=8)
def _azure_filesystem(settings: tuple[tuple[str, str], ...]) -> pafs.AzureFileSystem:
    """One pyarrow Azure filesystem per set of settings (a validation opens many files).
    Without a key, SAS token or client secret, pyarrow's default credential chain applies."""
    import pyarrow.fs as pafs

    found = dict(settings)
    account = found.get("account_name")
    if not account:
        raise ConfigError(
            "an Azure lake needs its storage account: set AZURE_STORAGE_ACCOUNT_NAME or"
            " storage_options.account_name, or use abfss://CONTAINER@ACCOUNT.dfs.core.windows.net"
        )
    endpoint = urlsplit(found.get("endpoint_url", ""))
    blob = _azure_authority(endpoint, account)
    scheme = endpoint.scheme or None
    return pafs.AzureFileSystem(
        account,
        account_key=found.get("account_key"),
        sas_token=found.get("sas_token"),
        client_id=found.get("client_id"),
        client_secret=found.get("client_secret"),
        tenant_id=found.get("tenant_id"),
        blob_storage_authority=blob,
        blob_storage_scheme=scheme,
        # An emulator serves both APIs at one address; Azure's DFS host mirrors the blob one.
        dfs_storage_authority=blob.replace(".blob.", ".dfs.", 1) if blob else None,
        dfs_storage_scheme=scheme,
    )


def _azure_authority(endpoint: Any, account: str) -> str | None:
    """pyarrow's ``blob_storage_authority`` for an endpoint URL (a ``urlsplit`` result):
    ``host:port`` for a path-style one (``http://127.0.0.1:10000/ACCOUNT``, an emulator),
    ``.blob.core.windows.net`` for ``https://ACCOUNT.blob.core.windows.net``."""
    if not endpoint.netloc:
        return None
    if endpoint.path.strip("/") == account:
        return str(endpoint.netloc)
    if endpoint.netloc.startswith(f"{account}.") and not endpoint.path.strip("/"):
        return str(endpoint.netloc[len(account) :])
    raise ConfigError(
        f"the Azure endpoint {endpoint.scheme}://{endpoint.hostname} must be"
        f" https://{account}.blob.core.windows.net (or alike) or path style"
        f" http://HOST:PORT/{account} (an emulator)"
    )


def _container(url: str) -> str:
    """An object-store URL's bucket or container (abfss: the user part of its host)."""
    parts = urlsplit(url)
    return parts.netloc.split("@", 1)[0] if "@" in parts.netloc else parts.netloc


def _url_account(url: str) -> str:
    """The storage account an ``abfss://CONTAINER@ACCOUNT.dfs...`` URL names, else ``""``."""
    parts = urlsplit(url)
    if parts.scheme not in ACCOUNT_IN_URL or "@" not in parts.netloc:
        return ""
    return (parts.hostname or "").split(".", 1)[0]


def _path_in_store(url: str) -> str:
    """An object-store URL as a pyarrow filesystem path: ``BUCKET/key`` (``CONTAINER/key``)."""
    return _container(url) + urlsplit(url).path.rstrip("/")


def as_location(lake: Path | LakeLocation) -> LakeLocation:
    """A lake's location, from its local folder (as most of the code still holds it) or as is."""
    return lake if isinstance(lake, LakeLocation) else LakeLocation(str(lake))


@contextlib.contextmanager
def _store_errors(location: LakeLocation) -> Iterator[None]:
    """An object store's failure as one line naming the store, the URL and the fix."""
    try:
        yield
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise StoreError.of(location, exc) from exc


class StoreError(TerminalError):
    """An object store refused or failed a request (missing bucket, no permission, network)."""

    @classmethod
    def of(
        cls, location: LakeLocation, exc: OSError, environ: Mapping[str, str] | None = None
    ) -> StoreError:
        environ = os.environ if environ is None else environ
        message = str(exc).lower()
        squeezed = message.replace(" ", "").replace("_", "")  # pyarrow: ACCESS_DENIED
        if any(code in squeezed for code in _MISSING_CONTAINER) or (
            "bucket" in message and "not found" in message
        ):
            return cls(_missing_bucket(location), {"lake": location.display()})
        if "region" in location.object_store.options and any(
            code in squeezed for code in _WRONG_REGION
        ):
            return cls(_wrong_region(location, environ, str(exc)), {"lake": location.display()})
        if any(code in squeezed for code in _DENIED):
            return StoreAccessDeniedError.of(location, environ, "expired" in message)
        return StoreUnreachableError.of(location, environ, exc)


# The stores' error codes for a missing bucket (S3) or container (Azure).
_MISSING_CONTAINER = ("nosuchbucket", "containernotfound", "thespecifiedcontainerdoesnotexist")
# ... and for a request refused for its credentials or their permissions (HTTP 403; spaces
# and underscores squeezed out): S3's codes, Azure's, pyarrow's and delta-rs's words for them.
_DENIED = (
    "accessdenied",
    "invalidaccesskeyid",
    "signaturedoesnotmatch",
    "expiredtoken",
    "tokenexpired",
    "invalidtoken",
    "authorizationfailure",
    "authenticationfailed",
    "authorizationpermissionmismatch",
    "lackedthenecessaryprivileges",
    "403forbidden",
    "]403",
)


# ... and for a bucket in another region than the one requests are signed for: S3's codes
# (HTTP 400 or 301), delta-rs's words for a redirect, pyarrow's for a 301.
_WRONG_REGION = (
    "authorizationheadermalformed",
    "permanentredirect",
    "incorrectlyconfiguredregion",
    "httpstatus301",
)


def _wrong_region(location: LakeLocation, environ: Mapping[str, str], error: str) -> str:
    region = location.settings(environ).get("region", DEFAULT_REGION)
    named = re.search(r"expecting '([\w-]+)'|<Region>([\w-]+)</Region>", error)
    where = f" (it is in {next(r for r in named.groups() if r)!r})" if named else ""
    return (
        f"lake {location.display()}: {location.store} at {_endpoint(location, environ)} says"
        f" the bucket {location.bucket!r} is not in region {region!r}{where}; set"
        f" {location.object_store.options['region'].env} (or storage_options.region) to the"
        " bucket's region"
    )


class StoreAccessDeniedError(StoreError):
    """A store refused a request: wrong or expired credentials, or no permission."""

    @classmethod
    def of(  # type: ignore[override]
        cls, location: LakeLocation, environ: Mapping[str, str], expired: bool
    ) -> StoreAccessDeniedError:
        store = location.object_store
        secrets = [o.env for o in store.options.values() if o.secret and o.env]
        why = "the credentials have expired" if expired else "wrong credentials or no permission"
        return cls(
            f"lake {location.display()}: {location.store} at {_endpoint(location, environ)}"
            f" refused access ({why}); check {', '.join(secrets)} (or their storage_options),"
            f" and that they may read, write and list the {store.container}"
            f" {location.bucket!r}",
            {"lake": location.display()},
        )


def _missing_bucket(location: LakeLocation) -> str:
    word = location.object_store.container
    return (
        f"lake {location.display()}: the {location.store} {word} {location.bucket!r} does not"
        f" exist at {_endpoint(location, os.environ)}; create it, or correct the {word} in"
        " 'lake:'"
    )


class StoreUnreachableError(StoreError):
    """An object store's endpoint did not answer (wrong endpoint, network down)."""

    @classmethod
    def of(  # type: ignore[override]
        cls, location: LakeLocation, environ: Mapping[str, str], exc: OSError
    ) -> StoreUnreachableError:
        reason = failure_gist(str(exc))
        return cls(
            f"lake {location.display()}: cannot reach {location.store} at"
            f" {_endpoint(location, environ)} ({reason}); check"
            f" {location.object_store.options['endpoint_url'].env} or"
            " storage_options.endpoint_url, and that the store is up",
            {"lake": location.display()},
        )


def _endpoint(location: LakeLocation, environ: Mapping[str, str]) -> str:
    """The endpoint a store is reached at, for messages (user info never shown)."""
    endpoint = urlsplit(location.settings(environ).get("endpoint_url", ""))
    if not endpoint.netloc:
        return location.object_store.default_endpoint
    return (
        f"{endpoint.scheme}://{endpoint.hostname}"
        + (f":{endpoint.port}" if endpoint.port else "")
        + endpoint.path.rstrip("/")
    )


def failure_gist(message: str) -> str:
    """The gist of an SDK error, without request ids or echoed headers."""
    lowered = message.lower()
    for found, gist in _GISTS:
        if found in lowered:
            return gist
    return "the request failed"


# Phrases of the AWS and Azure SDKs' (pyarrow's) and delta-rs's errors, and what a message
# says of them.
_GISTS = (
    ("could not connect", "nothing answers there"),
    ("couldn't connect", "nothing answers there"),
    ("failed to connect", "nothing answers there"),
    ("connection refused", "nothing answers there"),
    ("could not resolve host", "the host name does not resolve"),
    ("dns error", "the host name does not resolve"),
    ("timed out", "it timed out"),
    ("timeout", "it timed out"),
    ("access denied", "access denied"),
    ("forbidden", "access denied"),
)


def _stores() -> list[str]:
    return [f"{scheme}://" for scheme in OBJECT_STORES]
