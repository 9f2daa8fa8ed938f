"""A small Iceberg REST catalog server for the contract tests, shaped like Snowflake Horizon.

It serves the endpoints pyiceberg's ``RestCatalog`` calls, per the Iceberg
REST OpenAPI spec, under Horizon's base path ``/polaris/api/catalog``:

* ``GET  /v1/config?warehouse=<DATABASE>`` → defaults/overrides (``prefix``)
* ``POST /v1/oauth/tokens`` (form: ``grant_type=client_credentials``,
  ``client_secret=<PAT>``, ``scope=session:role:<ROLE>``) → a bearer token,
  or the OAuth error shapes (``invalid_client``, ``invalid_scope``)
* ``/v1/{prefix}/namespaces[/{ns}]`` (list, create, load, exists)
* ``/v1/{prefix}/namespaces/{ns}/tables[/{table}]`` (list, create, load,
  exists, commit: ``CommitTableRequest`` → ``CommitTableResponse``, 409 when a
  requirement fails)

Lost commit responses, for the exactly-once tests: ``lose_next_commit_responses``
commits are applied and then answered with nothing (the connection is closed
under the client, as when a proxy or the network drops it), or, with
``lost_commit_status`` set, with that HTTP error (a gateway's 502/504 after the
catalog applied the commit). Each such commit's snapshot id is kept in
``lost_commits``.

A catalog that is down for a moment, for the bad-input tests:
``refuse_next_commits`` commits are answered with ``refuse_status`` (a 500 or
503 from the catalog or a gateway in front of it) *without* being applied.

Every call except the token exchange needs ``Authorization: Bearer <token>``
with a token this server issued. Tables live in a pyiceberg ``SqlCatalog``
(the server's own: SQLite or PostgreSQL, with a local or S3 warehouse that
the server reaches with its own credentials). When the request carries
``X-Iceberg-Access-Delegation: vended-credentials``, the load/create response
``config`` hands out the storage credentials (``vended`` below, read at each
response, so a test can change them between calls); without the header it
hands out none. Every request is recorded for the assertions.
"""

from __future__ import annotations

import json
import secrets
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from requests.structures import CaseInsensitiveDict

BASE = "/polaris/api/catalog"


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: CaseInsensitiveDict[str]
    body: bytes

    @property
    def form(self) -> dict[str, list[str]]:
        return parse_qs(self.body.decode())

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class HorizonLikeServer:
    """Start with ``start()``, stop with ``stop()`` (or use as a context manager)."""

    catalog: Any  # a pyiceberg SqlCatalog: where the server keeps its tables
    pat: str
    role: str
    database: str
    vended: dict[str, str] = field(default_factory=dict)
    token_ttl: int = 3600
    requests: list[Recorded] = field(default_factory=list)
    tokens: dict[str, str] = field(default_factory=dict)  # token → role
    fail_next_commits: int = 0  # answer 409 to this many commits (after applying nothing)
    before_commit: Any = None  # callable run inside the commit handler, before applying (for races)
    lose_next_commit_responses: int = 0  # apply this many commits, then lose the response (see module doc)
    lost_commit_status: int | None = None  # None: close the connection; else answer this HTTP status
    lost_commits: list[int | None] = field(default_factory=list)  # snapshot id after each lost commit
    refuse_next_commits: int = 0  # answer this many commits with ``refuse_status``, applying nothing
    refuse_status: int = 503
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def uri(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{BASE}"

    def start(self) -> HorizonLikeServer:
        handler = type("Handler", (_Handler,), {"srv": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="rest-catalog", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(10)
        self._server = self._thread = None

    def __enter__(self) -> HorizonLikeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def calls(self, method: str | None = None, contains: str = "") -> list[Recorded]:
        return [r for r in self.requests if (method is None or r.method == method) and contains in r.path]


def _ns(text: str) -> tuple[str, ...]:
    return tuple(unquote(text).split("\x1f"))


class _Handler(BaseHTTPRequestHandler):
    srv: HorizonLikeServer
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args: Any) -> None:  # keep test output quiet
        pass

    # -- plumbing ----------------------------------------------------------

    def _record(self) -> Recorded:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        rec = Recorded(self.command, parts.path, parse_qs(parts.query), CaseInsensitiveDict(self.headers.items()), body)
        with self.srv._lock:
            self.srv.requests.append(rec)
        return rec

    def _send(self, status: int, payload: Any = None) -> None:
        data = b"" if payload is None else (payload if isinstance(payload, bytes) else json.dumps(payload).encode())
        self.send_response(status)
        if data:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data and self.command != "HEAD":
            self.wfile.write(data)

    def _lose_response(self) -> None:
        """The commit is applied; the client never learns it (a dropped connection or a gateway error)."""
        status = self.srv.lost_commit_status
        if status is not None:
            return self._error(status, "ServerError", "injected: the upstream response was lost")
        self.close_connection = True
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        return None

    def _error(self, status: int, typ: str, message: str) -> None:
        self._send(status, {"error": {"message": message, "type": typ, "code": status}})

    def _authorized(self, rec: Recorded) -> bool:
        auth = rec.headers.get("Authorization", "")
        token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else None
        if token is None or token not in self.srv.tokens:
            self._error(401, "NotAuthorizedException", "missing or unknown bearer token")
            return False
        return True

    def do_GET(self) -> None:  # noqa: N802
        self._dispatch()

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch()

    def do_HEAD(self) -> None:  # noqa: N802
        self._dispatch()

    def do_DELETE(self) -> None:  # noqa: N802
        self._dispatch()

    # -- routes ------------------------------------------------------------

    def _dispatch(self) -> None:
        rec = self._record()
        path = rec.path
        if not path.startswith(BASE + "/v1/"):
            return self._error(404, "NotFoundException", f"no route {path}")
        rest = path[len(BASE + "/v1/") :]
        try:
            if rest == "oauth/tokens" and rec.method == "POST":
                return self._token(rec)
            if not self._authorized(rec):
                return None
            if rest == "config":
                return self._config(rec)
            prefix, _, rest = rest.partition("/")
            if prefix != self.srv.database:
                return self._error(404, "NotFoundException", f"unknown catalog prefix {prefix!r}")
            return self._catalog_route(rec, rest.split("/"))
        except Exception as exc:  # surface server bugs as 500s the client reports
            return self._error(500, type(exc).__name__, str(exc))

    def _token(self, rec: Recorded) -> None:
        form = {k: v[0] for k, v in rec.form.items()}
        if form.get("grant_type") != "client_credentials":
            return self._send(400, {"error": "unsupported_grant_type", "error_description": "client_credentials only"})
        if form.get("client_secret") != self.srv.pat:
            return self._send(401, {"error": "invalid_client", "error_description": "bad programmatic access token"})
        scope = form.get("scope", "")
        if scope != f"session:role:{self.srv.role}":
            return self._send(400, {"error": "invalid_scope", "error_description": f"scope {scope!r} not allowed"})
        token = "tok-" + secrets.token_hex(16)
        with self.srv._lock:
            self.srv.tokens[token] = self.srv.role
        return self._send(
            200,
            {
                "access_token": token,
                "token_type": "bearer",
                "expires_in": self.srv.token_ttl,
                "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                "scope": scope,
            },
        )

    def _config(self, rec: Recorded) -> None:
        wh = (rec.query.get("warehouse") or [None])[0]
        if wh != self.srv.database:
            return self._error(404, "NotFoundException", f"unknown warehouse {wh!r}")
        return self._send(200, {"defaults": {}, "overrides": {"prefix": self.srv.database}})

    def _table_response(self, rec: Recorded, table: Any) -> dict[str, Any]:
        delegated = rec.headers.get("X-Iceberg-Access-Delegation") == "vended-credentials"
        return {
            "metadata-location": table.metadata_location,
            "metadata": json.loads(table.metadata.model_dump_json()),
            "config": dict(self.srv.vended) if delegated else {},
        }

    def _catalog_route(self, rec: Recorded, parts: list[str]) -> None:
        from pyiceberg.exceptions import (
            CommitFailedException,
            NamespaceAlreadyExistsError,
            NoSuchNamespaceError,
            NoSuchTableError,
            TableAlreadyExistsError,
        )

        cat = self.srv.catalog
        lock = self.srv._lock
        m = rec.method
        if parts == ["namespaces"]:
            if m == "GET":
                with lock:
                    return self._send(200, {"namespaces": [list(n) for n in cat.list_namespaces()]})
            if m == "POST":
                body = rec.json
                try:
                    with lock:
                        cat.create_namespace(tuple(body["namespace"]), body.get("properties") or {})
                except NamespaceAlreadyExistsError as exc:
                    return self._error(409, "AlreadyExistsException", str(exc))
                return self._send(200, {"namespace": body["namespace"], "properties": body.get("properties") or {}})
        if len(parts) == 2 and parts[0] == "namespaces":
            ns = _ns(parts[1])
            try:
                with lock:
                    props = cat.load_namespace_properties(ns)
            except NoSuchNamespaceError as exc:
                return self._error(404, "NoSuchNamespaceException", str(exc))
            return self._send(
                200 if m == "GET" else 204, {"namespace": list(ns), "properties": props} if m == "GET" else None
            )
        if len(parts) == 3 and parts[0] == "namespaces" and parts[2] == "tables":
            ns = _ns(parts[1])
            if m == "GET":
                with lock:
                    ids = cat.list_tables(ns)
                return self._send(200, {"identifiers": [{"namespace": list(i[:-1]), "name": i[-1]} for i in ids]})
            if m == "POST":
                from pyiceberg.catalog.rest import CreateTableRequest

                # pyiceberg's client leaves out the nullable fields it does not set (location: the
                # catalog picks it; partition spec and write order: unpartitioned, unsorted).
                body = {"location": None, "partition-spec": None, "write-order": None, **rec.json}
                req = CreateTableRequest.model_validate(body)
                optional = {
                    k: v
                    for k, v in (
                        ("location", req.location),
                        ("partition_spec", req.partition_spec),
                        ("sort_order", req.write_order),
                    )
                    if v is not None
                }
                try:
                    with lock:
                        table = cat.create_table(
                            ns + (req.name,), schema=req.table_schema, properties=req.properties, **optional
                        )
                except TableAlreadyExistsError as exc:
                    return self._error(409, "AlreadyExistsException", str(exc))
                except NoSuchNamespaceError as exc:
                    return self._error(404, "NoSuchNamespaceException", str(exc))
                return self._send(200, self._table_response(rec, table))
        if len(parts) == 4 and parts[0] == "namespaces" and parts[2] == "tables":
            ident = _ns(parts[1]) + (unquote(parts[3]),)
            if m in ("GET", "HEAD"):
                try:
                    with lock:
                        table = cat.load_table(ident)
                except NoSuchTableError as exc:
                    return self._error(404, "NoSuchTableException", str(exc))
                return self._send(200, self._table_response(rec, table)) if m == "GET" else self._send(204)
            if m == "POST":
                from pyiceberg.table import CommitTableRequest

                req = CommitTableRequest.model_validate_json(rec.body)
                if self.srv.before_commit is not None:
                    self.srv.before_commit(req)
                with lock:
                    if self.srv.fail_next_commits > 0:
                        self.srv.fail_next_commits -= 1
                        return self._error(409, "CommitFailedException", "injected conflict")
                    if self.srv.refuse_next_commits > 0:
                        self.srv.refuse_next_commits -= 1
                        status = self.srv.refuse_status
                        kind = "ServiceUnavailableException" if status == 503 else "InternalServerError"
                        return self._error(status, kind, f"injected: the catalog answered {status}, nothing applied")
                    try:
                        table = cat.load_table(ident)
                        resp = cat.commit_table(table, req.requirements, req.updates)
                    except NoSuchTableError as exc:
                        return self._error(404, "NoSuchTableException", str(exc))
                    except CommitFailedException as exc:
                        return self._error(409, "CommitFailedException", str(exc))
                    lose = self.srv.lose_next_commit_responses > 0
                    if lose:
                        self.srv.lose_next_commit_responses -= 1
                        snap = resp.metadata.current_snapshot_id
                        self.srv.lost_commits.append(snap)
                if lose:
                    return self._lose_response()
                return self._send(200, json.loads(resp.model_dump_json()))
        return self._error(404, "NotFoundException", f"no route {m} {rec.path}")
