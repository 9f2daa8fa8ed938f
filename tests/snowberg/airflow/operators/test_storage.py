"""The storage check operators: the external volume verification and the lake probe, run on recorded
Snowflake outputs and a local lake."""

from __future__ import annotations

from typing import Any

import pytest
from checks_harness import RecordedConn, RecordedCursor, describe_rows, volume_output

from snowberg.checks.external_volume import PASSED

# ---------------------------------------------------------------------------
# The operator, with the Snowflake hook replaced by a recorded connection


@pytest.fixture
def fake_snowflake(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    import snowberg.snowflake.hook

    state: dict[str, Any] = {}

    class Hook:
        def __init__(self, conn_id: str) -> None:
            state["conn_id"] = conn_id

        def get_conn(self) -> RecordedConn:
            state["conn"] = RecordedConn(RecordedCursor(state["results"]))
            return state["conn"]

    monkeypatch.setattr(snowberg.snowflake.hook, "snowflake_hook", lambda conn_id, cfg=None: Hook(conn_id))
    return state


def test_operator_success_returns_steps(fake_snowflake: dict[str, Any], context: dict[str, Any]) -> None:
    from snowberg.airflow.operators.storage import VerifyExternalVolumeOperator

    fake_snowflake["results"] = {
        "SELECT SYSTEM$VERIFY": [(volume_output("success_s3"),)],
        "DESC EXTERNAL VOLUME": describe_rows("describe_read_write"),
    }
    op = VerifyExternalVolumeOperator(
        task_id="verify", external_volume="iceberg_external_volume", snowflake_conn_id="sf"
    )
    out = op.execute(context)
    assert out["ok"] is True and out["probe"] is None
    assert {s["key"]: s["status"] for s in out["volume"]["steps"]}["writeResult"] == PASSED
    assert fake_snowflake["conn_id"] == "sf" and fake_snowflake["conn"].closed


def test_operator_failure_names_step_and_cause(fake_snowflake: dict[str, Any], context: dict[str, Any]) -> None:
    from snowberg.airflow.operators.check_base import SnowbergCheckFailed
    from snowberg.airflow.operators.storage import VerifyExternalVolumeOperator

    fake_snowflake["results"] = {
        "SELECT SYSTEM$VERIFY": [(volume_output("trust_policy"),)],
        "DESC EXTERNAL VOLUME": describe_rows("describe_read_write"),
    }
    op = VerifyExternalVolumeOperator(task_id="verify", external_volume="iceberg_external_volume", table_name="orders")
    with pytest.raises(SnowbergCheckFailed) as ei:
        op.execute(context)
    err = ei.value
    assert err.check == "external_volume"
    assert "write" in err.observed and "AWS role ARN validation" in err.observed
    assert "trust policy" in str(err) and "arn:aws:iam::123456789001:user/k7ab0000-s" in str(err)
    assert context["ti"].xcom["result"]["ok"] is False


def test_operator_read_only_volume(fake_snowflake: dict[str, Any], context: dict[str, Any]) -> None:
    from snowberg.airflow.operators.check_base import SnowbergCheckFailed
    from snowberg.airflow.operators.storage import VerifyExternalVolumeOperator

    fake_snowflake["results"] = {
        "SELECT SYSTEM$VERIFY": [(volume_output("read_only"),)],
        "DESC EXTERNAL VOLUME": describe_rows("describe_read_only"),
    }
    with pytest.raises(SnowbergCheckFailed, match="ALLOW_WRITES = FALSE"):
        VerifyExternalVolumeOperator(task_id="v", external_volume="iceberg_external_volume").execute(context)
    out = VerifyExternalVolumeOperator(
        task_id="v", external_volume="iceberg_external_volume", require_writes=False
    ).execute(context)
    assert out["ok"] is True


def test_operator_missing_volume_is_a_check_failure(fake_snowflake: dict[str, Any], context: dict[str, Any]) -> None:
    from snowflake.connector.errors import ProgrammingError

    from snowberg.airflow.operators.check_base import SnowbergCheckFailed
    from snowberg.airflow.operators.storage import VerifyExternalVolumeOperator

    err = ProgrammingError(
        msg="SQL compilation error:\nExternal volume 'NOPE' does not exist or not authorized.", errno=2003
    )
    fake_snowflake["results"] = {"SELECT SYSTEM$VERIFY": err}
    with pytest.raises(SnowbergCheckFailed, match="does not exist or not authorized"):
        VerifyExternalVolumeOperator(task_id="v", external_volume="nope").execute(context)


def test_operator_also_probes_the_lake(
    fake_snowflake: dict[str, Any], use_catalog: Any, orders: Any, context: dict[str, Any]
) -> None:
    from snowberg.airflow.operators.storage import VerifyExternalVolumeOperator

    fake_snowflake["results"] = {
        "SELECT SYSTEM$VERIFY": [(volume_output("success_s3"),)],
        "DESC EXTERNAL VOLUME": describe_rows("describe_read_write"),
    }
    out = VerifyExternalVolumeOperator(task_id="v", external_volume="vol", catalog="lake", table="lake.orders").execute(
        context
    )
    assert out["ok"] is True
    assert [s["status"] for s in out["probe"]["steps"]] == [PASSED] * 4
    assert out["probe"]["location"] == orders.location()


# ---------------------------------------------------------------------------
# The lake probe


def test_probe_operator_local(use_catalog: Any, orders: Any, context: dict[str, Any]) -> None:
    from snowberg.airflow.operators.storage import LakeProbeOperator

    out = LakeProbeOperator(task_id="probe", catalog="lake", table="lake.orders").execute(context)
    assert out["ok"] is True
    assert [s["status"] for s in out["steps"]] == [PASSED] * 4


def test_probe_operator_fails_with_the_step(
    monkeypatch: pytest.MonkeyPatch, s3_props: dict[str, str], context: dict[str, Any]
) -> None:
    import snowberg.iceberg.catalogs
    from snowberg.airflow.operators.check_base import SnowbergCheckFailed
    from snowberg.airflow.operators.storage import LakeProbeOperator

    class Cat:
        properties = {**s3_props, "warehouse": "s3://no-such-bucket-snowberg/wh"}

    monkeypatch.setattr(snowberg.iceberg.catalogs, "open_catalog", lambda name: Cat())
    with pytest.raises(SnowbergCheckFailed) as ei:
        LakeProbeOperator(task_id="probe", catalog="lake").execute(context)
    assert ei.value.check == "lake_probe"
    assert "write" in ei.value.observed
    assert "bucket does not exist" in str(ei.value)
    assert context["ti"].xcom["result"]["ok"] is False
