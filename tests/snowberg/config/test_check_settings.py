"""The ``alerts:`` and ``health:`` YAML sections."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest
import yaml
from pydantic import ValidationError

from snowberg.config.check_settings import AlertEvent, AlertsConfig, HealthThresholds, parse_size


def test_alerts_full_section_from_yaml() -> None:
    doc = yaml.safe_load(
        """
        email: [oncall@example.com, data@example.com]
        email_from: snowberg@example.com
        slack_webhook_conn_id: slack_data_alerts
        sns_topic_arn: arn:aws:sns:eu-west-1:123456789012:lake-alerts
        aws_conn_id: aws_alerts
        webhook_conn_id: ops_webhook
        webhook_endpoint: /v2/enqueue
        events: [check_failure]
        """
    )
    cfg = AlertsConfig.model_validate(doc)
    assert cfg.channels == ["email", "slack", "sns", "webhook"]
    assert cfg.events == ["check_failure"]
    with pytest.raises(ValidationError):
        cfg.events = []  # type: ignore[misc]


def test_alerts_defaults_and_frozen() -> None:
    cfg = AlertsConfig(webhook_url="http://127.0.0.1:9/hook")
    assert cfg.events == list(AlertEvent)  # every event unless the table narrows it
    assert {"load_failure", "check_failure", "schema_change", "volume_mismatch"} <= set(cfg.events)
    assert cfg.aws_conn_id == "aws_default"
    with pytest.raises(ValidationError):
        cfg.webhook_url = "http://other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({}, "no alert channel"),
        ({"email": ["not-an-address"]}, "not an email address"),
        ({"email": ["a@b.co"], "emails": ["x"]}, "Extra inputs are not permitted"),
        ({"sns_topic_arn": "lake-alerts"}, "not an SNS topic ARN"),
        ({"webhook_url": "ftp://x"}, "http(s) URL"),
        ({"webhook_url": "http://x", "webhook_conn_id": "c"}, "not both"),
        ({"webhook_url": "http://x", "events": []}, "at least one"),
        ({"webhook_url": "http://x", "events": ["stale"]}, "load_failure"),
        ({"slack_webhook_conn_id": "bad id!"}, "connection id"),
        ({"email_from": "x@y.io", "webhook_url": "http://x"}, "need at least one address"),
    ],
)
def test_alerts_rejects(doc: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        AlertsConfig.model_validate(doc)


def test_health_thresholds_read_sizes_and_durations_report_only_the_limits_set_and_refuse_bad_values() -> None:
    th = HealthThresholds.model_validate(
        {"min_stats_coverage": 0.9, "small_file_size": "8MiB", "max_snapshot_age": "7d"}
    )
    assert th.small_file_size == 8 * 1024 * 1024
    assert th.max_snapshot_age == timedelta(days=7)
    assert th.limits() == {
        "min_stats_coverage": 0.9,
        "small_file_size": 8 * 1024 * 1024,
        "max_snapshot_age": timedelta(days=7),
    }
    for bad in (
        {"min_stats_coverage": 1.5},
        {"max_partition_skew": 0.5},
        {"max_small_file_ratio": -0.1},
        {"small_file_size": "big"},
        {"x": 1},
    ):
        with pytest.raises(ValidationError):
            HealthThresholds.model_validate(bad)


@pytest.mark.parametrize(
    ("text", "n"),
    [(4096, 4096), ("4096", 4096), ("32MiB", 32 * 1024**2), ("128 MB", 128 * 1000**2), ("1.5GiB", int(1.5 * 1024**3))],
)
def test_a_size_is_bytes_or_a_number_with_a_binary_or_decimal_unit(text: object, n: int) -> None:
    assert parse_size(text) == n


@pytest.mark.parametrize("text", ["\u0663MiB", "1\u0663", "\u00b2GB", "-1MB", "12 parsecs"])
def test_a_size_in_non_ascii_digits_or_with_an_unknown_unit_is_refused(text: str) -> None:
    # \d matches every Unicode digit and float() reads them: "\u0663MiB" would be 3 MiB, silently.
    with pytest.raises(ValueError, match="not a size"):
        parse_size(text)


def test_settings_import_nothing_heavy() -> None:
    # snowflake-snowpark's nspkg .pth registers an empty 'snowflake' namespace
    # module at interpreter start, so look for the connector itself.
    code = (
        "import sys, snowberg.config.check_settings, snowberg.checks\n"
        "heavy = [m for m in ('airflow', 'pyiceberg', 'pyarrow', 'pandas', 'snowflake.connector', 'boto3') "
        "if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
