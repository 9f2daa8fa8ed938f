"""A task process builds only its own DAG (Airflow's parsing context), and exactly the DAG the full parse builds.

Airflow 3 parses the DAG file again in every task process with
``_AIRFLOW_PARSING_CONTEXT_DAG_ID`` set (``airflow.sdk.get_parsing_context()``).
The timing side (a task's parse with 1,000 tables within 1.5x of 1 table) is
``tests/dags/test_parse_time.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from snowberg.airflow.dag_factory import build_dags
from snowberg.airflow.sync_dags import build_sync_dags

TABLES: dict[str, Any] = {
    "defaults": {"catalog": "lake", "retries": 1},
    "tables": [
        {"name": "a", "source": {"table": "DB.S.A"}, "target": "ns.a", "cursor": {"column": "updated_at"}},
        {
            "name": "b",
            "source": {"table": "DB.S.B"},
            "target": "ns.b",
            "freshness_sla": "2h",
        },
        {
            "name": "c",
            "source": {"query": "SELECT ID FROM DB.S.C"},
            "target": "ns.c",
            "maintenance": {"enabled": False},
        },
    ],
}


def write(tmp_path: Path, doc: Any, name: str = "tables.yaml") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
    return path


def shape(dag: Any) -> Any:
    """The DAG as the dag-processor stores it (its serialized form), for comparing a DAG built alone with the same
    DAG built among all."""
    from airflow.serialization.serialized_objects import DagSerialization

    return DagSerialization.to_dict(dag)


def test_the_parsing_context_selects_one_tables_dags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, TABLES)
    everything = build_dags(path)
    assert len(everything) == 8  # a, b: load, checks, maintenance; c: load, checks
    for wanted, table in [("snowberg_b__maintenance", "b"), ("snowberg_a", "a"), ("snowberg_c__checks", "c")]:
        monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID", wanted)
        only = build_dags(path)
        assert wanted in only
        assert {d.removeprefix("snowberg_").split("__")[0] for d in only} == {table}
        assert [shape(d) for d in only.values()] == [shape(everything[k]) for k in only]
    monkeypatch.delenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID")
    assert set(build_dags(path)) == set(everything)


@pytest.mark.parametrize(
    ("edit", "wanted"),
    [
        # A DAG id that is no table's: the full parse decides (here: it builds none of that name).
        (lambda d: None, "snowberg_nope"),
        # The wanted entry is broken: its stand-in DAG is named by the full parse.
        (lambda d: d["tables"][1].update(cursor={"column": 5}), "snowberg_b"),
        # An earlier entry claims the same target: the later one is the broken duplicate.
        (lambda d: d["tables"][0].update(target="ns.b"), "snowberg_b"),
        # A stand-in of a broken entry, named by its position.
        (lambda d: d["tables"].append({"target": "ns.z"}), "snowberg_invalid_entry_4"),
    ],
)
def test_what_cannot_be_decided_from_one_entry_is_built_as_in_the_full_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: Any, wanted: str
) -> None:
    doc = yaml.safe_load(yaml.safe_dump(TABLES))
    edit(doc)
    path = write(tmp_path, doc)
    with pytest.warns() if wanted != "snowberg_nope" else _nothing():
        full = build_dags(path)
    monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID", wanted)
    with pytest.warns() if wanted != "snowberg_nope" else _nothing():
        selected = build_dags(path)
    assert set(selected) == set(full)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_anchors_make_the_task_read_the_whole_file(tmp_path: Path) -> None:
    text = """
tables:
  - &base
    name: a
    source: {table: DB.S.A}
    target: ns.a
  - <<: *base
    name: b
    target: ns.b
"""
    path = write(tmp_path, text)
    full = build_dags(path)
    only = build_dags(path, dag_id="snowberg_b")
    assert set(only) == set(full) and {"snowberg_a", "snowberg_b"} <= set(full)


def test_the_sync_dag_builder_honours_the_parsing_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    syncs = {
        "syncs": [
            {
                "name": f"s{i}",
                "source": {"catalog": "lake", "table": f"shop.t{i}"},
                "target": {"kind": "native", "snowflake_conn_id": "sf", "table": f"DB.SHOP.T{i}"},
            }
            for i in range(3)
        ]
    }
    path = write(tmp_path, syncs, "syncs.yaml")
    full = build_sync_dags(path)
    monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID", "snowberg_sync_s1")
    only = build_sync_dags(path)
    assert list(only) == ["snowberg_sync_s1"]
    assert shape(only["snowberg_sync_s1"]) == shape(full["snowberg_sync_s1"])
    monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID", "snowberg_sync_gone")
    assert set(build_sync_dags(path)) == set(full)


def _task_dags(path: Path, dag_id: str) -> dict[str, Any]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_dags(path, dag_id=dag_id)


def _full_dags(path: Path) -> dict[str, Any]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_dags(path)


def test_a_tagged_name_is_a_name_to_the_task_parse_too(tmp_path: Path) -> None:
    """``name: !!str orders`` is the string ``orders``: the duplicate after it is the broken entry in both parses.

    The old task parse read only untagged scalars from the entries it did not build, saw no earlier ``orders``
    and built the duplicate (loading DB.OTHER.PAYROLL into hr.payroll) under the scheduler's DAG id.
    """
    text = """
tables:
  - name: !!str orders
    source: {table: DB.SHOP.ORDERS}
    target: shop.orders
  - name: orders
    source: {table: DB.OTHER.PAYROLL}
    target: hr.payroll
"""
    path = write(tmp_path, text)
    full = _full_dags(path)
    assert full["snowberg_orders"].get_task("plan").source["table"] == "DB.SHOP.ORDERS"
    assert "snowberg_invalid_entry_2" in full
    only = _task_dags(path, "snowberg_orders")
    assert only["snowberg_orders"].get_task("plan").source["table"] == "DB.SHOP.ORDERS"
    assert shape(only["snowberg_orders"]) == shape(full["snowberg_orders"])


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # A table named orders__checks would replace the checks DAG of orders, and orders' checks would vanish.
        ("orders", "orders__checks"),
        # The other way round: orders' checks DAG would replace the load DAG of the table orders__checks.
        ("orders__checks", "orders"),
        ("orders", "orders__maintenance"),
    ],
)
def test_dag_ids_that_collide_refuse_the_later_entry_in_both_parses(tmp_path: Path, first: str, second: str) -> None:
    doc = {
        "tables": [
            {"name": first, "source": {"table": "DB.S.A"}, "target": "ns.a", "freshness_sla": "2h"},
            {"name": second, "source": {"table": "DB.S.B"}, "target": "ns.b", "freshness_sla": "2h"},
        ]
    }
    path = write(tmp_path, doc)
    full = _full_dags(path)
    # The first entry's DAGs are whole: its load, checks and maintenance DAGs.
    for suffix in ("", "__checks", "__maintenance"):
        dag = full[f"snowberg_{first}{suffix}"]
        assert "invalid-config" not in dag.tags, (first, suffix)
        assert all(t.table_name == first for t in dag.tasks if hasattr(t, "table_name")), (first, suffix)
    # The later one is a broken stand-in naming both entries, under a DAG id nobody else builds.
    stand_ins = {k: d for k, d in full.items() if "invalid-config" in d.tags}
    assert len(stand_ins) == 1, sorted(full)
    [(stand_in_id, stand_in)] = stand_ins.items()
    error = stand_in.get_task("config_error").error
    assert repr(first) in error and repr(second) in error and "DAG id" in error, error
    for dag_id in sorted(full):
        only = _task_dags(path, dag_id)
        assert dag_id in only
        assert shape(only[dag_id]) == shape(full[dag_id]), dag_id


def test_a_stand_in_never_takes_the_dag_id_of_a_table(tmp_path: Path) -> None:
    """A broken entry is named by its own name, else by its position: neither may be a DAG id a table builds."""
    doc = {
        "tables": [
            {"name": "orders", "source": {"table": "DB.S.A"}, "target": "ns.a"},
            {"name": "invalid_entry_3", "source": {"table": "DB.S.B"}, "target": "ns.b"},
            {"name": "orders__checks", "source": {"table": "DB.S.C"}, "target": "ns.c", "cursor": {"colum": "x"}},
        ]
    }
    path = write(tmp_path, doc)
    full = _full_dags(path)
    assert "invalid-config" not in full["snowberg_orders__checks"].tags
    assert "invalid-config" not in full["snowberg_invalid_entry_3"].tags
    stand_ins = [d for d in full.values() if "invalid-config" in d.tags]
    assert len(stand_ins) == 1 and "cursor.colum" in stand_ins[0].get_task("config_error").error
    for dag_id in sorted(full):
        assert shape(_task_dags(path, dag_id)[dag_id]) == shape(full[dag_id]), dag_id
