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
from enum import StrEnum
from typing import Annotated

from pydantic import BeforeValidator, Field, field_validator, model_validator

from snowberg.config.fields import ConnectionId
from snowberg.core.identifiers import clip
from snowberg.core.models import Duration, StrictModel


class FreshnessMeasure(StrEnum):
    """What a table's ``freshness_sla`` limits.

    proven_current: the time since a run last proved the lake current — a commit, or a run that found
                    nothing new (recorded without any Iceberg commit). A quiet source stays green; a
                    pipeline that stops running (paused, failing, stuck) alerts.
    last_data:      the time since the last data snapshot. A quiet source alerts too (the behaviour before
                    the proof was recorded), for tables whose source must change within the SLA.
    """

    PROVEN_CURRENT = "proven_current"
    LAST_DATA = "last_data"


class AlertEvent(StrEnum):
    """What an alert is about; a table's ``alerts.events`` chooses among these.

    The set is named once, here beside ``AlertsConfig`` (whose ``events``
    field it types), because this module is imported when DAG files are
    parsed and must stay free of Airflow; ``snowberg.airflow.alerts``
    re-exports it for the notifiers and operators.

    load_failure:        a plan/load/publish task failed
    check_failure:       a snowberg check failed (freshness, health, external volume, lake probe)
    schema_change:       the source's columns changed (added, widened, dropped; for added columns, what
                         ``on_column_added`` means for the rows already in the lake); sent without failing
                         the run unless the change itself fails it (``on_column_dropped: fail``)
    volume_mismatch:     the lake and Snowflake disagree on a table's rows
    volume_anomaly:      a run's volume breaks the table's own history
    maintenance_failure: expiry, compaction or orphan-file removal failed
    watch_failure:       the triggerer cannot tell whether a watched table's source changed: its metadata
                         poll keeps failing (network, credentials, a dropped object, a revoked grant)
    """

    LOAD_FAILURE = "load_failure"
    CHECK_FAILURE = "check_failure"
    SCHEMA_CHANGE = "schema_change"
    VOLUME_MISMATCH = "volume_mismatch"
    VOLUME_ANOMALY = "volume_anomaly"
    MAINTENANCE_FAILURE = "maintenance_failure"
    WATCH_FAILURE = "watch_failure"


# Applied with fullmatch: ``$`` would also accept a value ending in a newline.
_EMAIL = re.compile(r"[^@\s,;]+@[^@\s,;]+\.[^@\s,;]+")
_SNS_ARN = re.compile(r"arn:aws[a-zA-Z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_\-]{1,256}(\.fifo)?", re.ASCII)
_URL = re.compile(r"https?://[^\s/]+\S*")
# re.ASCII: \d would also match every Unicode digit, which float() reads ("\u0663MiB" as 3 MiB).
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib)?\s*", re.IGNORECASE | re.ASCII)
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
        m = _SIZE.fullmatch(value)
        if m:
            unit = m.group(2).lower() if m.group(2) else None
            return int(float(m.group(1)) * _SIZE_UNITS[unit])
    raise ValueError(f"not a size: {value!r} (use bytes, or e.g. '32MiB', '128MB')")


Size = Annotated[int, BeforeValidator(parse_size, json_schema_input_type=int | str)]


class AlertsConfig(StrictModel):
    """Where a table's failures are sent.

    Every channel is optional; at least one must be set. ``events`` chooses
    which ``AlertEvent`` s are sent (default: all of them).
    """

    email: list[str] = Field(default_factory=list)
    """Addresses mailed through the SMTP provider."""
    email_conn_id: ConnectionId | None = None
    """The SMTP connection (unset: Airflow's ``[email] email_conn_id``, else ``smtp_default``)."""
    email_from: str | None = None
    """The sender (unset: the SMTP connection's ``from_email``)."""
    slack_webhook_conn_id: ConnectionId | None = None
    """A Slack incoming-webhook connection (Slack provider)."""
    sns_topic_arn: str | None = None
    """An SNS topic ``arn:aws:sns:<region>:<account>:<topic>`` (Amazon provider)."""
    aws_conn_id: ConnectionId | None = "aws_default"
    """The AWS connection SNS alerts are published with."""
    sns_region: str | None = None
    """The SNS region (unset: the connection's)."""
    webhook_url: str | None = None
    """An http(s) URL that receives each alert as JSON; registered with Airflow's secrets masker (its path
    usually carries a token: prefer ``webhook_conn_id``)."""
    webhook_conn_id: ConnectionId | None = None
    """An HTTP connection (host, auth, headers in its extras) that receives each alert as JSON."""
    webhook_endpoint: str = ""
    """The path appended to ``webhook_conn_id``'s host."""
    events: list[AlertEvent] = Field(default_factory=lambda: list(AlertEvent))
    """The events sent (default: every event)."""

    @field_validator("email")
    @classmethod
    def _emails(cls, v: list[str]) -> list[str]:
        for addr in v:
            if not _EMAIL.fullmatch(addr):
                raise ValueError(f"not an email address: {clip(addr)}")
        return v

    @field_validator("email_from")
    @classmethod
    def _from(cls, v: str | None) -> str | None:
        if v is not None and (not _EMAIL.fullmatch(v.split("<")[-1].rstrip(">").strip()) or "\n" in v):
            raise ValueError(f"not an email address: {clip(v)}")
        return v

    @field_validator("sns_topic_arn")
    @classmethod
    def _arn(cls, v: str | None) -> str | None:
        if v is not None and not _SNS_ARN.fullmatch(v):
            raise ValueError(f"not an SNS topic ARN: {clip(v)} (expected arn:aws:sns:<region>:<account>:<topic>)")
        return v

    @field_validator("webhook_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not _URL.fullmatch(v):
            # Not echoed: a webhook URL usually carries its token.
            raise ValueError("webhook_url must be an http(s) URL without spaces or newlines")
        return v

    @field_validator("events")
    @classmethod
    def _events(cls, v: list[AlertEvent]) -> list[AlertEvent]:
        if not v:
            raise ValueError("events must name at least one of " + ", ".join(AlertEvent))
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


class HealthThresholds(StrictModel):
    """Limits for the table-health report; a breached limit fails the check.

    Every limit is optional: an unset one is reported, never enforced.
    """

    min_stats_coverage: float | None = Field(default=None, ge=0.0, le=1.0)
    """The least share of (data file, column) pairs that carry null counts and bounds."""
    max_small_file_ratio: float | None = Field(default=None, ge=0.0, le=1.0)
    """The largest share of data files smaller than ``small_file_size``."""
    small_file_size: Size = 32 * 1024 * 1024
    """What counts as a small file: bytes, or ``32MiB``, ``128MB``, ``1GiB``."""
    max_partition_skew: float | None = Field(default=None, ge=1.0)
    """The largest ratio of the most to the fewest data files per partition."""
    max_snapshots: int | None = Field(default=None, ge=1)
    """The most snapshots the table may keep (is snapshot expiry running?)."""
    max_delete_files: int | None = Field(default=None, ge=0)
    """The most delete files the current snapshot may carry (merge-on-read debt, cleared by compaction)."""
    max_snapshot_age: Duration | None = None
    """The oldest retained snapshot's greatest age (is expiry running?)."""
    fail_on_breach: bool = True
    """false: log the breaches and succeed."""

    def limits(self) -> dict[str, object]:
        """The configured limits, for reports."""
        return {k: v for k, v in self.model_dump().items() if v is not None and k not in ("fail_on_breach",)}
