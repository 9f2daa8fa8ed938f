"""The stream capture operators: construction rules, params, and a consume → load → cleanup run through them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from streams_harness import Harness

from snowberg.airflow.operators.arguments import operator_arguments
from snowberg.airflow.operators.streams import (
    SnowbergStreamChangesOperator,
    SnowbergStreamCleanupOperator,
    SnowbergStreamConsumeOperator,
    SnowbergStreamLoadOperator,
    SnowbergStreamStalenessOperator,
)
from snowberg.config.table_config import TableConfig


def _cfg(h: Harness) -> TableConfig:
    return h.cfg.model_copy(update={"stream": h.stream})


class _Variables:
    """The operators' Airflow Variables, in a dict (``_operator_env``)."""

    def __init__(self, mirrored: dict[str, str]) -> None:
        self.mirrored = mirrored

    def get(self, key: str) -> str | None:
        return self.mirrored.get(key)

    def set(self, key: str, value: str) -> None:
        self.mirrored[key] = value


def _operator_env(h: Harness, monkeypatch: pytest.MonkeyPatch, connect: Any) -> dict[str, str]:
    """Stream operators on the harness: its lake as catalog ``lake``, ``connect``; Variables in the dict returned."""
    for k, v in h.catalog_props.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__LAKE__{k.upper()}", v)
    monkeypatch.setenv("PYICEBERG_CATALOG__LAKE__TYPE", "sql")
    monkeypatch.setattr("snowberg.airflow.operators.streams._StreamOperator.connect", connect)
    mirrored: dict[str, str] = {}
    monkeypatch.setattr("snowberg.iceberg.state.AirflowVariables", lambda: _Variables(mirrored))
    return mirrored


def test_modules_a_dag_imports_have_no_heavy_module_level_imports() -> None:
    """DAG parsing imports the operators (and through them settings/params): only light modules at top level."""
    import ast
    import importlib

    heavy = ("pyiceberg", "pyarrow", "pandas", "snowflake", "boto3", "fakesnow", "duckdb", "croniter")
    light = ("snowberg.airflow.operators.streams", "snowberg.config.stream_settings", "snowberg.streams.params")
    for name in light:
        mod = importlib.import_module(name)
        tree = ast.parse(Path(mod.__file__ or "").read_text())
        for node in tree.body:
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            )
            assert not [n for n in names if n.split(".")[0] in heavy], f"{name} imports {names} at module level"
        assert not [m for m in vars(mod).values() if getattr(m, "__name__", "").split(".")[0] in heavy]


def test_operators_are_keyword_only_and_validate_their_arguments() -> None:
    args: dict[str, Any] = {
        "table_name": "orders",
        "source": {"table": "DB.SRC.ORDERS"},
        "target": "shop.orders",
        "primary_key": ["id"],
        "stream": {"name": "DB.SRC.ORDERS_STREAM", "create": True},
    }
    op = SnowbergStreamConsumeOperator(task_id="consume", **args)
    assert op.snowflake_conn_id == "snowflake_default" and op.catalog == "lake"
    assert "snowflake_conn_id" in op.template_fields
    assert "consumed" in SnowbergStreamLoadOperator.template_fields
    with pytest.raises(TypeError):
        SnowbergStreamConsumeOperator("consume", args)  # type: ignore[misc]
    with pytest.raises(TypeError, match="stream"):
        SnowbergStreamConsumeOperator(task_id="c", **{k: v for k, v in args.items() if k != "stream"})
    with pytest.raises(ValueError, match=r"'c'.*stream\.name"):
        SnowbergStreamConsumeOperator(task_id="c", **{**args, "stream": {"name": "not-a-name"}})
    with pytest.raises(ValueError, match="primary_key"):  # a standard stream applies updates by key
        SnowbergStreamConsumeOperator(task_id="c", **{**args, "primary_key": []})


def test_operators_run_a_capture_end_to_end(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    h = harness
    h.insert((1, "new", "10.00"), (2, "new", "20.00"))
    mirrored = _operator_env(h, monkeypatch, lambda self, cfg: h.connect())
    cfg = _cfg(h)

    def run(run_id: str, params: dict[str, Any]) -> dict[str, Any]:
        ctx = {"run_id": run_id, "params": params}
        changes = SnowbergStreamChangesOperator
        out = {"changes": changes(task_id="changes_backfill", **operator_arguments(changes, cfg)).execute(ctx)}
        consume = SnowbergStreamConsumeOperator
        out["consume"] = consume(task_id="consume", **operator_arguments(consume, cfg)).execute(ctx)
        load = SnowbergStreamLoadOperator
        out["load"] = load(task_id="load", consumed=out["consume"], **operator_arguments(load, cfg)).execute(ctx)
        cleanup = SnowbergStreamCleanupOperator
        out["cleanup"] = cleanup(task_id="cleanup", **operator_arguments(cleanup, cfg)).execute(ctx)
        check = SnowbergStreamStalenessOperator
        out["check"] = check(task_id="check", **operator_arguments(check, cfg)).execute(ctx)
        return out

    first = run("scheduled__1", {})
    assert first["changes"] == {"status": "not_requested"} and first["load"]["status"] == "committed"
    h.update(2, "paid")
    h.admin.make_stale(h.stream.name)
    from snowberg.streams.errors import StaleStreamError

    with pytest.raises(StaleStreamError):
        run("scheduled__2", {})
    recovered = run("manual__recover", {"recover_stale_stream": True})
    assert recovered["load"]["refresh"] is True
    assert h.target_rows() == h.source_rows()
    assert '"batch_id": 2' in mirrored["snowberg__shop__orders__stream_batch"]


def test_build_stream_tasks_wires_a_dag() -> None:
    from airflow.sdk import DAG, Param

    from snowberg.airflow.operators.streams import build_stream_tasks
    from snowberg.streams.params import STREAM_PARAM_DEFAULTS, STREAM_PARAM_SCHEMAS

    cfg = TableConfig.model_validate(
        {
            "name": "orders",
            "source": {"table": "DB.SRC.ORDERS"},
            "target": "shop.orders",
            "primary_key": ["id"],
            "stream": {"name": "DB.SRC.ORDERS_STREAM", "create": True},
        }
    )
    params = {k: Param(STREAM_PARAM_DEFAULTS[k], **s) for k, s in STREAM_PARAM_SCHEMAS.items()}
    with DAG(dag_id="snowberg_orders", schedule="@hourly", params=params) as dag:
        tasks = build_stream_tasks(cfg)
    assert [t.task_id for t in dag.topological_sort()] == list(tasks)
    assert tasks["stream_staleness"].trigger_rule == "all_done" and tasks["stream_staleness"].retries == 0


def test_an_idle_run_ends_in_consume_with_one_statement_records_the_proof_and_skips_the_rest(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No change data and nothing staged: consume succeeds, every later task is skipped, the lake is proven current."""
    from airflow.sdk import DAG
    from airflow.sdk.exceptions import DownstreamTasksSkipped
    from streams_harness import CountingConnection

    from snowberg.airflow.operators.streams import build_stream_tasks
    from snowberg.iceberg.current import read_proof

    h = harness
    h.insert((1, "new", "10.00"))
    conns: list[CountingConnection] = []

    def connect(self: Any, cfg: Any) -> CountingConnection:
        conns.append(CountingConnection(h.connect()))
        return conns[-1]

    mirrored = _operator_env(h, monkeypatch, connect)
    with DAG(dag_id="snowberg_orders", schedule="@hourly"):
        tasks = build_stream_tasks(_cfg(h))
    pushed: dict[str, Any] = {}

    class TI:
        map_index = -1

        def xcom_push(self, key: str, value: Any) -> None:
            pushed[key] = value

    def ctx(run_id: str) -> dict[str, Any]:
        return {"run_id": run_id, "params": {}, "ti": TI()}

    consumed = tasks["consume"].execute(ctx("scheduled__1"))  # a change: consumed, loaded, cleaned up
    assert consumed["rows"] == 1
    tasks["load"].consumed = consumed
    assert tasks["load"].execute(ctx("scheduled__1"))["status"] == "committed"
    tasks["cleanup"].execute(ctx("scheduled__1"))
    assert read_proof("shop.orders", _Variables(mirrored)) is None
    with pytest.raises(DownstreamTasksSkipped) as skipped:
        tasks["consume"].execute(ctx("scheduled__2"))  # nothing new
    assert sorted(skipped.value.tasks) == ["cleanup", "load", "stream_staleness"]
    assert conns[-1].statements == [conns[-1].statements[0]] and "STREAM_HAS_DATA" in conns[-1].statements[0]
    assert pushed["return_value"]["status"] == "idle" and pushed["return_value"]["committed_batch_id"] == 1
    proof = read_proof("shop.orders", _Variables(mirrored))
    assert proof is not None and proof.run_id == "scheduled__2" and proof.watermark is None
    h.update(1, "paid")  # a change again: the next run consumes it
    assert tasks["consume"].execute(ctx("scheduled__3"))["rows"] == 2


def test_a_watched_stream_tables_runs_record_running_after_the_consume_and_done_after_cleanup_or_when_idle(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the triggerer decides from (docs/event-driven.md): a consume that moved the stream's offset records
    ``running`` (its batch is not in the lake yet), the cleanup ``done``; an idle consume ``done`` at once."""
    from airflow.sdk import DAG
    from airflow.sdk.exceptions import DownstreamTasksSkipped

    from snowberg.airflow.operators.streams import build_stream_tasks
    from snowberg.iceberg.watch_state import RunPhase, read_watch

    h = harness
    h.insert((1, "new", "10.00"))
    mirrored = _operator_env(h, monkeypatch, lambda self, cfg: h.connect())
    cfg = _cfg(h).model_copy(update={"watch": {"poll_interval": "30s"}, "schedule": None})
    with DAG(dag_id="snowberg_orders", schedule=None):
        tasks = build_stream_tasks(TableConfig.model_validate(cfg.model_dump()))

    class TI:
        map_index = -1

        def xcom_push(self, key: str, value: Any) -> None:
            pass

    def ctx(run_id: str) -> dict[str, Any]:
        return {"run_id": run_id, "params": {}, "ti": TI()}

    def record() -> Any:
        return read_watch("shop.orders", _Variables(mirrored))

    consumed = tasks["consume"].execute(ctx("asset_triggered__1"))
    assert (record().phase, record().run_id) == (RunPhase.RUNNING, "asset_triggered__1")
    tasks["load"].consumed = consumed
    tasks["load"].execute(ctx("asset_triggered__1"))
    assert record().phase is RunPhase.RUNNING  # committed, but not cleaned up and mirrored yet
    tasks["cleanup"].execute(ctx("asset_triggered__1"))
    assert (record().phase, record().run_id) == (RunPhase.DONE, "asset_triggered__1")
    with pytest.raises(DownstreamTasksSkipped):
        tasks["consume"].execute(ctx("asset_triggered__2"))  # nothing new: done at once
    assert (record().phase, record().run_id, record().signal) == (RunPhase.DONE, "asset_triggered__2", "false")
