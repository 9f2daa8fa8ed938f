"""Lake refusals in any operator's ``execute`` become errors that name the Airflow connection.

The load operators wrap their lake work in ``lake_errors`` by hand, around the
part that touches the lake. Maintenance, checks, mapped slices and the native
sync touch the lake from their first line to their last, so the whole
``execute`` is the block: ``@names_lake_connection("catalog")`` on it turns a
wrong key, an unreachable endpoint, a missing bucket or a catalog's 5xx into a
``LakeAccessError`` naming the connection in attribute ``catalog`` and what to
check (no secret), and lets everything else (a bug, a skip, a check failure)
through unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

R = TypeVar("R")


def names_lake_connection(attribute: str) -> Callable[[Callable[[Any, Any], R]], Callable[[Any, Any], R]]:
    """Decorate ``execute(self, context)``: lake errors name the connection in ``self.<attribute>``."""

    def decorate(execute: Callable[[Any, Any], R]) -> Callable[[Any, Any], R]:
        @functools.wraps(execute)
        def wrapped(self: Any, context: Any) -> R:
            from snowberg.iceberg.catalogs import lake_errors

            with lake_errors(str(getattr(self, attribute))):
                return execute(self, context)

        return wrapped

    return decorate
