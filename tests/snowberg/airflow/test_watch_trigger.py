"""The watch trigger with Airflow's own pieces: the DAG's serialised asset watcher, the triggerer's kwargs decoding and
its shared-stream manager driven in-process, and the event loop left free while a poll waits for Snowflake.

The Snowflake side answers as documented (``documented_snowflake``); ``make_loop`` is the one seam patched, to
hand the loop that connection and in-memory Variables.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "snowflake"))
from documented_snowflake import DocumentedSnowflake  # noqa: E402

from snowberg.airflow.dag_factory import build_dag  # noqa: E402
from snowberg.airflow.watch_loop import WatchLoop  # noqa: E402
from snowberg.airflow.watch_trigger import _SUBSCRIBED, SourceChangeTrigger  # noqa: E402
from snowberg.config.table_config import TableConfig, parse_config  # noqa: E402
from snowberg.iceberg.watch_state import RunPhase, record_run  # noqa: E402


def cfg(name: str, **over: Any) -> TableConfig:
    entry = {
        "name": name,
        "source": {"table": f"DB.S.{name.upper()}"},
        "target": f"ns.{name}",
        "cursor": {"column": "updated_at"},
        "watch": {"poll_interval": "30s"},
        "alerts": {"webhook_url": "https://hooks.example.com/x", "events": ["watch_failure"]},
        **over,
    }
    return parse_config({"tables": [entry]}).tables[0]


def watcher_of(dag: Any) -> dict[str, Any]:
    from airflow.serialization.serialized_objects import DagSerialization

    timetable = DagSerialization.to_dict(dag)["dag"]["timetable"]["__var"]
    condition = timetable.get("asset_condition", timetable)
    [asset] = condition["objects"]
    [watcher] = asset["watchers"]
    return {"asset": asset, "watcher": watcher, "timetable": timetable}


def test_the_load_dag_runs_on_its_source_assets_watcher_or_every_max_interval() -> None:
    from airflow.sdk import AssetOrTimeSchedule, DeltaDataIntervalTimetable

    dag = build_dag(cfg("orders"))
    assert isinstance(dag.timetable, AssetOrTimeSchedule)
    assert isinstance(dag.timetable.timetable, DeltaDataIntervalTimetable)
    got = watcher_of(dag)
    assert got["asset"]["uri"] == "snowflake://snowflake_default/db/s/orders?snowberg_table=orders"
    assert got["asset"]["name"] == "snowberg_source_orders"
    assert got["watcher"]["name"] == "snowberg_watch_orders"
    assert got["timetable"]["timetable"]["__var"]["delta"] == 86400.0
    only = build_dag(cfg("quiet", watch={"max_interval": None}))  # only on changes: the Asset alone
    assert type(only.timetable).__name__ == "AssetTriggeredTimetable"
    assert watcher_of(only)["watcher"]["name"] == "snowberg_watch_quiet"


def test_the_trigger_survives_airflows_serialisation_as_the_triggerer_reads_it() -> None:
    from airflow.serialization.decoders import smart_decode_trigger_kwargs
    from airflow.triggers.base import BaseEventTrigger

    dag = build_dag(cfg("orders"))
    encoded = watcher_of(dag)["watcher"]["trigger"]
    assert encoded["classpath"] == "snowberg.airflow.watch_trigger.SourceChangeTrigger"
    kwargs = {k: smart_decode_trigger_kwargs(v) for k, v in encoded["kwargs"].items()}
    trigger = SourceChangeTrigger(**kwargs)
    original = dag.timetable.asset_condition.objects[0].watchers[0].trigger
    assert trigger.serialize() == original.serialize()
    assert BaseEventTrigger.hash(*trigger.serialize()) == BaseEventTrigger.hash(encoded["classpath"], encoded["kwargs"])
    assert trigger.alerts == {**kwargs["alerts"]} and trigger.poll_interval == 30.0
    assert trigger.watch_target().source == "DB.S.ORDERS"
    # A webhook URL carries its token: it stays out of the serialised DAG (the UI and the API show it).
    assert "hooks.example.com" not in json.dumps(watcher_of(dag)) and "webhook_url" not in trigger.alerts


def test_tables_of_one_connection_and_interval_share_one_poll() -> None:
    def key(c: TableConfig) -> Any:
        return build_dag(c).timetable.asset_condition.objects[0].watchers[0].trigger.shared_stream_key()

    assert key(cfg("a")) == key(cfg("b")) == ("snowberg-watch", "snowflake_default", 30.0)
    assert key(cfg("c", snowflake_conn_id="other")) != key(cfg("a"))
    assert key(cfg("d", watch={"poll_interval": "1m"})) != key(cfg("a"))


def test_a_stream_table_watches_its_stream() -> None:
    c = cfg("cdc", cursor=None, primary_key=["id"], stream={"name": "DB.S.CDC_STREAM"})
    trigger = build_dag(c).timetable.asset_condition.objects[0].watchers[0].trigger
    assert (trigger.kind, trigger.source) == ("stream", "DB.S.CDC_STREAM")


# ---------------------------------------------------------------------------
# The triggerer's shared streams, in-process


INTERVAL_S = 0.2


def trigger(name: str) -> SourceChangeTrigger:
    return SourceChangeTrigger(
        dag_id=f"snowberg_{name}",
        table=name,
        target=f"ns.{name}",
        kind="table",
        source=f"DB.S.{name.upper()}",
        snowflake_conn_id="sf",
        poll_interval=INTERVAL_S,
    )


@pytest.fixture
def account(monkeypatch: pytest.MonkeyPatch, variables: Any) -> DocumentedSnowflake:
    """Two loaded tables; the loop of every shared stream reads them through the documented double."""
    sf = DocumentedSnowflake()
    for name in ("a", "b"):
        sf.table(f"DB.S.{name.upper()}")
        record_run(
            f"ns.{name}",
            variables,
            phase=RunPhase.DONE,
            run_id="r",
            dag_id=f"snowberg_{name}",
            observed_at="2026-12-01T00:00:00+00:00",
            signal=sf.token(f"DB.S.{name.upper()}"),
            watermark=None,
            snapshot_id=None,
        )

    def make_loop(cls: Any, kwargs: dict[str, Any]) -> WatchLoop:
        return WatchLoop(
            snowflake_conn_id=kwargs["snowflake_conn_id"],
            poll_interval=timedelta(seconds=kwargs["poll_interval"]),
            variables=variables,
            connect=sf.connect,
        )

    monkeypatch.setattr(SourceChangeTrigger, "make_loop", classmethod(make_loop))
    return sf


async def first_events(streams: dict[str, AsyncIterator[Any]], timeout: float) -> dict[str, list[Any]]:
    """The events each trigger yields within ``timeout`` seconds."""
    got: dict[str, list[Any]] = {k: [] for k in streams}

    async def drain(name: str, stream: AsyncIterator[Any]) -> None:
        async for event in stream:
            got[name].append(event.payload)

    tasks = [asyncio.create_task(drain(k, s)) for k, s in streams.items()]
    await asyncio.sleep(timeout)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return got


def test_two_triggers_share_one_poll_in_the_triggerers_manager_and_each_fires_for_its_own_table(
    account: DocumentedSnowflake,
) -> None:
    from airflow.triggers.shared_stream import SharedStreamManager

    async def scenario() -> dict[str, list[Any]]:
        manager = SharedStreamManager()
        triggers = {"a": trigger("a"), "b": trigger("b")}
        streams = {}
        for i, (name, t) in enumerate(triggers.items()):
            key = t.shared_stream_key()
            streams[name] = t.filter_shared_stream(manager.subscribe(trigger_id=i, trigger=t, key=key))
        loop = asyncio.get_running_loop()
        loop.call_later(3 * INTERVAL_S, account.dml, "DB.S.B")  # a change to b only, after a few quiet polls
        try:
            return await first_events(streams, timeout=8 * INTERVAL_S)
        finally:
            await manager.stop_all()

    got = asyncio.run(scenario())
    assert got["a"] == [] and [e["token"] for e in got["b"]] == [f"change:{account.token('DB.S.B')}"]
    assert got["b"][0]["table"] == "b" and got["b"][0]["source"] == "DB.S.B"
    # One statement per poll for both tables (one database): one poll loop, not two.
    polls = len(account.statements)
    assert 4 <= polls <= 9
    assert all(s.count("SYSTEM$LAST_CHANGE_COMMIT_TIME") == 2 for s in account.statements)
    assert _SUBSCRIBED == {}  # both unsubscribed when the stream stopped


def test_the_standalone_run_polls_for_its_own_table(account: DocumentedSnowflake) -> None:
    async def scenario() -> dict[str, list[Any]]:
        asyncio.get_running_loop().call_later(INTERVAL_S, account.dml, "DB.S.A")
        return await first_events({"a": trigger("a").run()}, timeout=4 * INTERVAL_S)

    got = asyncio.run(scenario())
    assert [e["token"] for e in got["a"]] == [f"change:{account.token('DB.S.A')}"]
    assert all(s.count("SYSTEM$") == 1 for s in account.statements)


def test_a_slow_poll_never_blocks_the_triggerers_event_loop(account: DocumentedSnowflake) -> None:
    """Each statement takes 1 s (the connector blocks its thread); the event loop's lag stays under 0.25 s.

    The same measurement with the poll called on the loop's own thread (what not using a thread would do)
    shows the lag it would cause: it is what makes the measurement worth trusting.
    """
    account.delay = 1.0

    async def lag_while(work: Any) -> float:
        worst = 0.0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal worst
            while not done.is_set():
                start = time.monotonic()
                await asyncio.sleep(0.01)
                worst = max(worst, time.monotonic() - start - 0.01)

        tick = asyncio.create_task(ticker())
        await asyncio.sleep(0.05)
        await work()
        done.set()
        await tick
        return worst

    async def through_the_trigger() -> None:
        await first_events({"a": trigger("a").run()}, timeout=2.5)

    async def on_the_loop_thread() -> None:
        loop = SourceChangeTrigger.make_loop(trigger("a").serialize()[1])
        loop.poll([trigger("a").watch_target()])

    threaded = asyncio.run(lag_while(through_the_trigger))
    polls = len(account.statements)
    blocking = asyncio.run(lag_while(on_the_loop_thread))
    print(f"event loop lag: {threaded:.3f} s with the poll in a thread, {blocking:.3f} s on the loop's thread")
    assert polls >= 2  # the slow polls really ran meanwhile
    assert threaded < 0.25, threaded
    assert blocking > 0.9, blocking


def test_airflows_backfill_cuts_a_watched_dag_by_max_interval_and_refuses_one_without() -> None:
    """What Airflow's backfill reads (``airflow.models.backfill``): the scheduler's DAG, ``timetable.periodic`` and
    ``iter_dagrun_infos_between``. The plan then reloads each run's data interval, as on a scheduled table."""
    from datetime import UTC, datetime

    from airflow.serialization.serialized_objects import DagSerialization

    def scheduler_dag(c: TableConfig) -> Any:
        return DagSerialization.from_dict(DagSerialization.to_dict(build_dag(c)))

    daily = scheduler_dag(cfg("orders"))
    assert daily.timetable.periodic
    infos = list(daily.iter_dagrun_infos_between(datetime(2026, 2, 1, tzinfo=UTC), datetime(2026, 2, 3, tzinfo=UTC)))
    assert [(i.data_interval.start.day, i.data_interval.end.day) for i in infos] == [(1, 2), (2, 3), (3, 4)]
    assert not scheduler_dag(cfg("quiet", watch={"max_interval": None})).timetable.periodic
