"""The page's time is bounded whatever the catalogs do: a catalog that never answers costs one timeout, once."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
import yaml


@pytest.fixture
def silent_server() -> Iterator[str]:
    """An HTTP address that accepts connections and never answers (a REST catalog behind a dead proxy)."""
    srv = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)  # read nothing, answer nothing

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        th.join(5)
        for c in held:
            c.close()  # the stuck reads end with a connection error, their threads return
        srv.close()


def test_a_catalog_that_never_answers_costs_its_timeout_once_and_delays_no_other_table(
    tmp_path: Any, monkeypatch: Any, catalog_env: Any, silent_server: str
) -> None:
    from snowberg.airflow import ui_data
    from snowberg.iceberg.catalogs import open_catalog

    catalog_env("okcat")
    cat = open_catalog("okcat")
    cat.create_namespace("ok")
    for i in range(5):
        t = cat.create_table(("ok", f"t{i}"), schema=pa.schema([pa.field("id", pa.int64())]))
        t.append(pa.table({"id": pa.array([i], pa.int64())}))
    monkeypatch.setenv("PYICEBERG_CATALOG__DEADCAT__TYPE", "rest")
    monkeypatch.setenv("PYICEBERG_CATALOG__DEADCAT__URI", silent_server)
    entry = {"source": {"table": "DB.S.T"}, "cursor": {"column": "u"}}
    tables = [{"name": f"ok{i}", "target": f"ok.t{i}", "catalog": "okcat", **entry} for i in range(5)]
    tables += [{"name": f"dead{i}", "target": f"d.t{i}", "catalog": "deadcat", **entry} for i in range(3)]
    path = tmp_path / "tables.yaml"
    path.write_text(yaml.safe_dump({"tables": tables}))
    monkeypatch.setenv("AIRFLOW__SNOWBERG__UI_CATALOG_TIMEOUT_SECONDS", "1")
    ui_data.clear_cache()
    try:
        healthy_only = tmp_path / "healthy.yaml"
        healthy_only.write_text(yaml.safe_dump({"tables": tables[:5]}))
        t0 = time.monotonic()
        ui_data.collect(None, None, healthy_only, refresh=True)
        healthy = time.monotonic() - t0

        t0 = time.monotonic()
        first = ui_data.collect(None, None, path, refresh=True)
        took = time.monotonic() - t0
        # The silent catalog adds its timeout (1 s) once, not once per table (3 s) nor forever.
        assert took < healthy + 1.0 + 0.9, (took, healthy)
        by = {t.name: t for t in first}
        assert [t.name for t in first[:3]] == ["dead0", "dead1", "dead2"]  # attention first
        for i in range(3):
            assert by[f"dead{i}"].attention == "catalog unreachable"
            assert "did not answer within 1 s" in (by[f"dead{i}"].attention_detail or "")
            assert by[f"dead{i}"].exists is None  # not known: never shown as missing or as "no SLA"
        for i in range(5):
            assert by[f"ok{i}"].attention is None and by[f"ok{i}"].exists is True

        # Still stuck on the next view: said at once, no second timeout.
        t0 = time.monotonic()
        again = ui_data.collect(None, None, path, refresh=True)
        assert time.monotonic() - t0 < healthy + 0.9
        assert {t.name for t in again if t.attention == "catalog unreachable"} == {"dead0", "dead1", "dead2"}
        assert "still not answering" in (again[0].attention_detail or "")
    finally:
        ui_data.clear_cache()


def test_a_catalog_that_opens_but_hangs_on_a_table_read_gives_up_that_catalog_only() -> None:
    from snowberg.airflow.ui_lake import CatalogPool, CatalogUnreachable

    release = threading.Event()
    pool = CatalogPool(lambda name: name, workers=8)

    def read(key: str) -> Any:
        def fn(catalog: str) -> str:
            if catalog == "slow":
                release.wait(30)
            return f"{catalog}:{key}"

        return fn

    jobs = [(f"s{i}", "slow", read(f"s{i}")) for i in range(4)] + [(f"f{i}", "fast", read(f"f{i}")) for i in range(6)]
    try:
        t0 = time.monotonic()
        out = pool.read(jobs, timeout=0.5)
        took = time.monotonic() - t0
    finally:
        release.set()
    assert took < 1.5, took
    assert all(isinstance(out[f"s{i}"], CatalogUnreachable) for i in range(4))
    assert [out[f"f{i}"] for i in range(6)] == [f"fast:f{i}" for i in range(6)]


def test_a_catalog_that_keeps_answering_is_slow_not_unreachable() -> None:
    """Reads longer than the timeout while other reads of the same catalog finish (a busy machine) are waited for."""
    from snowberg.airflow.ui_lake import CatalogPool

    pool = CatalogPool(lambda name: name, workers=8)  # 4 reads of one catalog at a time

    def read(seconds: float) -> Any:
        def fn(catalog: str) -> float:
            time.sleep(seconds)
            return seconds

        return fn

    jobs = [(f"j{i}", "busy", read(0.1 * (i + 1))) for i in range(8)]  # the last ones run 0.6-0.8 s
    out = pool.read(jobs, timeout=0.5)
    assert [out[f"j{i}"] for i in range(8)] == [pytest.approx(0.1 * (i + 1)) for i in range(8)]
