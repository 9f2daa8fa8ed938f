"""The Snowflake session every snowberg connection gets, whatever the Airflow connection says.

Results must not depend on a user's session defaults: the session time zone
decides how TIMESTAMP_LTZ values and ``CURRENT_TIMESTAMP`` read, the timestamp
mapping what an untyped timestamp literal becomes, the output formats how
GEOGRAPHY/GEOMETRY values are rendered. Kept apart from the hook so that code
connecting without Airflow (the CLI, tests, benchmarks) pins the same session.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from snowberg.config.table_config import TableConfig

PINNED_SESSION = {
    "TIMEZONE": "UTC",
    "TIMESTAMP_TYPE_MAPPING": "TIMESTAMP_NTZ",
    "WEEK_START": 0,
}


def session_parameters(cfg: TableConfig | None, existing: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The connection's own session parameters with snowberg's pinned ones (and the table's query tag) over them."""
    params = dict(existing or {})
    params.update(PINNED_SESSION)
    fmt = "WKT" if cfg is not None and cfg.geo_format == "wkt" else "GeoJSON"
    params["GEOGRAPHY_OUTPUT_FORMAT"] = fmt
    params["GEOMETRY_OUTPUT_FORMAT"] = fmt
    if cfg is not None:
        params["QUERY_TAG"] = f"snowberg:{cfg.name}"
    return params
