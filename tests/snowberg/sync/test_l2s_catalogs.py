"""Catalogs as configuration: Airflow connections → pyiceberg properties, with secrets masked."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import pytest
from l2s_data import DATABASE, PAT, ROLE

from snowberg.iceberg.catalogs import (
    CatalogConfigError,
    catalog_properties,
    open_catalog,
    redacted,
    secret_values,
)


@dataclass
class Conn:
    conn_type: str | None
    conn_id: str = "c"
    host: str | None = None
    schema: str | None = None
    login: str | None = None
    password: str | None = None
    port: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def extra_dejson(self) -> dict[str, Any]:
        return self.extra


def test_snowflake_connection_builds_the_horizon_rest_config() -> None:
    props = catalog_properties(
        Conn(
            "snowflake",
            login="U",
            password=PAT,
            extra={"account": "myorg-myacct", "role": ROLE, "database": DATABASE, "warehouse": "COMPUTE_WH"},
        )
    )  # the SQL warehouse, not the catalog's
    assert props == {
        "type": "rest",
        "uri": "https://myorg-myacct.snowflakecomputing.com/polaris/api/catalog",
        "oauth2-server-uri": "https://myorg-myacct.snowflakecomputing.com/polaris/api/catalog/v1/oauth/tokens",
        "credential": PAT,
        "scope": f"session:role:{ROLE}",
        "warehouse": DATABASE,
        "header.X-Iceberg-Access-Delegation": "vended-credentials",
    }


def test_snowflake_account_from_host_and_missing_fields_are_named() -> None:
    props = catalog_properties(
        Conn(
            "snowflake",
            host="xy12345.eu-west-1.snowflakecomputing.com",
            password=PAT,
            extra={"role": "R", "database": "D"},
        )
    )
    assert props["uri"] == "https://xy12345.eu-west-1.snowflakecomputing.com/polaris/api/catalog"
    with pytest.raises(CatalogConfigError, match=r"password \(the PAT\).*extra.role"):
        catalog_properties(Conn("snowflake", extra={"account": "a", "database": "D"}))
    with pytest.raises(CatalogConfigError, match="invalid Snowflake role"):
        catalog_properties(Conn("snowflake", password=PAT, extra={"account": "a", "role": "R; DROP", "database": "D"}))


def test_aws_connection_builds_glue_and_s3_settings() -> None:
    props = catalog_properties(
        Conn(
            "aws",
            login="AKIA1",
            password="s3cr3t-key",
            extra={
                "region_name": "eu-west-1",
                "aws_session_token": "sess-token-1",
                "service_config": {
                    "glue": {"endpoint_url": "http://glue:5000"},
                    "s3": {"endpoint_url": "http://s3:5000"},
                },
                "warehouse": "s3://bucket/lake",
                "glue.id": "123456789012",
            },
        )
    )
    assert props == {
        "type": "glue",
        "glue.region": "eu-west-1",
        "s3.region": "eu-west-1",
        "glue.access-key-id": "AKIA1",
        "s3.access-key-id": "AKIA1",
        "glue.secret-access-key": "s3cr3t-key",
        "s3.secret-access-key": "s3cr3t-key",
        "glue.session-token": "sess-token-1",
        "s3.session-token": "sess-token-1",
        "glue.endpoint": "http://glue:5000",
        "s3.endpoint": "http://s3:5000",
        "warehouse": "s3://bucket/lake",
        "glue.id": "123456789012",
    }


def test_sql_catalog_connections() -> None:
    pg = catalog_properties(
        Conn(
            "postgres",
            host="db",
            port=5432,
            schema="iceberg",
            login="me",
            password="p@ss:word",
            extra={"warehouse": "s3://b/w"},
        )
    )
    assert pg == {
        "type": "sql",
        "uri": "postgresql+psycopg2://me:p%40ss%3Aword@db:5432/iceberg",
        "warehouse": "s3://b/w",
    }
    lite = catalog_properties(Conn("sqlite", host="/data/cat.db", extra={"warehouse": "file:///data/wh"}))
    assert lite == {"type": "sql", "uri": "sqlite:////data/cat.db", "warehouse": "file:///data/wh"}
    with pytest.raises(CatalogConfigError, match="needs extra.warehouse"):
        catalog_properties(Conn("sqlite", host="/data/cat.db"))


def test_a_connection_of_another_type_is_refused_with_the_types_that_work() -> None:
    """A generic connection with ``extra.type`` was our copy of what the Iceberg provider's hook does."""
    with pytest.raises(CatalogConfigError, match="use conn_type iceberg .*aws, postgres"):
        catalog_properties(Conn("generic", host="https://polaris.example.com", extra={"type": "rest"}))


def test_an_iceberg_connection_opens_the_rest_catalog_through_the_providers_hook(horizon, connection, caplog) -> None:
    """conn_type iceberg: host = catalog URI, login/password = OAuth2 client id/secret, extra = properties."""
    connection(
        "polaris_like",
        {
            "conn_type": "iceberg",
            "host": horizon.uri + "/",
            "login": "svc",
            "password": PAT,
            "extra": {"warehouse": DATABASE, "scope": f"session:role:{ROLE}"},
        },
    )
    caplog.set_level(logging.INFO)
    cat = open_catalog("polaris_like")
    assert type(cat).__name__ == "RestCatalog" and cat.name == "polaris_like"
    assert cat.list_namespaces() == [("SHOP",)]
    assert cat.load_table(("SHOP", "ORDERS")).schema().find_field("ORDER_ID")
    tokens = horizon.calls("POST", "/v1/oauth/tokens")
    assert tokens and all(t.form["client_id"] == ["svc"] and t.form["client_secret"] == [PAT] for t in tokens)
    assert PAT not in caplog.text


def test_secret_values_and_redaction() -> None:
    props = {
        "credential": "client:secret-1",
        "s3.secret-access-key": "sk-1",
        "s3.access-key-id": "AKIA",
        "uri": "postgresql+psycopg2://me:pw-123@db/x",
        "token": "tok-1",
        "scope": "session:role:R",
    }
    assert set(secret_values(props)) == {"client:secret-1", "secret-1", "sk-1", "pw-123", "tok-1"}
    shown = redacted(props)
    assert shown["uri"] == "postgresql+psycopg2://me:***@db/x"
    assert shown["credential"] == "***" and shown["scope"] == "session:role:R" and shown["s3.access-key-id"] == "AKIA"


def test_open_catalog_prefers_the_connection_and_falls_back_to_pyiceberg_config(
    tmp_path, connection, monkeypatch
) -> None:
    wh = tmp_path / "wh"
    wh.mkdir()
    connection(
        "lake_conn",
        {
            "conn_type": "sqlite",
            "host": str(tmp_path / "a.db"),
            "extra": {"warehouse": f"file://{wh}", "catalog_name": "lake"},
        },
    )
    cat = open_catalog("lake_conn")
    assert type(cat).__name__ == "SqlCatalog" and cat.name == "lake"

    monkeypatch.setenv("PYICEBERG_CATALOG__ENVCAT__TYPE", "sql")
    monkeypatch.setenv("PYICEBERG_CATALOG__ENVCAT__URI", f"sqlite:///{tmp_path / 'b.db'}")
    monkeypatch.setenv("PYICEBERG_CATALOG__ENVCAT__WAREHOUSE", f"file://{wh}")
    env_cat = open_catalog("envcat")
    assert type(env_cat).__name__ == "SqlCatalog" and env_cat.name == "envcat"
    env_cat.create_namespace("n")
    assert ("n",) in open_catalog("envcat").list_namespaces()

    with pytest.raises(CatalogConfigError, match="not configured.*PYICEBERG_CATALOG__NOWHERE__TYPE"):
        open_catalog("nowhere")
    with pytest.raises(CatalogConfigError, match="invalid catalog reference"):
        open_catalog("a b")


def test_the_pat_is_masked_in_every_log_line(horizon, horizon_conn, caplog) -> None:
    """A library that echoes the token (here: a debug line with the PAT) is masked once the catalog opened."""
    from airflow.sdk._shared.secrets_masker import SecretsMasker, _secrets_masker

    masker = _secrets_masker()
    was_enabled = SecretsMasker.is_log_masking_enabled()
    SecretsMasker.enable_log_masking()
    caplog.handler.addFilter(masker)
    caplog.set_level(logging.DEBUG)
    try:
        cat = open_catalog(horizon_conn)
        logging.getLogger("pyiceberg.catalog.rest").debug("token request body: client_secret=%s&scope=x", PAT)
        logging.getLogger("some.library").warning(f"retrying with credential {PAT}")
        assert cat.list_namespaces() == [("SHOP",)]
    finally:
        caplog.handler.removeFilter(masker)
        if not was_enabled:
            SecretsMasker.disable_log_masking()
    assert "opening Iceberg catalog 'snowflake_horizon'" in caplog.text
    assert "session:role:SYNC_ROLE" in caplog.text  # the scope is not a secret
    assert "client_secret=***" in caplog.text and "retrying with credential ***" in caplog.text
    assert PAT not in caplog.text
