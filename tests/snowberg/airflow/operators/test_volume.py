"""``VolumeCheckOperator.execute`` on the emulator and a SQLite catalog, connections from the environment."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from snowberg.config.table_config import parse_config

WATERMARK = "2026-01-03 00:00:00.000000"


@pytest.fixture
def env(sfdb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variables: Any) -> Any:
    monkeypatch.setattr("snowberg.iceberg.state.AirflowVariables", lambda: variables)  # no task supervisor here
    src = sfdb.table("SRC")
    sfdb.sql(f"CREATE TABLE {src} (ID NUMBER(38,0), UPDATED_AT TIMESTAMP_NTZ(9))")
    sfdb.sql(
        f"INSERT INTO {src} SELECT seq4() + 1, DATEADD(minute, seq4() + 1, '2026-01-01'::TIMESTAMP_NTZ) "
        "FROM TABLE(GENERATOR(ROWCOUNT => 100))"
    )
    monkeypatch.setenv("AIRFLOW_CONN_SF_OPVOL", sfdb.airflow_connection())
    (tmp_path / "wh").mkdir()
    for k, v in {"TYPE": "sql", "URI": f"sqlite:///{tmp_path}/c.db", "WAREHOUSE": f"file://{tmp_path}/wh"}.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__OPVOL__{k}", v)
    return sfdb


def _entry(sfdb: Any, **volume: Any) -> dict[str, Any]:
    return {
        "name": "orders",
        "source": {"table": sfdb.table("SRC")},
        "target": "lake.orders",
        "cursor": {"column": "updated_at"},
        "primary_key": ["id"],
        "snowflake_conn_id": "sf_opvol",
        "catalog": "opvol",
        "volume": volume,
    }


def _load_in_runs(sizes: list[int]) -> None:
    """The lake holds ids 1..sum(sizes), committed as incremental runs of these sizes (oldest first)."""
    import pyarrow as pa

    from snowberg.iceberg.catalogs import open_catalog

    cat = open_catalog("opvol")
    cat.create_namespace_if_not_exists("lake")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("updated_at", pa.timestamp("us"))])
    t = cat.create_table("lake.orders", schema=schema)
    start = 1
    for i, n in enumerate(sizes):
        ids = list(range(start, start + n))
        start += n
        t.append(
            pa.table(
                {"id": ids, "updated_at": [dt.datetime(2026, 1, 1) + dt.timedelta(minutes=x) for x in ids]},
                schema=schema,
            ),
            snapshot_properties={
                "snowberg.watermark": WATERMARK,
                "snowberg.cursor-kind": "timestamp_ntz",
                "snowberg.run-id": f"r{i}",
                "snowberg.mode": "incremental",
                "snowberg.rows": str(n),
            },
        )


def _op(sfdb: Any, **volume: Any) -> Any:
    from snowberg.airflow.operators.arguments import operator_arguments
    from snowberg.airflow.operators.volume import VolumeCheckOperator

    cfg = parse_config({"tables": [_entry(sfdb, **volume)]}).tables[0]
    return VolumeCheckOperator(task_id="check_volume", **operator_arguments(VolumeCheckOperator, cfg))


def test_no_table_yet_is_skipped_with_the_reason_never_a_success(env: Any) -> None:
    """The reason is pushed as the check's result too: the UI page shows "could not run" and why."""
    from airflow.sdk.exceptions import AirflowSkipException

    pushed: dict[str, Any] = {}

    class TI:
        def xcom_push(self, *, key: str, value: Any) -> None:
            pushed[key] = value

    with pytest.raises(AirflowSkipException, match="the lake table lake.orders does not exist"):
        _op(env).execute({"run_id": "r", "ti": TI()})
    assert pushed["result"]["status"] == "not_run"
    assert "the lake table lake.orders does not exist" in pushed["result"]["reason"]


def test_equal_tables_pass_and_a_small_last_run_only_warns(env: Any) -> None:
    _load_in_runs([19, 19, 19, 19, 19, 5])
    out = _op(env).execute({"run_id": "r"})
    assert out["ok"] and out["source_rows"] == out["lake_rows"] == 100
    assert out["anomaly"]["anomalous"] and "loaded 5 rows" in out["anomaly"]["reason"]


def test_an_anomaly_fails_the_task_when_configured(env: Any) -> None:
    from snowberg.airflow.operators.check_base import SnowbergCheckFailed

    _load_in_runs([19, 19, 19, 19, 19, 5])
    with pytest.raises(SnowbergCheckFailed) as err:
        _op(env, anomaly={"on_anomaly": "fail"}).execute({"run_id": "r"})
    assert err.value.check == "volume_anomaly" and err.value.observed == 5


def test_a_mismatch_fails_with_counts_and_keys(env: Any) -> None:
    from snowberg.airflow.operators.check_base import SnowbergCheckFailed

    _load_in_runs([50, 49])  # id 100 never reached the lake
    with pytest.raises(SnowbergCheckFailed) as err:
        _op(env).execute({"run_id": "r"})
    assert err.value.check == "volume"
    assert err.value.observed["source rows"] == 100 and err.value.observed["lake rows"] == 99
    assert err.value.observed["differing keys"] == [
        "{'id': '100'} source_only (source cursor 2026-01-01 01:40:00.000000, lake cursor None)"
    ]


# ---------------------------------------------------------------------------
# deletes: propagate (issue: propagated deletes)


def _lake_ids() -> list[int]:
    from snowberg.iceberg.catalogs import open_catalog

    t = open_catalog("opvol").load_table("lake.orders")
    return sorted(t.scan(selected_fields=("id",)).to_arrow()["id"].to_pylist())


def _head() -> int:
    from snowberg.iceberg.catalogs import open_catalog

    return open_catalog("opvol").load_table("lake.orders").current_snapshot().snapshot_id


def test_propagate_commits_nothing_when_the_report_has_other_differences(env: Any) -> None:
    """A report with differences besides the hard deletes is not consistent: nothing is removed, the alert says so."""
    from snowberg.airflow.operators.check_base import SnowbergCheckFailed

    _load_in_runs([50, 50])
    env.sql(f"DELETE FROM {env.table('SRC')} WHERE ID = 7")  # a hard delete in the source …
    from snowberg.iceberg.catalogs import open_catalog

    open_catalog("opvol").load_table("lake.orders").delete("id = 60")  # … and a row lost from the lake
    head = _head()
    with pytest.raises(SnowbergCheckFailed) as err:
        _op(env, deletes="propagate", leaf_rows=10).execute({"run_id": "r"})
    assert _head() == head, "deletes were propagated from a report that had other differences"
    assert 7 in _lake_ids()
    assert "not propagated" in str(err.value)
    assert err.value.details["propagation"]["removed"] == 0


def test_propagate_removes_lake_only_keys_with_a_null_cursor_or_fails_naming_them(env: Any) -> None:
    """null_policy include compares NULL-cursor rows: a hard-deleted one must be removed too, never left behind."""
    import pyarrow as pa

    from snowberg.iceberg.catalogs import open_catalog

    _load_in_runs([100])
    t = open_catalog("opvol").load_table("lake.orders")
    schema = t.schema().as_arrow()
    # id 500 was loaded with a NULL cursor and has since been deleted from the source
    t.append(
        pa.table({"id": [500], "updated_at": pa.array([None], pa.timestamp("us"))}, schema=schema),
        snapshot_properties={
            "snowberg.watermark": WATERMARK,
            "snowberg.cursor-kind": "timestamp_ntz",
            "snowberg.run-id": "r-null",
            "snowberg.mode": "incremental",
            "snowberg.rows": "1",
        },
    )
    entry = _entry(env, deletes="propagate")
    entry["cursor"] = {"column": "updated_at", "null_policy": "include"}
    from snowberg.airflow.operators.arguments import operator_arguments
    from snowberg.airflow.operators.volume import VolumeCheckOperator

    cfg = parse_config({"tables": [entry]}).tables[0]
    op = VolumeCheckOperator(task_id="check_volume", **operator_arguments(VolumeCheckOperator, cfg))
    out = op.execute({"run_id": "r"})
    assert out["propagated"] == 1 and 500 not in _lake_ids(), out


# ---------------------------------------------------------------------------
# Incremental, full by hand, and checks that cannot compare


def test_the_second_check_is_incremental_and_a_trigger_param_makes_it_full(env: Any, variables: Any) -> None:
    _load_in_runs([50, 50])
    first = _op(env).execute({"run_id": "r1"})
    assert first["verification"] == "full" and "no verified record" in first["scope_reason"]
    assert "snowberg__lake__orders__volume_verified" in variables
    second = _op(env).execute({"run_id": "r2"})
    assert second["verification"] == "incremental" and second["ranges"]
    by_hand = _op(env).execute({"run_id": "r3", "params": {"full_verification": True}})
    assert by_hand["verification"] == "full" and by_hand["scope_reason"] == "started by hand (full_verification)"


def test_a_mismatch_alert_names_the_window(env: Any) -> None:
    from snowberg.airflow.operators.check_base import SnowbergCheckFailed

    _load_in_runs([50, 49])
    with pytest.raises(SnowbergCheckFailed) as err:
        _op(env).execute({"run_id": "r"})
    assert err.value.observed["window"].startswith("full (no verified record")
    assert err.value.observed["window"].endswith(f"up to watermark {WATERMARK}")
    assert err.value.observed["day 2026-01-01"] == "source 100, lake 99"


def test_a_table_without_a_commit_is_skipped_and_an_unreadable_source_fails(env: Any) -> None:
    import pyarrow as pa
    from airflow.sdk.exceptions import AirflowSkipException

    from snowberg.airflow.operators.check_base import SnowbergCheckFailed
    from snowberg.iceberg.catalogs import open_catalog

    cat = open_catalog("opvol")
    cat.create_namespace_if_not_exists("lake")
    cat.create_table(
        "lake.orders", schema=pa.schema([pa.field("id", pa.int64()), pa.field("updated_at", pa.timestamp("us"))])
    )
    with pytest.raises(AirflowSkipException, match="has no snowberg commit yet"):
        _op(env).execute({"run_id": "r"})
    cat.drop_table("lake.orders")
    _load_in_runs([10])
    env.sql(f"DROP TABLE {env.table('SRC')}")
    with pytest.raises(SnowbergCheckFailed) as err:
        _op(env).execute({"run_id": "r"})
    assert err.value.check == "volume" and "cannot read its source" in str(err.value)
    assert err.value.observed["source"] == env.table("SRC")


def test_full_verification_param_values() -> None:
    from snowberg.airflow.operators.volume import full_verification_requested

    assert full_verification_requested({"params": {"full_verification": True}})
    assert full_verification_requested({"params": {"full_verification": "true"}})
    assert not full_verification_requested({"params": {"full_verification": False}})
    assert not full_verification_requested({})


def test_a_cursorless_table_is_checked_and_an_inconclusive_result_is_skipped(env: Any) -> None:
    import pyarrow as pa
    from airflow.sdk.exceptions import AirflowSkipException

    from snowberg.airflow.operators.arguments import operator_arguments
    from snowberg.airflow.operators.volume import VolumeCheckOperator
    from snowberg.iceberg.catalogs import open_catalog

    cat = open_catalog("opvol")
    cat.create_namespace_if_not_exists("lake")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("updated_at", pa.timestamp("us"))])
    t = cat.create_table("lake.orders", schema=schema)
    ids = list(range(1, 101))
    t.append(
        pa.table(
            {"id": ids, "updated_at": [dt.datetime(2026, 1, 1) + dt.timedelta(minutes=x) for x in ids]}, schema=schema
        ),
        snapshot_properties={
            "snowberg.watermark": "",
            "snowberg.run-id": "fr",
            "snowberg.mode": "full_refresh",
            "snowberg.rows": "100",
        },
    )
    entry = _entry(env)
    del entry["cursor"]
    cfg = parse_config({"tables": [entry]}).tables[0]
    op = VolumeCheckOperator(task_id="check_volume", **operator_arguments(VolumeCheckOperator, cfg))
    out = op.execute({"run_id": "r"})
    assert out["ok"] and out["verification"] == "count" and out["source_rows"] == out["lake_rows"] == 100
    env.sql(f"INSERT INTO {env.table('SRC')} VALUES (500, '2026-02-01'::TIMESTAMP_NTZ)")
    with pytest.raises(AirflowSkipException, match="changed while the refresh ran"):
        op.execute({"run_id": "r"})


def test_a_propagate_commit_makes_the_variable_follow(env: Any, variables: Any) -> None:
    """Every path that commits carries the state and then makes the Variable follow (the propagate commit too).

    Before, the Variable kept naming the snapshot before the propagate commit until the next load or expiry;
    an expiry that removed that snapshot first made the next load refuse the Variable.
    """
    import json

    from snowberg.iceberg import state
    from snowberg.iceberg.catalogs import open_catalog

    _load_in_runs([50, 50])
    t = open_catalog("opvol").load_table("lake.orders")
    variables["snowberg__lake__orders__watermark"] = state.mirror_value(state.read_state(t))
    env.sql(f"DELETE FROM {env.table('SRC')} WHERE ID IN (7, 8)")
    out = _op(env, deletes="propagate", leaf_rows=10).execute({"run_id": "r"})
    assert out["propagated"] == 2
    t = open_catalog("opvol").load_table("lake.orders")
    st = state.read_state(t)
    assert st is not None and st.snapshot_id == t.current_snapshot().snapshot_id
    assert json.loads(variables["snowberg__lake__orders__watermark"])["snapshot_id"] == st.snapshot_id


def test_keys_the_propagate_commit_cannot_remove_stay_differences_and_fail_the_check(env: Any) -> None:
    """A hard delete whose rows are no longer in the compared scope when the commit looks: named, not passed over.

    The scope is read again at commit time; here the row moved above the watermark in between (a later load
    wrote it with a newer cursor), so the key is not removed and the check fails naming it.
    """
    from snowberg.airflow.operators.check_base import SnowbergCheckFailed
    from snowberg.checks import volume

    _load_in_runs([50, 50])
    env.sql(f"DELETE FROM {env.table('SRC')} WHERE ID IN (7, 8)")
    real = volume.commit_hard_deletes

    def key_8_moved_out_of_scope(table: Any, cfg: Any, keys: Any, **kw: Any) -> Any:
        import pyarrow as pa

        with table.transaction() as tx:  # a later load rewrote id 8 above the watermark since the compare
            tx.delete("id = 8")
            later = dt.datetime(2026, 1, 4)
            tx.append(pa.table({"id": [8], "updated_at": [later]}, schema=table.schema().as_arrow()))
        return real(table.refresh(), cfg, keys, **{**kw, "expected_snapshot_id": table.current_snapshot().snapshot_id})

    with pytest.MonkeyPatch.context() as m:
        m.setattr(volume, "commit_hard_deletes", key_8_moved_out_of_scope)
        with pytest.raises(SnowbergCheckFailed) as err:
            _op(env, deletes="propagate", leaf_rows=10).execute({"run_id": "r"})
    p = err.value.details["propagation"]
    assert p["removed"] == 1 and p["not_removed"] == [{"id": "8"}] and "compared scope" in p["reason"]
    assert "{'id': '8'} lake_only" in str(err.value) and "hard deletes not propagated" in str(err.value)
    assert 7 not in _lake_ids() and 8 in _lake_ids()  # the row above the watermark is never touched


def test_a_check_that_removes_part_of_the_hard_deletes_says_so_and_what_to_do(env: Any) -> None:
    """The alert of an incomplete propagation says how many rows it removed and what the user can do; the
    next checks remove the rest and then pass. (Before, every check failed with "0 differing key(s) (more not
    narrowed down); hard deletes not propagated (the report is incomplete …)" and removed nothing.)"""
    from snowberg.airflow.operators.check_base import SnowbergCheckFailed

    _load_in_runs([50, 50])
    gone = set(range(5, 100, 9))  # 11 keys
    env.sql(f"DELETE FROM {env.table('SRC')} WHERE ID IN ({', '.join(map(str, sorted(gone)))})")
    messages = []
    for _ in range(6):
        try:
            out = _op(env, deletes="propagate", max_reported_keys=2, leaf_rows=2).execute({"run_id": "r"})
            break
        except SnowbergCheckFailed as err:
            messages.append(str(err))
            assert err.details["propagated"] > 0  # progress on every check
            assert "the next check removes more" in err.observed["what to do"]
            assert "max_reported_keys × leaf_rows = 4 rows per side" in str(err)
    else:
        raise AssertionError("\n".join(messages))
    assert out["ok"] and not gone & set(_lake_ids()) and len(_lake_ids()) == 100 - len(gone)
    assert messages and "hard-deleted row(s) removed by this check" in messages[0]


def test_a_refused_propagation_says_what_to_do(env: Any) -> None:
    from snowberg.airflow.operators.check_base import SnowbergCheckFailed
    from snowberg.iceberg.catalogs import open_catalog

    _load_in_runs([50, 50])
    env.sql(f"DELETE FROM {env.table('SRC')} WHERE ID = 7")
    open_catalog("opvol").load_table("lake.orders").delete("id = 60")
    with pytest.raises(SnowbergCheckFailed) as err:
        _op(env, deletes="propagate", leaf_rows=10).execute({"run_id": "r"})
    assert "repair the other differences first" in err.value.observed["what to do"]
    assert "what to do: repair the other differences first" in str(err.value)
