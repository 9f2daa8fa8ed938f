"""Snowflake external volumes: ``SYSTEM$VERIFY_EXTERNAL_VOLUME`` parsed step by step.

The function returns one JSON object (documented in Snowflake's SQL reference)::

    {"success": false, "storageLocationSelectionResult": "PASSED", "storageLocationName": "my-s3-us-west-2",
     "servicePrincipalProperties": "STORAGE_AWS_IAM_USER_ARN: arn:aws:iam::…:user/…; STORAGE_AWS_EXTERNAL_ID: …",
     "location": "s3://bucket/", "storageAccount": null, "region": "us-west-2",
     "writeResult": "FAILED with exception message User: … is not authorized to perform: s3:PutObject …",
     "readResult": "SKIPPED", "listResult": "SKIPPED", "deleteResult": "SKIPPED",
     "awsRoleArnValidationResult": "PASSED", "azureGetUserDelegationKeyResult": "SKIPPED"}

Each ``…Result`` is ``PASSED``, ``SKIPPED`` or an error text. ``parse_verification``
turns it into ``Step`` objects, and ``diagnose`` names the failing step and
the likely cause, using ``DESC EXTERNAL VOLUME`` (``parse_describe``) when it
is available for the principal, external id and ``ALLOW_WRITES``.

Nothing here talks to Snowflake: ``verify_external_volume`` takes an open
DB-API connection, so the parser is tested on outputs written from Snowflake's
documentation (the emulator has no such function; the live lane runs the real one).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from snowberg.core.identifiers import quote_identifier, validate_identifier

PASSED, SKIPPED, FAILED = "PASSED", "SKIPPED", "FAILED"

# Known steps in the order Snowflake performs them, with a short label.
STEPS: tuple[tuple[str, str], ...] = (
    ("storageLocationSelectionResult", "storage location selection"),
    ("awsRoleArnValidationResult", "AWS role ARN validation"),
    ("azureGetUserDelegationKeyResult", "Azure user delegation key"),
    ("writeResult", "write"),
    ("readResult", "read"),
    ("listResult", "list"),
    ("deleteResult", "delete"),
)
WRITE_STEPS = ("writeResult", "readResult", "listResult", "deleteResult")
_S3_ACTION_FOR_STEP = {
    "writeResult": "s3:PutObject",
    "readResult": "s3:GetObject",
    "listResult": "s3:ListBucket",
    "deleteResult": "s3:DeleteObject",
}
_FAILED_PREFIX = re.compile(r"^\s*FAILED\s+with\s+exception\s+message\s*:?\s*", re.IGNORECASE)


class VerificationParseError(ValueError):
    """The text is not a SYSTEM$VERIFY_EXTERNAL_VOLUME result."""


@dataclass(frozen=True, kw_only=True)
class Step:
    key: str  # the JSON key, e.g. "writeResult"
    label: str  # e.g. "write"
    status: str  # PASSED | SKIPPED | FAILED
    message: str | None = None  # the error text for FAILED
    cause: str | None = None  # the likely cause, filled by diagnose()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class VolumeDescription:
    """What ``DESC EXTERNAL VOLUME`` says (the parts a diagnosis needs)."""

    name: str
    allow_writes: bool | None = None
    active_location: str | None = None
    locations: list[dict[str, Any]] = field(default_factory=list)

    def location(self, name: str | None) -> dict[str, Any]:
        for loc in self.locations:
            if name is not None and str(loc.get("NAME", "")).lower() == name.lower():
                return loc
        if self.active_location:
            for loc in self.locations:
                if str(loc.get("NAME", "")).lower() == self.active_location.lower():
                    return loc
        return self.locations[0] if len(self.locations) == 1 else {}


@dataclass(frozen=True, kw_only=True)
class VolumeVerification:
    volume: str
    success: bool
    steps: list[Step]
    storage_location: str | None
    location: str | None
    region: str | None
    storage_account: str | None
    principal: dict[str, str]
    raw: dict[str, Any]

    @property
    def provider(self) -> str | None:
        loc = (self.location or "").lower()
        for prefix, name in (("s3", "S3"), ("azure", "AZURE"), ("gcs", "GCS")):
            if loc.startswith(prefix):
                return name
        if any(k.startswith("STORAGE_AWS") for k in self.principal):
            return "S3"
        if any(k.startswith("AZURE") for k in self.principal):
            return "AZURE"
        if any(k.startswith("STORAGE_GCP") for k in self.principal):
            return "GCS"
        return None

    def step(self, key: str) -> Step | None:
        return next((s for s in self.steps if s.key == key), None)

    @property
    def failed(self) -> list[Step]:
        return [s for s in self.steps if s.status == FAILED]

    @property
    def writes_skipped(self) -> bool:
        w = self.step("writeResult")
        return w is not None and w.status == SKIPPED

    def ok(self, *, require_writes: bool = True) -> bool:
        if not self.success or self.failed:
            return False
        return not (require_writes and self.writes_skipped)

    def to_dict(self) -> dict[str, Any]:
        return {
            "volume": self.volume,
            "success": self.success,
            "storage_location": self.storage_location,
            "location": self.location,
            "region": self.region,
            "storage_account": self.storage_account,
            "provider": self.provider,
            "principal": dict(self.principal),
            "steps": [s.to_dict() for s in self.steps],
        }


def _status(value: Any) -> tuple[str, str | None]:
    if value is True:
        return PASSED, None
    if value is False:
        return FAILED, "returned FALSE"
    text = str(value).strip()
    upper = text.upper()
    if upper in ("PASSED", "TRUE", "SUCCESS", "SUCCEEDED"):
        return PASSED, None
    if upper in ("SKIPPED", "UNVERIFIED", "NOT_APPLICABLE"):
        return SKIPPED, None
    if upper in ("FALSE", "FAILED"):
        return FAILED, f"returned {upper}"
    return FAILED, _FAILED_PREFIX.sub("", text) or text


def parse_principal(text: Any) -> dict[str, str]:
    """``"STORAGE_AWS_IAM_USER_ARN: arn…; STORAGE_AWS_EXTERNAL_ID: abc="`` → dict."""
    if isinstance(text, dict):
        return {str(k): str(v) for k, v in text.items()}
    out: dict[str, str] = {}
    if not text:
        return out
    for part in re.split(r";\s*(?=[A-Z][A-Z0-9_]+\s*:)", str(text)):
        key, sep, value = part.partition(":")
        if sep and re.match(r"^\s*[A-Z][A-Z0-9_]+\s*$", key):
            out[key.strip()] = value.strip().rstrip(";").strip()
    return out


def parse_verification(text: str | dict[str, Any], volume: str = "?") -> VolumeVerification:
    """Parse the function's output (the JSON text, or an already-decoded dict)."""
    if isinstance(text, dict):
        raw = text
    else:
        try:
            raw = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise VerificationParseError(
                f"SYSTEM$VERIFY_EXTERNAL_VOLUME({volume!r}) did not return JSON: {str(text)[:300]!r}"
            ) from exc
    if not isinstance(raw, dict) or "success" not in raw:
        raise VerificationParseError(
            f"SYSTEM$VERIFY_EXTERNAL_VOLUME({volume!r}) returned no 'success' property: {str(text)[:300]!r}"
        )
    success_raw = raw.get("success")
    success = success_raw is True or str(success_raw).strip().lower() == "true"
    steps: list[Step] = []
    known = {k for k, _ in STEPS}
    for key, label in STEPS:
        if key in raw and raw[key] is not None:
            status, message = _status(raw[key])
            steps.append(Step(key=key, label=label, status=status, message=message))
    # Steps a newer Snowflake release may add: kept, in the order they came.
    for key, value in raw.items():
        if key.endswith("Result") and key not in known and value is not None:
            status, message = _status(value)
            label = re.sub(r"(?<!^)(?=[A-Z])", " ", key[: -len("Result")]).lower()
            steps.append(Step(key=key, label=label, status=status, message=message))
    return VolumeVerification(
        volume=volume,
        success=success,
        steps=steps,
        storage_location=raw.get("storageLocationName"),
        location=raw.get("location"),
        region=raw.get("region"),
        storage_account=raw.get("storageAccount"),
        principal=parse_principal(raw.get("servicePrincipalProperties")),
        raw=raw,
    )


def _truthy(v: Any) -> bool | None:
    if v is None or v == "":
        return None
    if isinstance(v, bool):
        return v
    return str(v).strip().lower() in ("true", "1", "yes", "y")


def parse_describe(rows: list[Any], name: str = "?") -> VolumeDescription:
    """Parse ``DESC EXTERNAL VOLUME`` rows.

    Rows are dicts (a DictCursor) or tuples in Snowflake's column order:
    ``parent_property, property, property_type, property_value, property_default``.
    ``STORAGE_LOCATION_<n>`` values are JSON objects.
    """
    allow_writes: bool | None = None
    active: str | None = None
    locations: list[dict[str, Any]] = []
    for row in rows:
        if isinstance(row, dict):
            r = {str(k).lower(): v for k, v in row.items()}
            prop, value = r.get("property"), r.get("property_value")
        else:
            prop, value = row[1], row[3]
        prop = str(prop or "").upper()
        if prop == "ALLOW_WRITES":
            allow_writes = _truthy(value)
        elif prop == "ACTIVE":
            active = str(value) if value else None
        elif prop.startswith("STORAGE_LOCATION_"):
            try:
                loc = json.loads(value) if isinstance(value, str) else dict(value or {})
            except ValueError:
                continue
            if isinstance(loc, dict):
                locations.append(loc)
    return VolumeDescription(name=name, allow_writes=allow_writes, active_location=active, locations=locations)


_DENIED = re.compile(r"not authorized|accessdenied|access denied|forbidden|status code: 403|permission", re.I)
_ACTION = re.compile(r"perform:\s*([a-z0-9]+:[A-Za-z0-9*]+)", re.I)
_RESOURCE = re.compile(r"on resource:\s*\\?\"?([^\s\"\\]+)", re.I)


def _cause(step: Step, v: VolumeVerification, desc: VolumeDescription | None) -> str | None:
    msg = step.message or ""
    low = msg.lower()
    loc = desc.location(v.storage_location) if desc else {}
    user_arn = v.principal.get("STORAGE_AWS_IAM_USER_ARN") or loc.get("STORAGE_AWS_IAM_USER_ARN")
    ext_id = v.principal.get("STORAGE_AWS_EXTERNAL_ID") or loc.get("STORAGE_AWS_EXTERNAL_ID")
    role_arn = loc.get("STORAGE_AWS_ROLE_ARN")
    where = v.location or loc.get("STORAGE_BASE_URL") or "the storage location"
    vol = v.volume

    if step.key == "storageLocationSelectionResult":
        return (
            "Snowflake could not select an active storage location for the volume: a volume's storage "
            "locations must be in the same cloud and region as the Snowflake account; check the "
            f"STORAGE_LOCATIONS of DESC EXTERNAL VOLUME {vol}."
        )
    if "sts is not activated" in low:
        return (
            "AWS STS is not activated in the Snowflake deployment's region for the AWS account of the role: "
            "activate that region's STS endpoint in the IAM console (Account settings)."
        )
    if "assumerole" in low or "assuming aws_role" in low or step.key == "awsRoleArnValidationResult":
        role = role_arn or _first_match(r"on resource:\s*(arn:aws[\w-]*:iam::\d+:role/[^\s\"\\(]+)", msg)
        return (
            f"Snowflake cannot assume the IAM role{(' ' + role) if role else ''}: its trust policy must allow "
            f'sts:AssumeRole for Principal {{"AWS": "{user_arn or "<STORAGE_AWS_IAM_USER_ARN>"}"}} with '
            f'Condition StringEquals sts:ExternalId = "{ext_id or "<STORAGE_AWS_EXTERNAL_ID>"}" '
            f"(both from DESC EXTERNAL VOLUME {vol}; they change when the volume is re-created)."
        )
    if "kms" in low:
        return (
            "the bucket is encrypted with a KMS key whose key policy (or the role's policy) does not allow "
            "kms:Decrypt / kms:Encrypt / kms:GenerateDataKey for the volume's role."
        )
    if "explicit deny" in low:
        action = _first_match(_ACTION, msg) or _S3_ACTION_FOR_STEP.get(step.key, "the action")
        return (
            f"an explicit Deny blocks {action} on {where}: look at the bucket policy, service control "
            "policies and the role's permission boundary."
        )
    if "nosuchbucket" in low or "bucket does not exist" in low:
        return f"the bucket in STORAGE_BASE_URL ({where}) does not exist, or is misspelled."
    if "permanentredirect" in low or "wrong region" in low or "authorizationheadermalformed" in low:
        return (
            f"the bucket is not in the region Snowflake expects ({v.region}): "
            "storage locations must be in the account's region."
        )
    if "authorizationpermissionmismatch" in low or ("azure" in (v.provider or "").lower() and _DENIED.search(msg)):
        app = v.principal.get("AZURE_MULTI_TENANT_APP_NAME", "Snowflake's multi-tenant app")
        consent = v.principal.get("AZURE_CONSENT_URL")
        return (
            f"the Azure service principal {app} lacks the Storage Blob Data Contributor role on the "
            f"container{('; grant consent at ' + consent) if consent else ''}."
        )
    if "storage.objects" in low or "storage.buckets" in low:
        sa = v.principal.get("STORAGE_GCP_SERVICE_ACCOUNT", "Snowflake's service account")
        return f"the GCS service account {sa} needs Storage Object Admin (or create/get/list/delete) on the bucket."
    if _DENIED.search(msg):
        denied_action = _first_match(_ACTION, msg) or _S3_ACTION_FOR_STEP.get(step.key)
        resource = _first_match(_RESOURCE, msg)
        extra = ""
        if step.key == "listResult":
            extra = " (a Condition on s3:prefix must match the volume's path)"
        return (
            f"the role's identity policy does not allow {denied_action or 'this operation'} on "
            f"{resource or where}{extra}; add it to the policy attached to the volume's role."
        )
    if step.message:
        return None
    return None


def _first_match(pattern: str | re.Pattern[str], text: str) -> str | None:
    m = re.search(pattern, text)
    return m.group(1) if m else None


@dataclass(frozen=True, kw_only=True)
class Diagnosis:
    verification: VolumeVerification
    description: VolumeDescription | None
    steps: list[Step]
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        d = self.verification.to_dict()
        d["steps"] = [s.to_dict() for s in self.steps]
        d["problems"] = list(self.problems)
        d["ok"] = self.ok
        if self.description is not None:
            d["allow_writes"] = self.description.allow_writes
        return d


def diagnose(v: VolumeVerification, desc: VolumeDescription | None = None, *, require_writes: bool = True) -> Diagnosis:
    """Name each failing step and its likely cause."""
    steps = [
        Step(key=s.key, label=s.label, status=s.status, message=s.message, cause=_cause(s, v, desc))
        if s.status == FAILED
        else s
        for s in v.steps
    ]
    problems: list[str] = []
    for s in steps:
        if s.status == FAILED:
            line = f"{s.label} step ({s.key}) failed: {s.message}"
            if s.cause:
                line += f"\n    likely cause: {s.cause}"
            problems.append(line)
    if require_writes and v.writes_skipped:
        read_only = desc is not None and desc.allow_writes is False
        problems.append(
            "write step (writeResult) was SKIPPED: "
            + (
                "the volume is read-only (DESC shows ALLOW_WRITES = FALSE)"
                if read_only
                else "the volume is probably read-only (ALLOW_WRITES = FALSE)"
            )
            + ". Writers need it: ALTER EXTERNAL VOLUME "
            f"{quote_identifier(v.volume) if _valid(v.volume) else v.volume} "
            "SET ALLOW_WRITES = TRUE"
        )
    if not v.success and not problems:
        problems.append("success is false, but no step reported an error (see the raw result)")
    return Diagnosis(verification=v, description=desc, steps=steps, problems=problems)


def _valid(name: str) -> bool:
    try:
        validate_identifier(name)
    except ValueError:
        return False
    return True


def render(d: Diagnosis) -> str:
    """A readable report for the task log."""
    v = d.verification
    lines = [
        f"external volume {v.volume}: {'OK' if d.ok else 'FAILED'}",
        f"  storage location: {v.storage_location or '?'}  {v.location or ''}  region={v.region or '?'}",
    ]
    for k, val in v.principal.items():
        lines.append(f"  {k}: {val}")
    if d.description is not None and d.description.allow_writes is not None:
        lines.append(f"  ALLOW_WRITES: {str(d.description.allow_writes).upper()}")
    width = max((len(s.label) for s in d.steps), default=5)
    for s in d.steps:
        text = s.status if s.status != FAILED else f"FAILED: {s.message}"
        lines.append(f"  {s.label.ljust(width)}  {text}")
        if s.cause:
            lines.append(f"  {''.ljust(width)}  likely cause: {s.cause}")
    for p in d.problems:
        if "SKIPPED" in p:
            lines.append(f"  ! {p}")
    return "\n".join(lines)


def verify_external_volume(
    conn: Any, volume: str, *, describe: bool = True
) -> tuple[VolumeVerification, VolumeDescription | None]:
    """Run the function (the name is a bound value) and, if asked, DESC the volume.

    ``DESC EXTERNAL VOLUME`` needs OWNERSHIP or USAGE; when it fails the
    diagnosis goes on with what the verification itself returned.
    """
    validate_identifier(volume, "external volume")
    cur = conn.cursor()
    try:
        cur.execute("SELECT SYSTEM$VERIFY_EXTERNAL_VOLUME(%(volume)s)", {"volume": volume})
        row = cur.fetchone()
        if not row:
            raise VerificationParseError(f"SYSTEM$VERIFY_EXTERNAL_VOLUME({volume!r}) returned no row")
        value = row[0] if not isinstance(row, dict) else next(iter(row.values()))
        verification = parse_verification(value, volume)
        desc: VolumeDescription | None = None
        if describe:
            try:
                cur.execute(f"DESC EXTERNAL VOLUME {quote_identifier(volume, 'external volume')}")
                desc = parse_describe(list(cur.fetchall()), volume)
            except Exception:  # noqa: BLE001 - the description only enriches the diagnosis
                desc = None
        return verification, desc
    finally:
        cur.close()
