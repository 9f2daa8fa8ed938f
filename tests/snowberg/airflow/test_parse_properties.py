"""Property: for every DAG id, a task's parse builds exactly what the full parse builds (or reads the file whole).

A task process parses the DAG file for its one DAG (Airflow's parsing
context) and builds one table's entry without building the others
(``yaml_loader.read_yaml_selected``, ``table_config.load_config_selected``).
Generated ``tables.yaml`` files mix what can make that differ from the full
parse: explicit tags on names, targets and keys (``!!str``, ``!``,
``!!int``), quoted keys, anchors, aliases and merge keys (``<<: *e1``,
``<<: {…}``), keys written twice, names whose DAG ids collide
(``orders`` / ``orders__checks``), names of stand-ins (``invalid_entry_2``),
invalid entries, entries that are no mapping, ``defaults`` that set a name,
a tag no safe loader knows (the whole file is refused).

* config level (many files): for every DAG id a table of the pool could
  have, the task parse's tables are the full parse's tables (same settings)
  or the task falls back to the full parse; a file the full parse refuses
  is refused by the task too;
* DAG level (fewer files, Airflow builds every DAG): for every DAG id of
  the full parse, the task parse's DAGs serialize exactly as the full
  parse's.

Seeds are fixed (``derandomize``): the same files every run, so a failure is
reproducible; hypothesis prints the failing file.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from snowberg.airflow.dag_factory import build_dags, table_names_of
from snowberg.config.table_config import (
    DAG_ID_PREFIX,
    DAG_SUFFIXES,
    ConfigError,
    load_config_isolated,
    load_config_selected,
)

NAMES = ["orders", "orders__checks", "orders__maintenance", "payroll", "invalid_entry_2", "invalid_entry_3"]
TARGETS = ["shop.orders", "hr.payroll", "shop.other"]
CANDIDATE_DAG_IDS = sorted({DAG_ID_PREFIX + n + s for n in NAMES for s in ("", *DAG_SUFFIXES)})


def _scalar(draw: Any, value: str) -> str:
    """``value`` written as YAML may write a string: plain, quoted, or with an explicit string tag."""
    return draw(st.sampled_from([value, f"'{value}'", f'"{value}"', f"!!str {value}", f"! {value}"]))


def _key(draw: Any, key: str) -> str:
    return draw(st.sampled_from([key, key, f'"{key}"', f"!!str {key}"]))


@st.composite
def name_values(draw: Any) -> str:
    """A name as written: mostly a string of the pool, sometimes what is no string (or no valid name)."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(["!!int 5", "5", "[orders]", "~", "Orders-2"]))
    return _scalar(draw, draw(st.sampled_from(NAMES)))


@st.composite
def entries(draw: Any, index: int, anchors: list[str]) -> str:
    """One list item of ``tables:`` as YAML lines (4-space body)."""
    if draw(st.integers(0, 14)) == 0:
        return "  - just text\n"
    lines: list[str] = []
    if anchors and draw(st.integers(0, 5)) == 0:
        lines.append(f"<<: *{draw(st.sampled_from(anchors))}")
    elif draw(st.integers(0, 8)) == 0:
        lines.append(f"<<: {{name: {draw(st.sampled_from(NAMES))}, target: {draw(st.sampled_from(TARGETS))}}}")
    if draw(st.integers(0, 7)):
        lines.append(f"{_key(draw, 'name')}: {draw(name_values())}")
    if draw(st.integers(0, 7)):
        lines.append(f"{_key(draw, 'target')}: {_scalar(draw, draw(st.sampled_from(TARGETS)))}")
    lines.append(f"source: {{table: DB.S.T{index}}}")
    extra = draw(
        st.lists(
            st.sampled_from(
                [
                    "cursor: {column: updated_at}",
                    "cursor: {colum: updated_at}",  # an invalid entry
                    "maintenance: {enabled: false}",
                    "unload: {stage: DB.S.STAGE, stage_url: 's3://lake/unload'}",
                    "freshness_sla: 2h",
                    "retries: !!int 3",
                ]
            ),
            max_size=2,
            unique=True,
        )
    )
    lines += extra
    if draw(st.integers(0, 59)) == 30:  # rare (hypothesis draws the bounds of a range often)
        lines.append("description: !unknown tag")  # no safe loader builds it: the whole file is refused
    if draw(st.integers(0, 5)) == 0:  # a key written twice: the loader keeps the last value
        lines.append(f"{_key(draw, 'name')}: {draw(name_values())}")
    if draw(st.integers(0, 9)) == 0:
        lines.append(f"{_key(draw, 'target')}: {_scalar(draw, draw(st.sampled_from(TARGETS)))}")
    lines = draw(st.permutations(lines))
    anchor = ""
    if draw(st.integers(0, 3)) == 0:
        anchor = f"&e{index}"
        anchors.append(f"e{index}")
    head = f"  - {anchor}\n    " if anchor else "  - "
    return head + "\n    ".join(lines) + "\n"


@st.composite
def configs(draw: Any) -> str:
    """A whole tables.yaml as text."""
    text = ""
    if draw(st.booleans()):
        defaults = draw(
            st.lists(
                st.sampled_from(["retries: 1", "name: orders", "maintenance: {enabled: false}", "catalog: lake"]),
                min_size=1,
                max_size=2,
                unique=True,
            )
        )
        text += "defaults:\n" + "".join(f"  {d}\n" for d in defaults)
    anchors: list[str] = []
    text += "tables:\n"
    for i in range(draw(st.integers(1, 5))):
        text += draw(entries(i, anchors))
    return text


# The same files every run (a failure reproduces), nothing stored between runs, no time limit per file.
FIXED: dict[str, Any] = {
    "derandomize": True,
    "database": None,
    "deadline": None,
    "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
}


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tables.yaml"
    path.write_text(text)
    return path


@settings(max_examples=150, **FIXED)
@given(text=configs())
def test_the_task_parse_picks_the_full_parses_tables_or_falls_back(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, text)
    try:
        full = load_config_isolated(path)
    except ConfigError:
        full = None
    for dag_id in CANDIDATE_DAG_IDS:
        try:
            picked = load_config_selected(path, table_names_of(dag_id))
        except ConfigError:
            assert full is None, f"{dag_id}: the task parse refused a file the full parse reads"
            continue
        if picked is None:
            continue  # the task reads the file whole, as the full parse does
        assert full is not None, f"{dag_id}: the task parse built tables of a file the full parse refuses"
        if dag_id not in {d for t in picked for d in t.dag_ids}:
            continue  # the DAG factory then builds every DAG, as the full parse does
        for t in picked:
            assert t in full.tables, f"{dag_id}: the task parse built table {t.name!r} unlike the full parse"


def _shape(dag: Any) -> Any:
    from airflow.serialization.serialized_objects import DagSerialization

    return DagSerialization.to_dict(dag)


@pytest.mark.timeout(600)
@settings(max_examples=10, **FIXED)
@given(text=configs())
def test_for_every_dag_id_the_task_parse_builds_the_full_parses_dag(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # broken entries warn (the dag-processor records them with the file)
        try:
            full = build_dags(path)
        except ConfigError:
            with pytest.raises(ConfigError):
                build_dags(path, dag_id=CANDIDATE_DAG_IDS[0])
            return
        for dag_id in sorted(full):
            only = build_dags(path, dag_id=dag_id)
            assert dag_id in only
            for k, dag in only.items():
                assert _shape(dag) == _shape(full[k]), f"{dag_id}: DAG {k} differs from the full parse's"
