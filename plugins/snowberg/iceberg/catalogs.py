"""Iceberg catalogs from configuration: an Airflow connection, or pyiceberg's own config.

Catalog settings never live in code. ``open_catalog(ref)`` looks for an
Airflow connection whose id is ``ref``; when there is none it falls back to
pyiceberg's configuration for the catalog *name* ``ref``
(``PYICEBERG_CATALOG__<REF>__*`` environment variables or ``~/.pyiceberg.yaml``).

A connection of the ``iceberg`` type (the Apache Iceberg provider's) is opened
by the provider's ``IcebergHook``: ``host`` is the catalog URI, ``login`` and
``password`` the OAuth2 client id and secret (``credential``), ``extra`` the
catalog properties verbatim (``type`` defaults to ``rest``; ``{"type": "sql",
"uri": ..., "warehouse": ...}`` or ``{"type": "glue", ...}`` work too), and the
catalog is named after the connection id.

The other connection types are presets for what the hook cannot build
(``catalog_properties`` turns them into pyiceberg properties; ``extra``
completes them):

==============  ===========================================================
``snowflake``   Snowflake Horizon Iceberg REST catalog. ``password`` is a
                programmatic access token (PAT); ``extra.account``,
                ``extra.role`` and ``extra.database`` are required. Builds
                ``uri = https://<account>.snowflakecomputing.com/polaris/api/catalog``,
                ``credential = <PAT>``, ``scope = session:role:<ROLE>``,
                ``warehouse = <DATABASE>`` and the header
                ``X-Iceberg-Access-Delegation: vended-credentials``. The same
                connection also works for SQL through the provider's hook
                (its ``extra.warehouse`` stays the compute warehouse).
                ``extra.catalog_uri`` replaces the endpoint (private link,
                or a local test server).
``aws``         AWS Glue + S3. ``login``/``password`` are the access key id
                and secret (or leave empty for the default AWS chain);
                ``extra.region_name``, ``extra.endpoint_url`` (both services)
                or ``extra.service_config.{glue,s3}.endpoint_url``,
                ``extra.aws_session_token``, ``extra.warehouse``.
``postgres``    pyiceberg SQL catalog on PostgreSQL (``schema`` is the
                database); ``extra.warehouse`` is required.
``sqlite``      pyiceberg SQL catalog on SQLite (``host`` is the file path);
                ``extra.warehouse`` is required.
==============  ===========================================================

In every preset, ``extra`` keys that are pyiceberg properties pass through
verbatim (``uri``, ``warehouse``, ``credential``, ``token``, ``scope``,
``prefix``, ``oauth2-server-uri``, ``py-io-impl``, and any dotted key such as
``s3.endpoint``, ``glue.id``, ``header.X-Iceberg-Access-Delegation``), and
``extra.catalog_properties`` (a mapping) overrides everything last.
``extra.catalog_name`` sets the catalog's name (SQL catalogs store it with
every table; default: the connection id).

Every secret (password, credential, token, secret keys, session tokens; for
``iceberg`` connections the password and the secret-looking extras) is
registered with Airflow's secrets masker before the catalog is built, so it
is masked in every task log line, including pyiceberg's and the provider's.

When the lake refuses or cannot be reached — wrong keys, an expired session
token (vended or not), a missing bucket, an endpoint that does not answer, a
catalog answering 5xx — ``lake_errors(ref)`` turns the library's exception
(pyarrow's ``OSError``, botocore's, pyiceberg's REST errors, SQLAlchemy's)
into a ``LakeAccessError`` that names the connection and the fields to check,
with the original chained and no secret in the text. The operators wrap their
work in it.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

log = logging.getLogger(__name__)

ICEBERG_CONN_TYPE = "iceberg"  # the Apache Iceberg provider's connection type (IcebergHook)
HORIZON_PATH = "/polaris/api/catalog"
ACCESS_DELEGATION_HEADER = "header.X-Iceberg-Access-Delegation"
VENDED_CREDENTIALS = "vended-credentials"

# Extra keys copied verbatim into the catalog properties (dotted keys always are).
PASSTHROUGH = frozenset(
    {
        "type",
        "uri",
        "warehouse",
        "credential",
        "token",
        "scope",
        "prefix",
        "audience",
        "resource",
        "oauth2-server-uri",
        "py-io-impl",
        "py-catalog-impl",
        "snapshot-loading-mode",
        "namespace-separator",
        "init_catalog_tables",
        "echo",
        "pool_pre_ping",
    }
)

# Applied with fullmatch (``$`` also matches before a final newline).
_REF = re.compile(r"[A-Za-z0-9_.\-]{1,250}", re.ASCII)
_ACCOUNT = re.compile(r"[A-Za-z0-9_.\-]{1,255}", re.ASCII)
_ROLE = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,254}", re.ASCII)
_SECRET_KEY = re.compile(r"(password|secret|credential|token|sas|account-key|connection-string)", re.IGNORECASE)


class CatalogConfigError(ValueError):
    """A catalog connection or config is incomplete or contradictory."""


class LakeProblem(enum.StrEnum):
    """Why the lake refused a task (``LakeAccessError.problem``)."""

    CREDENTIALS = "credentials"  # unknown key id, wrong secret
    SESSION_TOKEN = "session_token"  # temporary credentials refused: expired, revoked or malformed
    ACCESS_DENIED = "access_denied"  # known credentials without the permission
    NO_BUCKET = "no_bucket"
    UNREACHABLE = "unreachable"  # no answer from the catalog or the storage endpoint
    CATALOG_AUTH = "catalog_auth"  # the catalog refused its own client credentials (REST OAuth, database login)
    CATALOG_UNAVAILABLE = "catalog_unavailable"  # the catalog answered 503 (or 5xx outside a commit)
    COMMIT_STATE_UNKNOWN = "commit_state_unknown"  # 5xx on a commit the catalog may have applied


# What went wrong, and what to check (fields of the connection first).
_WHAT_AND_CHECK: dict[LakeProblem, tuple[str, str]] = {
    LakeProblem.CREDENTIALS: (
        "the storage or the catalog refused the credentials (unknown access key id or wrong secret)",
        "the access key id and secret: login/password of an aws connection, s3.access-key-id / "
        "s3.secret-access-key (or glue.*) in extra",
    ),
    LakeProblem.SESSION_TOKEN: (
        "the storage refused the session token: the temporary credentials expired, were revoked or are malformed",
        "extra.aws_session_token / s3.session-token; for a REST catalog that vends credentials, the storage "
        "role or integration it vends them for (each run asks the catalog for fresh ones)",
    ),
    LakeProblem.ACCESS_DENIED: (
        # S3 answers a HEAD request signed with a wrong secret with a bare 403: it reads as access denied.
        "the storage denied access (HTTP 403): the credentials are wrong, or lack a permission",
        "the access key id and secret (login/password of an aws connection, s3.access-key-id / "
        "s3.secret-access-key in extra), then the permissions of the key or role on the warehouse prefix "
        "(read, write, list, delete)",
    ),
    LakeProblem.NO_BUCKET: (
        "the bucket does not exist",
        "extra.warehouse (the bucket and prefix new tables go to) and the table's location",
    ),
    LakeProblem.UNREACHABLE: (
        "the catalog or the storage endpoint cannot be reached",
        "host / uri, extra.endpoint_url or s3.endpoint, and the network (DNS, proxy, firewall) from the workers",
    ),
    LakeProblem.CATALOG_AUTH: (
        "the catalog refused the connection's own credentials",
        "login/password (OAuth2 client id and secret, or the database login), extra.credential / token / scope",
    ),
    LakeProblem.CATALOG_UNAVAILABLE: (
        "the catalog answered with a server error (unavailable)",
        "the catalog service (its health and logs); the next run reads the table's state first and loads what "
        "is missing",
    ),
    LakeProblem.COMMIT_STATE_UNKNOWN: (
        "the catalog failed while committing: the commit may or may not have been applied",
        "the catalog service (its health and logs); the next run reads the table's state first, so the window "
        "is neither loaded twice nor skipped",
    ),
}

# Matched in the text of every exception of the chain (lower-cased), in this order.
_TEXT_RULES: tuple[tuple[LakeProblem, tuple[str, ...]], ...] = (
    (LakeProblem.NO_BUCKET, ("no_such_bucket", "nosuchbucket", "bucket does not exist")),
    (
        LakeProblem.SESSION_TOKEN,
        ("invalidtoken", "expiredtoken", "token is malformed", "token has expired", "security token included"),
    ),
    (
        LakeProblem.CREDENTIALS,
        (
            "signature_does_not_match",
            "signaturedoesnotmatch",
            "invalidsignatureexception",
            "invalid_access_key_id",
            "invalidaccesskeyid",
            "unrecognizedclientexception",
            "invalidclienttokenid",
            "access key id you provided does not exist",
        ),
    ),
    (LakeProblem.ACCESS_DENIED, ("access_denied", "accessdenied", "access denied")),
    (
        LakeProblem.UNREACHABLE,
        (
            "network_connection",
            "could not connect",
            "couldn't connect",
            "could not resolve host",
            "couldn't resolve host",
            "connection refused",
            "failed to establish a new connection",
            "max retries exceeded",
            "timed out",
        ),
    ),
)
_TYPE_RULES: dict[str, LakeProblem] = {
    "EndpointConnectionError": LakeProblem.UNREACHABLE,
    "ConnectTimeoutError": LakeProblem.UNREACHABLE,
    "ConnectionError": LakeProblem.UNREACHABLE,  # requests' (REST catalogs) and the builtin
    "ConnectionRefusedError": LakeProblem.UNREACHABLE,
    "NoCredentialsError": LakeProblem.CREDENTIALS,
    "UnauthorizedError": LakeProblem.CATALOG_AUTH,
    "OAuthError": LakeProblem.CATALOG_AUTH,
    "AuthorizationExpiredError": LakeProblem.CATALOG_AUTH,
    "ForbiddenError": LakeProblem.ACCESS_DENIED,
    "ServiceUnavailableError": LakeProblem.CATALOG_UNAVAILABLE,
    "ServerError": LakeProblem.CATALOG_UNAVAILABLE,
    "CommitStateUnknownException": LakeProblem.COMMIT_STATE_UNKNOWN,
}


_NOT_THE_LAKE = ("snowflake.", "snowberg.snowflake")


class LakeAccessError(RuntimeError):
    """The lake refused a task or could not be reached; the message names the connection and what to check."""

    def __init__(self, message: str, *, ref: str, problem: LakeProblem) -> None:
        super().__init__(message)
        self.ref = ref
        self.problem = problem


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen and len(seen) < 20:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def classify_lake_error(exc: BaseException) -> LakeProblem | None:
    """What ``exc`` says about the lake (None: not a lake access problem, e.g. a bug or a config error)."""
    chain = list(_chain(exc))
    for e in chain:
        # Already explained, or Snowflake's side of the task (its connector speaks HTTP too): not the lake.
        if isinstance(e, LakeAccessError) or type(e).__module__.startswith(_NOT_THE_LAKE):
            return None
    for e in chain:
        problem = _TYPE_RULES.get(type(e).__name__)
        if problem is not None:
            return problem
    for e in chain:
        text = f"{type(e).__name__}: {e}".lower()
        for problem, needles in _TEXT_RULES:
            if any(n in text for n in needles):
                return problem
        if type(e).__module__.startswith(("sqlalchemy", "psycopg")) and "connect" in text:
            return LakeProblem.UNREACHABLE  # the SQL catalog's database
    return None


def _connection_secrets(ref: str) -> list[str]:
    """The secret values of connection ``ref`` (to keep them out of error texts); best effort."""
    try:
        conn = _airflow_connection(ref)
        if conn is None:
            return []
        out = [conn.password] if conn.password else []
        extra = {k: _s(v) for k, v in (conn.extra_dejson or {}).items() if not isinstance(v, dict)}
        out += secret_values(extra)
        if (conn.conn_type or "").lower() != ICEBERG_CONN_TYPE:
            out += secret_values(catalog_properties(conn))
        return [s for s in out if s]
    except Exception:  # noqa: BLE001 - the message is built on a failure path: never fail it again
        return []


def describe_lake_error(ref: str, problem: LakeProblem, exc: BaseException) -> str:
    """The ``LakeAccessError`` text: the connection, what went wrong, what to check, the original (no secret)."""
    what, check = _WHAT_AND_CHECK[problem]
    original = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:400]
    for secret in sorted(_connection_secrets(ref), key=len, reverse=True):
        original = original.replace(secret, "***")
    committed = (
        "A run commits its rows and its watermark together or not at all: the next run after the fix loads "
        "from the table's last commit."
    )
    return f"lake connection {ref!r}: {what}. Check {check} (Airflow connection {ref!r}). {committed} [{original}]"


@contextlib.contextmanager
def lake_errors(ref: str) -> Iterator[None]:
    """Turn the lake's refusals in the block into a ``LakeAccessError`` naming connection ``ref``.

    Anything else (a bug, a config error, a conflict between runs) passes
    unchanged. The original exception stays chained for the traceback.
    """
    try:
        yield
    except Exception as exc:
        problem = classify_lake_error(exc)
        if problem is None:
            raise
        raise LakeAccessError(describe_lake_error(ref, problem, exc), ref=ref, problem=problem) from exc


class ConnectionLike(Protocol):
    """What ``catalog_properties`` reads from an Airflow ``Connection``."""

    conn_id: str
    conn_type: str | None
    host: str | None
    schema: str | None
    login: str | None
    password: str | None
    port: int | None

    @property
    def extra_dejson(self) -> dict[str, Any]: ...


def _s(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _passthrough(extra: Mapping[str, Any]) -> dict[str, str]:
    return {
        k: _s(v)
        for k, v in extra.items()
        if (k in PASSTHROUGH or "." in k) and v is not None and not isinstance(v, dict)
    }


def horizon_uri(account: str) -> str:
    """The Horizon Iceberg REST endpoint of a Snowflake account (``orgname-acct`` or locator.region)."""
    if not _ACCOUNT.fullmatch(account or ""):
        raise CatalogConfigError(f"invalid Snowflake account identifier {account!r}")
    host = account if account.endswith(".snowflakecomputing.com") else f"{account}.snowflakecomputing.com"
    return f"https://{host}{HORIZON_PATH}"


def horizon_properties(
    *, account: str | None, pat: str | None, role: str | None, database: str | None, uri: str | None = None
) -> dict[str, str]:
    """pyiceberg RestCatalog properties for Snowflake Horizon (what the seed's Spark config sets).

    The PAT is sent once, as the OAuth ``client_secret`` of a client-credentials
    token request to ``<uri>/v1/oauth/tokens`` with ``scope=session:role:<ROLE>``;
    every catalog call then carries the short-lived bearer token Horizon returns.
    """
    missing = [n for n, v in (("password (the PAT)", pat), ("extra.role", role), ("extra.database", database)) if not v]
    if uri is None and not account:
        missing.append("extra.account")
    if missing:
        raise CatalogConfigError(f"Snowflake Horizon catalog needs {', '.join(missing)}")
    assert pat is not None and role is not None and database is not None
    if not _ROLE.fullmatch(role):
        raise CatalogConfigError(f"invalid Snowflake role {role!r} for the Horizon scope")
    base = (uri or horizon_uri(account or "")).rstrip("/")
    return {
        "type": "rest",
        "uri": base,
        "oauth2-server-uri": f"{base}/v1/oauth/tokens",
        "credential": pat,
        "scope": f"session:role:{role}",
        "warehouse": database,
        ACCESS_DELEGATION_HEADER: VENDED_CREDENTIALS,
    }


def _snowflake(conn: ConnectionLike, extra: Mapping[str, Any]) -> dict[str, str]:
    account = extra.get("account")
    if not account and conn.host and conn.host.endswith(".snowflakecomputing.com"):
        account = conn.host[: -len(".snowflakecomputing.com")]
    return horizon_properties(
        account=account,
        pat=conn.password,
        role=extra.get("role"),
        database=extra.get("database"),
        uri=extra.get("catalog_uri"),
    )


def _aws(conn: ConnectionLike, extra: Mapping[str, Any]) -> dict[str, str]:
    props: dict[str, str] = {"type": str(extra.get("catalog_type") or "glue")}
    region = extra.get("region_name") or extra.get("region")
    if region:
        props["glue.region"] = props["s3.region"] = str(region)
    if conn.login:
        props["glue.access-key-id"] = props["s3.access-key-id"] = conn.login
    if conn.password:
        props["glue.secret-access-key"] = props["s3.secret-access-key"] = conn.password
    token = extra.get("aws_session_token")
    if token:
        props["glue.session-token"] = props["s3.session-token"] = str(token)
    if extra.get("endpoint_url"):
        props["glue.endpoint"] = props["s3.endpoint"] = str(extra["endpoint_url"])
    service = extra.get("service_config") or {}
    for svc in ("glue", "s3"):
        url = (service.get(svc) or {}).get("endpoint_url") if isinstance(service, dict) else None
        if url:
            props[f"{svc}.endpoint"] = str(url)
    return props


def _postgres(conn: ConnectionLike, extra: Mapping[str, Any]) -> dict[str, str]:
    if not conn.host or not conn.schema:
        raise CatalogConfigError(
            f"connection {conn.conn_id!r}: a PostgreSQL SQL catalog needs host and schema (the database)"
        )
    auth = ""
    if conn.login:
        auth = quote(conn.login, safe="")
        if conn.password:
            auth += ":" + quote(conn.password, safe="")
        auth += "@"
    port = f":{conn.port}" if conn.port else ""
    return {"type": "sql", "uri": f"postgresql+psycopg2://{auth}{conn.host}{port}/{quote(conn.schema, safe='')}"}


def _sqlite(conn: ConnectionLike, extra: Mapping[str, Any]) -> dict[str, str]:
    if not conn.host:
        raise CatalogConfigError(
            f"connection {conn.conn_id!r}: a SQLite SQL catalog needs host (the database file path)"
        )
    return {"type": "sql", "uri": f"sqlite:///{conn.host}"}


_PRESETS = {"snowflake": _snowflake, "aws": _aws, "postgres": _postgres, "postgresql": _postgres, "sqlite": _sqlite}


def catalog_properties(conn: ConnectionLike) -> dict[str, str]:
    """pyiceberg catalog properties for an Airflow connection (pure: no I/O, no imports)."""
    extra = dict(conn.extra_dejson or {})
    ctype = (conn.conn_type or "").lower()
    preset = _PRESETS.get(ctype)
    if preset is None:
        raise CatalogConfigError(
            f"connection {conn.conn_id!r} (conn_type {conn.conn_type!r}) is not a catalog connection: use conn_type "
            f"{ICEBERG_CONN_TYPE} (the Apache Iceberg provider's) or one of {', '.join(sorted(set(_PRESETS)))}"
        )
    props = preset(conn, extra)
    passthrough = _passthrough(extra)
    if ctype == "snowflake":
        # The provider's extras mean something else here: ``warehouse`` is the
        # compute warehouse for SQL; the catalog's warehouse is the database.
        passthrough.pop("warehouse", None)
    props.update(passthrough)
    overrides = extra.get("catalog_properties") or {}
    if not isinstance(overrides, dict):
        raise CatalogConfigError(f"connection {conn.conn_id!r}: extra.catalog_properties must be a mapping")
    props.update({k: _s(v) for k, v in overrides.items()})
    if props.get("type") == "sql" and not props.get("warehouse"):
        raise CatalogConfigError(
            f"connection {conn.conn_id!r}: a SQL catalog needs extra.warehouse (e.g. s3://bucket/lake)"
        )
    if not props.get("type") and not props.get("py-catalog-impl"):
        raise CatalogConfigError(f"connection {conn.conn_id!r}: cannot tell the catalog type; set extra.type")
    return props


def catalog_name(conn: ConnectionLike) -> str:
    """The pyiceberg catalog name for ``conn``: ``extra.catalog_name`` if set, else the connection id."""
    return str((conn.extra_dejson or {}).get("catalog_name") or conn.conn_id)


def secret_values(props: Mapping[str, str]) -> list[str]:
    """The values of ``props`` that are secrets (for the masker)."""
    out: list[str] = []
    for k, v in props.items():
        if not v:
            continue
        # header.* properties are sent as HTTP headers to the catalog: Authorization, X-Api-Key and
        # the like carry credentials, so every header value counts as a secret.
        # Any dotted part: ``adls.sas-token.<account>`` ends in the account name, not in a secret-looking word.
        if any(_SECRET_KEY.search(p) for p in k.split(".")) or k.lower().startswith("header."):
            out.append(v)
            if k == "credential" and ":" in v:
                out.append(v.split(":", 1)[1])
        elif k == "uri" and "@" in v and "://" in v:
            userinfo = v.split("://", 1)[1].split("@", 1)[0]
            if ":" in userinfo:
                out.append(userinfo.split(":", 1)[1])
    return out


def redacted(props: Mapping[str, str]) -> dict[str, str]:
    """``props`` with secret values replaced by ``***`` (what snowberg itself logs)."""
    secrets = secret_values(props)
    out = {}
    for k, v in props.items():
        for s in secrets:
            if s and s in v:
                v = v.replace(s, "***")
        out[k] = v
    return out


def mask_secrets(props: Mapping[str, str]) -> None:
    """Register every secret of ``props`` with Airflow's secrets masker (task and supervisor logs)."""
    from airflow.sdk.log import mask_secret

    for value in secret_values(props):
        mask_secret(value)


def _airflow_connection(conn_id: str) -> ConnectionLike | None:
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return Connection.get(conn_id)  # type: ignore[no-any-return]
    except AirflowNotFoundException:
        return None


def catalog_from_connection(conn_id: str) -> Catalog:
    """Build the catalog an Airflow connection describes (raises if the connection does not exist)."""
    conn = _airflow_connection(conn_id)
    if conn is None:
        raise CatalogConfigError(f"no Airflow connection {conn_id!r}")
    return _from_connection(conn)


def _from_connection(conn: ConnectionLike) -> Catalog:
    if (conn.conn_type or "").lower() == ICEBERG_CONN_TYPE:
        return _from_iceberg_hook(conn)
    return _load(catalog_name(conn), catalog_properties(conn), f"Airflow connection {conn.conn_id!r}")


def _from_iceberg_hook(conn: ConnectionLike) -> Catalog:
    """The provider's hook builds the catalog (``load_catalog(conn_id, **extra, uri=host, credential=...)``)."""
    from airflow.providers.apache.iceberg.hooks.iceberg import IcebergHook

    extra = {k: _s(v) for k, v in (conn.extra_dejson or {}).items() if not isinstance(v, dict)}
    mask_secrets({**extra, **({"password": conn.password} if conn.password else {})})
    log.info(
        "opening Iceberg catalog %r through the Iceberg provider's hook (uri %s): %s",
        conn.conn_id,
        conn.host,
        redacted(extra),
    )
    return IcebergHook(iceberg_conn_id=conn.conn_id).catalog


def _load(name: str, props: Mapping[str, Any], source: str) -> Catalog:
    from pyiceberg.catalog import load_catalog

    flat = {k: _s(v) for k, v in props.items() if not isinstance(v, dict)}
    mask_secrets(flat)
    log.info("opening Iceberg catalog %r from %s: %s", name, source, redacted(flat))
    try:
        return load_catalog(name, **props)
    except Exception as exc:
        # pyiceberg's SqlCatalog creates its tables when it opens a database that has none, and two
        # processes opening a new catalog at once (the first tasks of several DAGs) race on it: the
        # loser's CREATE TABLE fails with "already exists". The tables exist then: open it again.
        if "already exists" not in str(exc):
            raise
        log.info("Iceberg catalog %r was being created by another process; opening it again", name)
        return load_catalog(name, **props)


def open_catalog(ref: str) -> Catalog:
    """The catalog ``ref`` names: an Airflow connection id first, else pyiceberg's config for that name.

    pyiceberg reads its environment once, at import; the fallback re-reads it
    here so that settings exported after start-up are honoured too.
    """
    if not isinstance(ref, str) or not _REF.fullmatch(ref):
        raise CatalogConfigError(f"invalid catalog reference {ref!r}")
    conn = _airflow_connection(ref)
    if conn is not None:
        return _from_connection(conn)
    from pyiceberg.utils.config import Config

    conf = Config().get_catalog_config(ref)
    if conf is None:
        raise CatalogConfigError(
            f"catalog {ref!r} is not configured: create an Airflow connection {ref!r} or set "
            f"PYICEBERG_CATALOG__{ref.upper()}__TYPE (and its other settings) or ~/.pyiceberg.yaml"
        )
    return _load(ref, conf, "pyiceberg configuration")
