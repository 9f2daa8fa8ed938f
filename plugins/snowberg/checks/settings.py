"""Per-table YAML sections for checks and alerts: ``alerts:`` and ``health:``.

Only pydantic, the standard library and ``snowberg.core.durations`` are imported
here: these models are validated when DAG files are parsed.

.. code-block:: yaml

    tables:
      - name: orders
        ...
        freshness_sla: 2h
        external_volume: iceberg_external_volume
        alerts:
          email: [oncall@example.com]
          slack_webhook_conn_id: slack_data_alerts
          sns_topic_arn: arn:aws:sns:eu-west-1:123456789012:lake-alerts
          webhook_conn_id: pagerduty_events     # or webhook_url: https://…
          events: [load_failure, check_failure]
        health:
          min_stats_coverage: 0.95
          max_small_file_ratio: 0.5
          small_file_size: 32MiB
          max_partition_skew: 20
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from snowberg.core.durations import parse_duration

Duration = Annotated[timedelta, BeforeValidator(parse_duration)]

AlertEvent = Literal["load_failure", "check_failure", "volume_mismatch", "volume_anomaly"]
ALERT_EVENTS: tuple[str, ...] = ("load_failure", "check_failure", "volume_mismatch", "volume_anomaly")
_DEFAULT_EVENTS: tuple[AlertEvent, ...] = ("load_failure", "check_failure", "volume_mismatch", "volume_anomaly")

_EMAIL = re.compile(r"^[^@\s,;]+@[^@\s,;]+\.[^@\s,;]+$")
_CONN_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,250}$")
_SNS_ARN = re.compile(r"^arn:aws[a-zA-Z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_\-]{1,256}(\.fifo)?$")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {
    None: 1,
    "b": 1,
    "kb": 1000,
    "kib": 1024,
    "mb": 1000**2,
    "mib": 1024**2,
    "gb": 1000**3,
    "gib": 1024**3,
}


def parse_size(value: object) -> int:
    """Bytes from an int or a string such as ``"32MiB"``, ``"128MB"``, ``"4096"``."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"size must not be negative: {value!r}")
        return value
    if isinstance(value, str):
        m = _SIZE.match(value)
        if m:
            unit = m.group(2).lower() if m.group(2) else None
            return int(float(m.group(1)) * _SIZE_UNITS[unit])
    raise ValueError(f"not a size: {value!r} (use bytes, or e.g. '32MiB', '128MB')")


Size = Annotated[int, BeforeValidator(parse_size)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _conn_id(v: str | None, what: str) -> str | None:
    if v is not None and not _CONN_ID.match(v):
        raise ValueError(f"{what} {v!r} is not a valid Airflow connection id")
    return v


class AlertsConfig(_Strict):
    """Where a table's failures are sent.

    Every channel is optional; at least one must be set. ``events`` chooses
    which failures alert: a failed load/plan/publish task (``load_failure``)
    and a failed snowberg check (``check_failure``: freshness, health,
    external volume, lake probe).
    """

    email: list[str] = Field(default_factory=list)
    email_conn_id: str | None = None  # SMTP connection; default: [email] email_conn_id, else smtp_default
    email_from: str | None = None  # default: the SMTP connection's from_email
    slack_webhook_conn_id: str | None = None
    sns_topic_arn: str | None = None
    aws_conn_id: str | None = "aws_default"
    sns_region: str | None = None
    webhook_url: str | None = None
    webhook_conn_id: str | None = None  # an HTTP connection (host, auth, headers in extras)
    webhook_endpoint: str = ""  # path appended to the HTTP connection's host
    events: list[AlertEvent] = Field(default_factory=lambda: list(_DEFAULT_EVENTS))

    @field_validator("email")
    @classmethod
    def _emails(cls, v: list[str]) -> list[str]:
        for addr in v:
            if not _EMAIL.match(addr):
                raise ValueError(f"not an email address: {addr!r}")
        return v

    @field_validator("email_from")
    @classmethod
    def _from(cls, v: str | None) -> str | None:
        if v is not None and not _EMAIL.match(v.split("<")[-1].rstrip(">").strip()):
            raise ValueError(f"not an email address: {v!r}")
        return v

    @field_validator("email_conn_id", "slack_webhook_conn_id", "aws_conn_id", "webhook_conn_id")
    @classmethod
    def _conn_ids(cls, v: str | None) -> str | None:
        return _conn_id(v, "connection id")

    @field_validator("sns_topic_arn")
    @classmethod
    def _arn(cls, v: str | None) -> str | None:
        if v is not None and not _SNS_ARN.match(v):
            raise ValueError(f"not an SNS topic ARN: {v!r} (expected arn:aws:sns:<region>:<account>:<topic>)")
        return v

    @field_validator("webhook_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://[^\s/]+", v):
            raise ValueError(f"webhook_url must be an http(s) URL, got {v!r}")
        return v

    @field_validator("events")
    @classmethod
    def _events(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("events must name at least one of " + ", ".join(ALERT_EVENTS))
        return list(dict.fromkeys(v))

    @model_validator(mode="after")
    def _channels(self) -> AlertsConfig:
        if self.webhook_url and self.webhook_conn_id:
            raise ValueError("give webhook_url or webhook_conn_id, not both")
        if self.webhook_endpoint and not self.webhook_conn_id:
            raise ValueError("webhook_endpoint needs webhook_conn_id")
        if (self.email_conn_id or self.email_from) and not self.email:
            raise ValueError("email_conn_id/email_from need at least one address in email")
        if not self.channels:
            raise ValueError(
                "no alert channel: set email, slack_webhook_conn_id, sns_topic_arn, webhook_url or webhook_conn_id"
            )
        return self

    @property
    def channels(self) -> list[str]:
        out = []
        if self.email:
            out.append("email")
        if self.slack_webhook_conn_id:
            out.append("slack")
        if self.sns_topic_arn:
            out.append("sns")
        if self.webhook_url or self.webhook_conn_id:
            out.append("webhook")
        return out


class HealthThresholds(_Strict):
    """Limits for the table-health report; a breached limit fails the check.

    Every limit is optional: an unset one is reported, never enforced.
    """

    min_stats_coverage: float | None = Field(default=None, ge=0.0, le=1.0)
    max_small_file_ratio: float | None = Field(default=None, ge=0.0, le=1.0)
    small_file_size: Size = 32 * 1024 * 1024
    max_partition_skew: float | None = Field(default=None, ge=1.0)
    max_snapshots: int | None = Field(default=None, ge=1)
    max_delete_files: int | None = Field(default=None, ge=0)
    max_snapshot_age: Duration | None = None  # oldest retained snapshot: is expiry running?
    fail_on_breach: bool = True  # False: log the breaches and succeed

    def limits(self) -> dict[str, object]:
        """The configured limits, for reports."""
        return {k: v for k, v in self.model_dump().items() if v is not None and k not in ("fail_on_breach",)}
