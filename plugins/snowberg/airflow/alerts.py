"""Alerts: Airflow notifiers built from a table's ``alerts:`` config.

``build_notifiers(alerts_config, table=..., dag_id=...)`` returns notifier
instances to use as ``on_failure_callback`` (of the tasks, e.g. through the
DAG's ``default_args``). Each one, when a task fails:

1. builds an ``Alert`` from the failure context: which table, which task,
   whether it was a check (``check_failure``) or a load (``load_failure``),
   for checks what was observed and what was expected (from the
   ``snowberg.checks.CheckFailed`` the operator raised), the error, and a link
   to the run in the Airflow UI (``{[api] base_url}/dags/{dag_id}/runs/{run_id}``);
2. drops it when its event is not among the configured ``events``;
3. delivers it through the provider's notifier: ``SmtpNotifier`` (email),
   ``SlackWebhookNotifier`` (Slack), ``SnsNotifier`` (Amazon SNS), or our
   ``WebhookNotifier`` (JSON POST through the http provider, or ``requests``
   for a plain URL).

Provider modules are imported only when an alert is sent, so building the
notifiers costs nothing at DAG parse time. Message text is computed from the
failure, never rendered as a Jinja template (an error message containing
``{{`` stays text).
"""

from __future__ import annotations

import html
import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from airflow.sdk import BaseNotifier

from snowberg.checks import find_check_failure
from snowberg.config.check_settings import AlertEvent, AlertsConfig
from snowberg.core import events

log = logging.getLogger(__name__)

# Checks whose failures are their own alert event (the rest are check_failure).
CHECK_EVENTS = {"volume": AlertEvent.VOLUME_MISMATCH, "volume_anomaly": AlertEvent.VOLUME_ANOMALY}
# Events raised by a check: their alerts show what was observed and what was expected.
CHECK_RESULT_EVENTS = frozenset({AlertEvent.CHECK_FAILURE, *CHECK_EVENTS.values()})
_MAX_ERROR = 3000


# ---------------------------------------------------------------------------
# The message

_URL_PATH = re.compile(r"(?i)\b(https?://[^/\s'\"<>|]+)(/[^\s'\"<>|]*)?")
# Request errors name the path alone, e.g. "Max retries exceeded with url: /hooks/T0/SECRET".
_BARE_PATH = re.compile(r"(?i)(\burl: )(/[^\s'\"<>|]*)")


def redact_urls(text: str) -> str:
    """``text`` with the path and query of every http(s) URL replaced by ``/***``.

    Webhook URLs carry their token in the path (Slack, Teams, PagerDuty
    integrations) and HTTP errors quote the URL whole; a task log is no place
    for a token.
    """
    return _BARE_PATH.sub(r"\1/***", _URL_PATH.sub(lambda m: m.group(1) + ("/***" if m.group(2) else ""), text))


def slack_escape(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` as Slack's message formatting asks.

    Unescaped, a value from the source or an error (``<!channel>``,
    ``<https://evil|click>``) becomes a mention or a link in the alert.
    """
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_fmt(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "; ".join(_fmt(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def base_url() -> str:
    try:
        from airflow.sdk.configuration import conf

        url = conf.get("api", "base_url", fallback=None)
    except Exception:  # noqa: BLE001 - a link is not worth failing an alert for
        url = None
    return (url or "http://localhost:8080").rstrip("/")


def run_url(dag_id: str, run_id: str | None, *, base: str | None = None) -> str | None:
    """The Airflow 3 UI page of a DAG run."""
    if not run_id:
        return None
    return f"{base or base_url()}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"


@dataclass(frozen=True, kw_only=True)
class Alert:
    event: AlertEvent
    table: str
    dag_id: str
    run_id: str | None
    task_id: str | None
    try_number: int | None
    logical_date: str | None
    check: str | None
    lake_table: str | None
    observed: Any
    expected: Any
    error: str | None
    run_url: str | None
    task_url: str | None
    sent_at: str
    details: Mapping[str, Any] | None = None  # what a non-failing event reports (e.g. the columns that changed)

    @property
    def title(self) -> str:
        if self.event is AlertEvent.VOLUME_MISMATCH:
            return "volume mismatch between Snowflake and the lake"
        if self.event is AlertEvent.VOLUME_ANOMALY:
            return "volume anomaly"
        if self.event is AlertEvent.CHECK_FAILURE:
            return f"{self.check or 'check'} check failed"
        if self.event is AlertEvent.LOAD_FAILURE:
            return f"load failed ({self.task_id or 'task'})"
        if self.event is AlertEvent.SCHEMA_CHANGE:
            return "source schema changed"
        if self.event is AlertEvent.WATCH_FAILURE:
            return "cannot tell whether the source changed (watch poll failing)"
        return self.event.value.replace("_", " ")

    @property
    def subject(self) -> str:
        return f"[snowberg] {self.table}: {self.title}"[:100]  # SNS subjects stop at 100 characters

    def rows(self) -> list[tuple[str, str]]:
        rows = [
            (
                "table",
                self.table + (f" ({self.lake_table})" if self.lake_table and self.lake_table != self.table else ""),
            )
        ]
        rows.append(("event", self.event))
        if self.event in CHECK_RESULT_EVENTS:
            rows += [("check", self.check or "-"), ("observed", _fmt(self.observed)), ("expected", _fmt(self.expected))]
        rows += [(str(k), _fmt(v)) for k, v in (self.details or {}).items()]
        rows += [
            ("DAG", self.dag_id),
            ("run", self.run_id or "-"),
            ("task", f"{self.task_id or '-'}" + (f" (try {self.try_number})" if self.try_number else "")),
        ]
        if self.logical_date:
            rows.append(("logical date", self.logical_date))
        rows.append(("run link", self.run_url or "-"))
        if self.task_url:
            rows.append(("task log", self.task_url))
        rows.append(("error", self.error or "-"))
        return rows

    @property
    def text(self) -> str:
        width = max(len(k) for k, _ in self.rows())
        body = "\n".join(f"{k.ljust(width)}  {v}" for k, v in self.rows())
        return f"snowberg alert: {self.table}: {self.title}\n\n{body}\n"

    @property
    def html(self) -> str:
        cells = "".join(
            f"<tr><th align='left' valign='top'>{html.escape(k)}</th><td>"
            + (
                f'<a href="{html.escape(v)}">{html.escape(v)}</a>'
                if k in ("run link", "task log") and v != "-"
                else f"<pre style='margin:0;white-space:pre-wrap'>{html.escape(v)}</pre>"
                if k == "error"
                else html.escape(v)
            )
            + "</td></tr>"
            for k, v in self.rows()
        )
        return (
            f"<h3>snowberg alert: {html.escape(self.table)}: {html.escape(self.title)}</h3>"
            f"<table cellpadding='4'>{cells}</table>"
        )

    @property
    def slack_text(self) -> str:
        """Slack mrkdwn; every value is escaped (``slack_escape``), only our own link is markup."""
        e = slack_escape
        lines = [f":rotating_light: *snowberg* `{e(self.table)}`: {e(self.title)}"]
        if self.event in CHECK_RESULT_EVENTS:
            lines.append(f"*observed:* {e(_fmt(self.observed))}")
            lines.append(f"*expected:* {e(_fmt(self.expected))}")
        lines += [f"*{e(str(k))}:* {e(_fmt(v))}" for k, v in (self.details or {}).items()]
        lines.append(f"*DAG:* `{e(self.dag_id)}`  *task:* `{e(str(self.task_id))}`  *run:* `{e(str(self.run_id))}`")
        if self.run_url:
            # run_url is built from quoted path segments: no '<', '>' or '|' can be in it.
            lines.append(f"<{self.run_url}|Open the run>")
        if self.error:
            lines.append(f"```{e(self.error[:1500])}```")
        return "\n".join(lines)

    def payload(self) -> dict[str, Any]:
        d = asdict(self)
        d["source"] = "snowberg"
        d["title"] = self.title
        d["subject"] = self.subject
        return json.loads(json.dumps(d, default=str))


def _iso_or_none(value: Any) -> str | None:
    if value is None:
        return None
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _exception(context: Mapping[str, Any]) -> BaseException | str | None:
    exc = context.get("exception")
    if exc is None:
        ti = context.get("ti") or context.get("task_instance")
        exc = getattr(ti, "error", None) if ti is not None else None
    return exc


def build_alert(context: Mapping[str, Any], *, table: str, dag_id: str | None = None) -> Alert:
    """The alert for a failure callback's ``context``."""
    ti = context.get("ti") or context.get("task_instance")
    dag_run = context.get("dag_run")
    dag = context.get("dag")
    task = context.get("task") or getattr(ti, "task", None)
    dag_id = dag_id or getattr(dag, "dag_id", None) or getattr(ti, "dag_id", None) or "?"
    run_id = context.get("run_id") or getattr(dag_run, "run_id", None) or getattr(ti, "run_id", None)
    exc = _exception(context)
    failure = find_check_failure(exc) if isinstance(exc, BaseException) else None
    check = failure.check if failure else getattr(task, "snowberg_check", None)
    event = AlertEvent.CHECK_FAILURE if (failure is not None or check) else AlertEvent.LOAD_FAILURE
    if failure is not None and failure.check in CHECK_EVENTS:
        event = CHECK_EVENTS[failure.check]
    elif failure is None and (own := getattr(task, "snowberg_alert_event", None)):
        event = AlertEvent(own)  # e.g. maintenance tasks: maintenance_failure
    error: str | None
    if failure is not None:
        error = failure.message
    elif isinstance(exc, BaseException):
        error = f"{type(exc).__name__}: {exc}"
    else:
        error = str(exc) if exc else None
    logical = context.get("logical_date") or getattr(dag_run, "logical_date", None)
    task_url = None
    if ti is not None:
        try:
            task_url = getattr(ti, "log_url", None)
        except Exception:  # noqa: BLE001
            task_url = None
    return Alert(
        event=event,
        table=table,
        dag_id=dag_id,
        run_id=run_id,
        task_id=getattr(ti, "task_id", None) or getattr(task, "task_id", None),
        try_number=getattr(ti, "try_number", None),
        logical_date=_iso_or_none(logical),
        check=check,
        lake_table=(failure.table if failure else None) or getattr(task, "table", None),
        observed=failure.observed if failure else None,
        expected=failure.expected if failure else None,
        error=(error[:_MAX_ERROR] + "…") if error and len(error) > _MAX_ERROR else error,
        run_url=run_url(dag_id, run_id),
        task_url=task_url if isinstance(task_url, str) else None,
        sent_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )


# ---------------------------------------------------------------------------
# Notifiers


class SnowbergNotifier(BaseNotifier):
    """Base: build the alert from the context, filter by event, deliver.

    Subclasses implement ``deliver(alert, context)``.
    """

    template_fields = ()
    channel = "?"

    def __init__(
        self, *, table: str, dag_id: str | None = None, events: Iterable[str] = tuple(AlertEvent), **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.dag_id = dag_id
        unknown = sorted(set(map(str, events)) - set(AlertEvent))
        if unknown:
            raise ValueError(f"unknown alert event(s) {unknown}; use {', '.join(AlertEvent)}")
        self.events = tuple(AlertEvent(e) for e in events)

    def notify(self, context: Any) -> None:
        self.send(build_alert(context, table=self.table, dag_id=self.dag_id), context)

    def send(self, alert: Alert, context: Any) -> None:
        """Deliver ``alert`` when its event is among this channel's ``events``."""
        if alert.event not in self.events:
            self.log.info(
                "snowberg: %s alert for %s not sent: %s is not among %s",
                self.channel,
                self.table,
                alert.event,
                self.events,
            )
            return
        self.deliver(alert, context)
        self.log.info("snowberg: %s alert sent for %s (%s)", self.channel, self.table, alert.title)

    def deliver(self, alert: Alert, context: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class EmailAlertNotifier(SnowbergNotifier):
    """Email through the SMTP provider's ``SmtpNotifier`` (HTML body, plain subject)."""

    channel = "email"

    def __init__(
        self, *, to: list[str] | str, from_email: str | None = None, smtp_conn_id: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.to = [to] if isinstance(to, str) else list(to)
        self.from_email = from_email
        self.smtp_conn_id = smtp_conn_id

    def deliver(self, alert: Alert, context: Any) -> None:
        from airflow.providers.smtp.notifications.smtp import SmtpNotifier

        SmtpNotifier(
            to=self.to,
            from_email=self.from_email,
            subject=alert.subject,
            html_content=alert.html,
            smtp_conn_id=self.smtp_conn_id,
            custom_headers={"X-Snowberg-Table": alert.table, "X-Snowberg-Event": alert.event},
        ).notify(context)


class SlackAlertNotifier(SnowbergNotifier):
    """Slack through the Slack provider's ``SlackWebhookNotifier``."""

    channel = "slack"

    def __init__(self, *, slack_webhook_conn_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.slack_webhook_conn_id = slack_webhook_conn_id

    def deliver(self, alert: Alert, context: Any) -> None:
        from airflow.providers.slack.notifications.slack_webhook import SlackWebhookNotifier

        SlackWebhookNotifier(slack_webhook_conn_id=self.slack_webhook_conn_id, text=alert.slack_text).notify(context)


class SnsAlertNotifier(SnowbergNotifier):
    """Amazon SNS through the Amazon provider's ``SnsNotifier``."""

    channel = "sns"

    def __init__(
        self, *, target_arn: str, aws_conn_id: str | None = "aws_default", region_name: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.target_arn = target_arn
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name

    def deliver(self, alert: Alert, context: Any) -> None:
        from airflow.providers.amazon.aws.notifications.sns import SnsNotifier

        attrs = {"table": alert.table, "event": alert.event, "dag_id": alert.dag_id}
        if alert.check:
            attrs["check"] = alert.check
        SnsNotifier(
            aws_conn_id=self.aws_conn_id,
            region_name=self.region_name,
            target_arn=self.target_arn,
            subject=alert.subject,
            message=alert.text,
            message_attributes=attrs,
        ).notify(context)


class WebhookDeliveryError(RuntimeError):
    """A webhook did not take the alert; the message never holds the URL's path (its token)."""


def mask_url(url: str) -> None:
    """Register a webhook URL, and its path, with Airflow's secrets masker (outside a task: no-op)."""
    try:
        from airflow.sdk.log import mask_secret
    except ImportError:  # pragma: no cover - Airflow is a dependency
        return
    mask_secret(url)
    path = url.split("://", 1)[-1].partition("/")[2]
    if len(path) >= 8:
        mask_secret("/" + path)


class WebhookNotifier(SnowbergNotifier):
    """POST the alert as JSON to a webhook.

    ``http_conn_id``: an HTTP connection (host, auth, headers in its extras)
    through the http provider's ``HttpHook``, plus ``endpoint``; or ``url``:
    a plain URL through ``requests``. A non-2xx answer fails the callback
    (Airflow logs it; the other channels still run).

    .. code-block:: python

        EmptyOperator(
            task_id="t",
            on_failure_callback=WebhookNotifier(table="orders", dag_id="snowberg_orders", http_conn_id="ops_webhook"),
        )
    """

    channel = "webhook"

    def __init__(
        self,
        *,
        url: str | None = None,
        http_conn_id: str | None = None,
        endpoint: str = "",
        headers: Mapping[str, str] | None = None,
        timeout: float = 10.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if (url is None) == (http_conn_id is None):
            raise ValueError("give exactly one of url or http_conn_id")
        self.url = url
        if url is not None:
            # The notifier is built when the DAG file is parsed, which the task process does too:
            # from then on the token is masked in everything the task logs.
            mask_url(url)
        self.http_conn_id = http_conn_id
        self.endpoint = endpoint
        self.headers = dict(headers or {})
        self.timeout = timeout

    def deliver(self, alert: Alert, context: Any) -> None:
        payload = alert.payload()
        headers = {"Content-Type": "application/json", "User-Agent": "snowberg-alerts", **self.headers}
        if self.http_conn_id is not None:
            from airflow.providers.http.hooks.http import HttpHook

            hook = HttpHook(method="POST", http_conn_id=self.http_conn_id)
            hook.get_conn()  # resolves the connection's base URL, which may carry a token in its path
            mask_url(hook.url_from_endpoint(self.endpoint))
            try:
                hook.run(
                    endpoint=self.endpoint,
                    json=payload,
                    headers=headers,
                    extra_options={"timeout": self.timeout, "check_response": True},
                )
            except Exception as exc:  # noqa: BLE001 - re-raised without the URL, see below
                raise WebhookDeliveryError(
                    f"webhook connection {self.http_conn_id!r} refused the alert: "
                    f"{type(exc).__name__}: {redact_urls(str(exc))}"
                ) from None
            return
        import requests

        mask_url(str(self.url))
        try:
            resp = requests.post(str(self.url), json=payload, headers=headers, timeout=self.timeout)
            resp.raise_for_status()
        except requests.RequestException as exc:
            # The exception quotes the URL, token and all: raise it without the URL (and without the
            # chained original, which Airflow would print in the traceback).
            status = getattr(getattr(exc, "response", None), "status_code", None)
            raise WebhookDeliveryError(
                f"webhook {redact_urls(str(self.url))} refused the alert"
                + (f" (HTTP {status})" if status else "")
                + f": {type(exc).__name__}: {redact_urls(str(exc))}"
            ) from None


def event_alert(
    event: AlertEvent,
    context: Mapping[str, Any],
    *,
    table: str,
    dag_id: str | None = None,
    lake_table: str | None = None,
    details: Mapping[str, Any] | None = None,
) -> Alert:
    """The alert for an event that does not fail the task (``schema_change``, …), from the running task's context."""
    ti = context.get("ti") or context.get("task_instance")
    dag_run = context.get("dag_run")
    dag_id = dag_id or getattr(context.get("dag"), "dag_id", None) or getattr(ti, "dag_id", None) or "?"
    run_id = context.get("run_id") or getattr(dag_run, "run_id", None) or getattr(ti, "run_id", None)
    logical = context.get("logical_date") or getattr(dag_run, "logical_date", None)
    return Alert(
        event=AlertEvent(event),
        table=table,
        dag_id=dag_id,
        run_id=run_id,
        task_id=getattr(ti, "task_id", None),
        try_number=getattr(ti, "try_number", None),
        logical_date=_iso_or_none(logical),
        check=None,
        lake_table=lake_table,
        observed=None,
        expected=None,
        error=None,
        run_url=run_url(dag_id, run_id),
        task_url=None,
        sent_at=datetime.now(UTC).isoformat(timespec="seconds"),
        details=dict(details or {}),
    )


def send_event(
    event: AlertEvent,
    *,
    table: str,
    lake_table: str | None = None,
    details: Mapping[str, Any] | None = None,
    context: Mapping[str, Any] | None = None,
) -> int:
    """Send an event that does not fail the task to the table's channels; return how many took it.

    The table's notifiers are attached to every task of its DAGs as
    ``on_failure_callback`` (``build_notifiers`` through ``default_args``), so
    the running task already carries them: this finds them on the task of
    the current Airflow context and hands each the alert, which it sends
    when the event is among its ``events``. Library code calls it where it
    finds the event (a schema change inside the load); outside an Airflow
    task (the CLI, tests) there is no context and the event is only logged.
    Delivery errors are logged, never raised: the run that found the event
    must not fail because a channel is down.
    """
    if context is None:
        try:
            from airflow.sdk import get_current_context

            context = get_current_context()
        except Exception:  # noqa: BLE001 - no running task: nothing to deliver to
            log.info("snowberg: %s for %s not sent: not inside an Airflow task", event, table)
            return 0
    task = context.get("task")
    callbacks = getattr(task, "on_failure_callback", None) or []
    notifiers = [
        n
        for n in (callbacks if isinstance(callbacks, list | tuple) else [callbacks])
        if isinstance(n, SnowbergNotifier)
    ]
    if not notifiers:
        return 0
    alert = event_alert(event, context, table=table, dag_id=notifiers[0].dag_id, lake_table=lake_table, details=details)
    sent = 0
    for n in notifiers:
        try:
            n.send(alert, context)
            sent += 1
        except Exception as exc:  # noqa: BLE001 - see the docstring
            log.warning("snowberg: %s alert for %s via %s failed: %s", event, table, n.channel, redact_urls(str(exc)))
    return sent


def send_watch_failure(
    *,
    table: str,
    dag_id: str,
    alerts_config: AlertsConfig | Mapping[str, Any] | None,
    error: str,
    details: Mapping[str, Any],
) -> int:
    """Send a ``watch_failure`` alert for ``table`` through its channels (from the triggerer: no task, no run).

    Returns how many channels took it. Without a channel for the event, the failure is logged as an
    error (the triggerer's log is then where it shows), never dropped. Delivery errors are logged.
    """
    notifiers = [
        n for n in build_notifiers(alerts_config, table=table, dag_id=dag_id) if AlertEvent.WATCH_FAILURE in n.events
    ]
    base = base_url()
    alert = Alert(
        event=AlertEvent.WATCH_FAILURE,
        table=table,
        dag_id=dag_id,
        run_id=None,
        task_id=None,
        try_number=None,
        logical_date=None,
        check=None,
        lake_table=None,
        observed=None,
        expected=None,
        error=(error[:_MAX_ERROR] + "…") if len(error) > _MAX_ERROR else error,
        run_url=f"{base}/dags/{quote(dag_id, safe='')}",
        task_url=None,
        sent_at=datetime.now(UTC).isoformat(timespec="seconds"),
        details=dict(details),
    )
    if not notifiers:
        log.error("snowberg: %s for %s, no alert channel takes it: %s (%s)", alert.title, table, error, dict(details))
        return 0
    sent = 0
    for n in notifiers:
        try:
            n.send(alert, {})
            sent += 1
        except Exception as exc:  # noqa: BLE001 - one channel down must not silence the others
            log.error("snowberg: watch_failure alert for %s via %s failed: %s", table, n.channel, redact_urls(str(exc)))
    return sent


def build_notifiers(
    alerts_config: AlertsConfig | Mapping[str, Any] | None, *, table: str, dag_id: str
) -> list[SnowbergNotifier]:
    """Notifier instances for one table, to use as ``on_failure_callback``.

    ``alerts_config`` is the table's ``AlertsConfig`` (or its dict form, or
    ``None`` for no alerts). ``table`` is the name alerts show (the config's
    ``name``); ``dag_id`` the DAG the links point to.
    """
    if alerts_config is None:
        return []
    cfg = alerts_config if isinstance(alerts_config, AlertsConfig) else AlertsConfig.model_validate(dict(alerts_config))
    common: dict[str, Any] = {"table": table, "dag_id": dag_id, "events": tuple(cfg.events)}
    out: list[SnowbergNotifier] = []
    if cfg.email:
        out.append(
            EmailAlertNotifier(to=list(cfg.email), from_email=cfg.email_from, smtp_conn_id=cfg.email_conn_id, **common)
        )
    if cfg.slack_webhook_conn_id:
        out.append(SlackAlertNotifier(slack_webhook_conn_id=cfg.slack_webhook_conn_id, **common))
    if cfg.sns_topic_arn:
        out.append(
            SnsAlertNotifier(
                target_arn=cfg.sns_topic_arn, aws_conn_id=cfg.aws_conn_id, region_name=cfg.sns_region, **common
            )
        )
    if cfg.webhook_url or cfg.webhook_conn_id:
        out.append(
            WebhookNotifier(
                url=cfg.webhook_url, http_conn_id=cfg.webhook_conn_id, endpoint=cfg.webhook_endpoint, **common
            )
        )
    return out


__all__ = [
    "Alert",
    "AlertEvent",
    "EmailAlertNotifier",
    "SlackAlertNotifier",
    "SnowbergNotifier",
    "SnsAlertNotifier",
    "WebhookNotifier",
    "build_alert",
    "build_notifiers",
    "event_alert",
    "send_event",
    "send_watch_failure",
    "run_url",
]


def _deliver_event(
    event: str, *, table: str, lake_table: str | None = None, details: Mapping[str, Any] | None = None
) -> None:
    send_event(AlertEvent(event), table=table, lake_table=lake_table, details=details)


# Library code (the write path) emits non-failing events through snowberg.core.events;
# importing this module (every snowberg DAG file does) makes them reach the table's channels.
events.subscribe(_deliver_event)
