"""SYSTEM$VERIFY_EXTERNAL_VOLUME: the parser and diagnosis on recorded outputs (the operator:
tests/snowberg/airflow/operators/test_storage.py).

The emulator has no such function, so the outputs in tests/fixtures/verify_external_volume/
follow the shape Snowflake documents and returns (one JSON object in one VARCHAR).
"""

from __future__ import annotations

import json

import pytest
from checks_harness import RecordedConn, RecordedCursor, describe_rows, volume_output

from snowberg.checks import external_volume as volume
from snowberg.checks.external_volume import FAILED, PASSED, SKIPPED


def statuses(v: volume.VolumeVerification) -> dict[str, str]:
    return {s.key: s.status for s in v.steps}


def test_success_s3_every_step_parsed() -> None:
    v = volume.parse_verification(volume_output("success_s3"), "iceberg_external_volume")
    assert v.success is True
    assert statuses(v) == {
        "storageLocationSelectionResult": PASSED,
        "awsRoleArnValidationResult": PASSED,
        "azureGetUserDelegationKeyResult": SKIPPED,
        "writeResult": PASSED,
        "readResult": PASSED,
        "listResult": PASSED,
        "deleteResult": PASSED,
    }
    assert v.provider == "S3"
    assert v.storage_location == "my-s3-us-west-2"
    assert v.principal == {
        "STORAGE_AWS_IAM_USER_ARN": "arn:aws:iam::123456789001:user/k7ab0000-s",
        "STORAGE_AWS_EXTERNAL_ID": "iceberg_table_demo_ns",
    }
    d = volume.diagnose(v)
    assert d.ok and d.problems == []
    assert "OK" in volume.render(d)


def test_success_azure_documented_example() -> None:
    v = volume.parse_verification(volume_output("success_azure"), "azure_vol")
    assert v.ok() and v.provider == "AZURE"
    assert v.storage_account == "myStorageAccount"
    assert v.principal["AZURE_CONSENT_URL"].startswith("https://login.microsoftonline.com/")
    assert statuses(v)["azureGetUserDelegationKeyResult"] == PASSED


def test_read_only_volume_fails_when_writes_are_required() -> None:
    v = volume.parse_verification(volume_output("read_only"), "iceberg_external_volume")
    assert v.success is True  # Snowflake calls it a success: it skipped what it could not do
    assert v.writes_skipped
    assert v.ok(require_writes=False)
    assert not v.ok(require_writes=True)
    d = volume.diagnose(v, volume.parse_describe(describe_rows("describe_read_only"), "iceberg_external_volume"))
    assert len(d.problems) == 1
    assert "ALLOW_WRITES = FALSE" in d.problems[0]
    assert "DESC shows" in d.problems[0]
    assert 'ALTER EXTERNAL VOLUME "ICEBERG_EXTERNAL_VOLUME" SET ALLOW_WRITES = TRUE' in d.problems[0]
    # without DESC the cause is stated as probable
    assert "probably read-only" in volume.diagnose(v).problems[0]
    assert volume.diagnose(v, require_writes=False).ok


def test_write_denied_names_step_action_and_resource() -> None:
    v = volume.parse_verification(volume_output("write_denied"), "iceberg_external_volume")
    assert not v.success
    assert [s.key for s in v.failed] == ["writeResult"]
    w = v.step("writeResult")
    assert w is not None and w.message is not None
    assert w.message.startswith(
        "User: arn:aws:sts::001234567890:assumed-role/iceberg_snowflake/snowflake"
    )  # prefix stripped
    assert statuses(v)["readResult"] == SKIPPED
    d = volume.diagnose(v)
    assert len(d.problems) == 1
    assert d.problems[0].startswith("write step (writeResult) failed")
    cause = d.steps[[s.key for s in d.steps].index("writeResult")].cause
    assert cause is not None
    assert "s3:PutObject" in cause and "arn:aws:s3:::ns-iceberg-demo/verify_1762953386579_23029527" in cause


def test_trust_policy_failure_names_principal_and_external_id() -> None:
    v = volume.parse_verification(volume_output("trust_policy"), "iceberg_external_volume")
    desc = volume.parse_describe(describe_rows("describe_read_write"), "iceberg_external_volume")
    d = volume.diagnose(v, desc)
    failed = {s.key: s for s in d.steps if s.status == FAILED}
    assert set(failed) == {"writeResult", "awsRoleArnValidationResult"}
    for s in failed.values():
        assert s.cause is not None
        assert "trust policy" in s.cause
        assert "arn:aws:iam::123456789001:user/k7ab0000-s" in s.cause  # STORAGE_AWS_IAM_USER_ARN
        assert 'sts:ExternalId = "iceberg_table_demo_ns"' in s.cause  # STORAGE_AWS_EXTERNAL_ID
        assert "arn:aws:iam::001234567890:role/iceberg_snowflake" in s.cause  # the role, from DESC
        assert "DESC EXTERNAL VOLUME iceberg_external_volume" in s.cause
    text = volume.render(d)
    assert "FAILED" in text and "likely cause" in text


def test_trust_policy_role_taken_from_message_without_desc() -> None:
    v = volume.parse_verification(volume_output("trust_policy"), "vol")
    cause = volume.diagnose(v).steps[[s.key for s in v.steps].index("awsRoleArnValidationResult")].cause
    assert cause is not None and "arn:aws:iam::001234567890:role/iceberg_snowflake" in cause


@pytest.mark.parametrize(
    ("fixture", "step", "needle"),
    [
        ("list_denied", "listResult", "s3:ListBucket"),
        ("list_denied", "listResult", "s3:prefix"),
        ("delete_denied", "deleteResult", "s3:DeleteObject"),
        ("no_such_bucket", "writeResult", "does not exist"),
        ("sts_not_activated", "awsRoleArnValidationResult", "STS is not activated"),
        ("location_selection_failed", "storageLocationSelectionResult", "active storage location"),
        ("kms_denied", "writeResult", "KMS key"),
        ("azure_permission_mismatch", "writeResult", "Storage Blob Data Contributor"),
    ],
)
def test_failure_shapes_have_a_likely_cause(fixture: str, step: str, needle: str) -> None:
    v = volume.parse_verification(volume_output(fixture), "iceberg_external_volume")
    assert not v.success
    d = volume.diagnose(v)
    assert not d.ok
    s = next(s for s in d.steps if s.key == step)
    assert s.status == FAILED
    assert s.cause is not None and needle.lower() in s.cause.lower(), s.cause
    assert any(p.startswith(f"{s.label} step ({step}) failed") for p in d.problems)


def test_list_denied_other_steps_still_pass() -> None:
    v = volume.parse_verification(volume_output("list_denied"), "v")
    assert statuses(v)["writeResult"] == PASSED
    assert statuses(v)["deleteResult"] == PASSED
    assert [s.key for s in v.failed] == ["listResult"]


def test_booleans_unknown_steps_and_bad_input() -> None:
    v = volume.parse_verification(
        {
            "success": "false",
            "storageLocationSelectionResult": False,
            "writeResult": True,
            "futureCheckResult": "boom happened",
        },
        "v",
    )
    assert not v.success
    assert statuses(v) == {"storageLocationSelectionResult": FAILED, "writeResult": PASSED, "futureCheckResult": FAILED}
    assert v.step("futureCheckResult").label == "future check"  # type: ignore[union-attr]
    with pytest.raises(volume.VerificationParseError, match="did not return JSON"):
        volume.parse_verification("External volume 'X' does not exist", "X")
    with pytest.raises(volume.VerificationParseError, match="no 'success'"):
        volume.parse_verification("{}", "X")


def test_parse_describe_from_dict_rows() -> None:
    rows = [
        dict(zip(json.loads(volume_output("describe_read_only"))["columns"], r, strict=True))
        for r in describe_rows("describe_read_only")
    ]
    desc = volume.parse_describe(rows, "v")
    assert desc.allow_writes is False
    assert desc.active_location == "my-s3-us-west-2"
    assert (
        desc.location("my-s3-us-west-2")["STORAGE_AWS_ROLE_ARN"] == "arn:aws:iam::001234567890:role/iceberg_snowflake"
    )


def test_verify_binds_the_volume_name_and_quotes_desc() -> None:
    cur = RecordedCursor(
        {
            "SELECT SYSTEM$VERIFY": [(volume_output("read_only"),)],
            "DESC EXTERNAL VOLUME": describe_rows("describe_read_only"),
        }
    )
    v, desc = volume.verify_external_volume(RecordedConn(cur), "iceberg_external_volume")
    assert cur.executed[0] == (
        "SELECT SYSTEM$VERIFY_EXTERNAL_VOLUME(%(volume)s)",
        {"volume": "iceberg_external_volume"},
    )
    assert cur.executed[1] == ('DESC EXTERNAL VOLUME "ICEBERG_EXTERNAL_VOLUME"', None)
    assert desc is not None and desc.allow_writes is False
    assert v.writes_skipped and cur.closed


def test_verify_goes_on_without_desc_privilege() -> None:
    cur = RecordedCursor(
        {
            "SELECT SYSTEM$VERIFY": [(volume_output("write_denied"),)],
            "DESC EXTERNAL VOLUME": RuntimeError("insufficient privileges"),
        }
    )
    v, desc = volume.verify_external_volume(RecordedConn(cur), "vol")
    assert desc is None and not v.success


def test_verify_refuses_a_name_that_is_not_an_identifier() -> None:
    with pytest.raises(ValueError, match="invalid external volume"):
        volume.verify_external_volume(RecordedConn(RecordedCursor({})), "vol'); DROP TABLE x; --")
