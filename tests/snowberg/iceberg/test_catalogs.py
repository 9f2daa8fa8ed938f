"""``iceberg`` connections (the Apache Iceberg provider's type) as a table's ``catalog:``, on a SQL catalog."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from snowberg.iceberg.catalogs import open_catalog


def test_an_iceberg_connection_with_a_sql_catalog_works_as_a_tables_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wh = tmp_path / "wh"
    wh.mkdir()
    conn = {
        "conn_type": "iceberg",
        "extra": {"type": "sql", "uri": f"sqlite:///{tmp_path / 'cat.db'}", "warehouse": f"file://{wh}"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_ICEBERG", json.dumps(conn))
    cat = open_catalog("lake_iceberg")
    assert type(cat).__name__ == "SqlCatalog" and cat.name == "lake_iceberg"
    cat.create_namespace("shop")
    # A second open (another task) sees what the first one created: the same catalog.
    assert ("shop",) in open_catalog("lake_iceberg").list_namespaces()


def test_a_table_config_accepts_the_connection_id_as_its_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from snowberg.config.table_config import parse_config
    from snowberg.iceberg.catalogs import open_catalog as lake_catalog

    (tmp_path / "wh").mkdir()
    monkeypatch.setenv(
        "AIRFLOW_CONN_ICE",
        json.dumps(
            {
                "conn_type": "iceberg",
                "extra": {"type": "sql", "uri": f"sqlite:///{tmp_path / 'c.db'}", "warehouse": f"file://{tmp_path}/wh"},
            }
        ),
    )
    cfg = parse_config(
        {
            "tables": [
                {
                    "name": "t",
                    "source": {"table": "DB.S.T"},
                    "target": "n.t",
                    "catalog": "ice",
                    "cursor": {"column": "u"},
                }
            ]
        }
    ).tables[0]
    assert type(lake_catalog(cfg.catalog)).__name__ == "SqlCatalog"


def test_a_sql_catalog_created_by_another_process_at_the_same_time_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first tasks of several DAGs open a new SQLite catalog at once; one loses the CREATE TABLE race."""
    import pyiceberg.catalog as pc

    real = pc.load_catalog
    calls: list[str] = []

    def racing(name: str, **props: object) -> object:
        calls.append(name)
        if len(calls) == 1:
            real(name, **props)  # the other process created the tables just before us ...
            raise RuntimeError("(sqlite3.OperationalError) table iceberg_tables already exists")
        return real(name, **props)

    monkeypatch.setattr(pc, "load_catalog", racing)
    monkeypatch.setenv("PYICEBERG_CATALOG__RACE__TYPE", "sql")
    monkeypatch.setenv("PYICEBERG_CATALOG__RACE__URI", f"sqlite:///{tmp_path / 'c.db'}")
    monkeypatch.setenv("PYICEBERG_CATALOG__RACE__WAREHOUSE", f"file://{tmp_path}")
    cat = open_catalog("race")
    assert cat.list_namespaces() == [] and len(calls) == 2


def test_an_adls_sas_token_keyed_by_account_is_a_secret() -> None:
    """``adls.sas-token.<account>``: the last dotted part is the account name, not a secret-looking word."""
    from snowberg.iceberg.catalogs import redacted, secret_values

    props = {"adls.sas-token.myaccount": "sv=2024&sig=abc123", "adls.account-name": "myaccount"}
    assert secret_values(props) == ["sv=2024&sig=abc123"]
    assert redacted(props) == {"adls.sas-token.myaccount": "***", "adls.account-name": "myaccount"}


# ---------------------------------------------------------------------------
# The lake's refusals, explained (the texts are what pyarrow 26, botocore and pyiceberg 0.12 raise against
# moto's S3/Glue and a REST catalog; tests/scenarios/test_lake_errors.py produces them for real).

_PYARROW = "When initiating multiple part upload for key 'a/y.txt' in bucket 'b': AWS Error {} during PutObject"


@pytest.mark.parametrize(
    ("exc", "problem"),
    [
        (OSError(_PYARROW.format("SIGNATURE_DOES_NOT_MATCH") + ": The request signature ..."), "credentials"),
        (OSError(_PYARROW.format("UNKNOWN (HTTP status 400)") + ": ExceptionName: InvalidToken"), "session_token"),
        (OSError(_PYARROW.format("NO_SUCH_BUCKET") + ": The specified bucket does not exist"), "no_bucket"),
        (OSError(_PYARROW.format("ACCESS_DENIED") + ": Access Denied"), "access_denied"),
        (OSError(_PYARROW.format("NETWORK_CONNECTION") + ": curlCode: 7, Could not connect to server"), "unreachable"),
    ],
)
def test_storage_errors_are_classified_by_what_they_say(exc: BaseException, problem: str) -> None:
    from snowberg.iceberg.catalogs import classify_lake_error

    assert classify_lake_error(exc) == problem


def test_catalog_errors_are_classified_by_their_type_through_the_chain() -> None:
    from botocore.exceptions import ClientError, EndpointConnectionError
    from pyiceberg.exceptions import CommitStateUnknownException, ServiceUnavailableError, UnauthorizedError

    from snowberg.iceberg.catalogs import classify_lake_error

    glue = ClientError({"Error": {"Code": "SignatureDoesNotMatch", "Message": "..."}}, "GetTable")
    assert classify_lake_error(glue) == "credentials"
    assert classify_lake_error(EndpointConnectionError(endpoint_url="http://127.0.0.1:9")) == "unreachable"
    assert classify_lake_error(ServiceUnavailableError("ServiceUnavailableException: down")) == "catalog_unavailable"
    assert classify_lake_error(CommitStateUnknownException("500")) == "commit_state_unknown"
    assert classify_lake_error(UnauthorizedError("401")) == "catalog_auth"
    try:
        try:
            raise ServiceUnavailableError("503")
        except ServiceUnavailableError as inner:
            raise RuntimeError("while committing") from inner
    except RuntimeError as outer:
        assert classify_lake_error(outer) == "catalog_unavailable"


def test_what_is_not_the_lake_passes_unchanged() -> None:
    """A bug, a config error, or Snowflake's side of the task (its connector speaks HTTP too) is not explained away."""
    import snowflake.connector.errors as sf

    from snowberg.iceberg.catalogs import CatalogConfigError, LakeAccessError, lake_errors

    for exc in (
        KeyError("id"),
        CatalogConfigError("no warehouse"),
        sf.OperationalError(msg="Could not connect to Snowflake backend after 2 attempt(s)"),
    ):
        with pytest.raises(type(exc)), lake_errors("lake"):
            raise exc
    with pytest.raises(LakeAccessError) as e, lake_errors("lake"):
        raise OSError(_PYARROW.format("NO_SUCH_BUCKET"))
    assert e.value.problem == "no_bucket" and e.value.ref == "lake"


def test_the_message_names_the_connection_and_the_fields_to_check_and_hides_its_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from snowberg.iceberg.catalogs import LakeAccessError, lake_errors

    secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
    conn = {"conn_type": "aws", "login": "AKIAEXAMPLE", "password": secret, "extra": {"region_name": "eu-west-1"}}
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_PROD", json.dumps(conn))
    with pytest.raises(LakeAccessError) as e, lake_errors("lake_prod"):
        raise OSError(_PYARROW.format("SIGNATURE_DOES_NOT_MATCH") + f" (signed with {secret})")
    text = str(e.value)
    assert text.startswith("lake connection 'lake_prod': the storage or the catalog refused the credentials")
    assert "login/password of an aws connection" in text and "Airflow connection 'lake_prod'" in text
    assert secret not in text and "***" in text
    assert isinstance(e.value.__cause__, OSError)
