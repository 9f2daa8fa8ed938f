"""Table settings as operator arguments: one rule, one place.

The operators that load, capture, check or maintain a configured table take
the settings their code path reads as explicit, documented keyword arguments,
each named after its key in the table config (``table_name`` for ``name``, as
the check operators call it)::

    SnowbergLoadOperator(
        task_id="load",
        table_name="orders",
        source={"table": "SHOP.PUBLIC.ORDERS"},
        target="shop.orders",
        cursor={"column": "updated_at"},
        primary_key=["id"],
        window=plan.output,
    )

So an operator's signature is the list of settings it depends on, and
``operator_arguments`` derives a table's arguments for an operator from that
signature: the DAG factory writes no field list of its own.

``TableSettings`` is the operators' side: it validates the arguments at
construction (DAG parse: pydantic only, no I/O; a bad value fails there,
naming the argument), keeps them as JSON so the operator serializes, and
builds the ``TableConfig`` the library calls take, by keyword, in
``execute()``. ``TableConfig`` needs ``name``, ``source`` and ``target``, so
every such operator takes those three: they name the table in logs, query
tags and lineage.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from snowberg.config.table_config import TableConfig

Settings = Mapping[str, Any]
"""A nested setting given as the dict the YAML would hold (``{"column": "updated_at"}`` for a ``Cursor``)."""

TABLE_NAME = "table_name"
"""The operator argument that carries the table config's ``name`` (``name`` alone would read as the task's)."""


def _field(parameter: str) -> str:
    return "name" if parameter == TABLE_NAME else parameter


_PARAMETERS: dict[type, dict[str, str]] = {}


def config_parameters(operator: type) -> dict[str, str]:
    """``operator``'s keyword arguments that are table settings, each mapped to its ``TableConfig`` field.

    Read from the keyword-only parameters of the ``__init__`` of each snowberg
    class in its MRO (Airflow's own ``BaseOperator`` arguments, such as
    ``retries`` or ``owner``, are not table settings even where a field shares
    the name). Computed once per class.
    """
    known = _PARAMETERS.get(operator)
    if known is not None:
        return known
    out: dict[str, str] = {}
    for cls in operator.__mro__:
        # Airflow's metaclass wraps each operator class's __init__, inherited ones too: look behind the wrapper.
        init = inspect.unwrap(vars(cls).get("__init__", object.__init__))
        if not getattr(init, "__module__", "").startswith("snowberg."):
            continue
        for p in inspect.signature(init).parameters.values():
            if p.kind is inspect.Parameter.KEYWORD_ONLY and _field(p.name) in TableConfig.model_fields:
                out.setdefault(p.name, _field(p.name))
    _PARAMETERS[operator] = out
    return out


def operator_arguments(operator: type, cfg: TableConfig) -> dict[str, Any]:
    """The keyword arguments ``operator`` takes from table ``cfg`` (JSON values; the DAG factory's one translation)."""
    params = config_parameters(operator)
    values = cfg.model_dump(mode="json", include=set(params.values()))
    return {p: values[f] for p, f in params.items()}


def describe_error(exc: ValidationError) -> str:
    """A validation error of a ``TableConfig`` built from arguments, worded with the arguments' names."""
    parts = []
    for e in exc.errors():
        loc = [str(x) for x in e["loc"]]
        if loc:
            loc[0] = TABLE_NAME if loc[0] == "name" else loc[0]
        where = ".".join(loc)
        parts.append(f"{where}: {e['msg']}" if where else str(e["msg"]))
    return "; ".join(parts)


class TableSettings:
    """Mixin of the operators whose arguments are table settings (see the module doc).

    Each subclass sets its arguments as attributes of the same name in
    ``__init__`` and calls ``check_table_settings()`` last.
    """

    task_id: str
    template_fields: Any

    def build_config(self, *, skip: frozenset[str] = frozenset()) -> TableConfig:
        """The ``TableConfig`` of this operator's arguments, by keyword (what it does not take keeps its default)."""
        return TableConfig(**{f: getattr(self, p) for p, f in config_parameters(type(self)).items() if p not in skip})

    def check_table_settings(self) -> None:
        """Validate the arguments now (DAG parse) and keep them as JSON, so the operator serializes.

        A templated argument (``"{{ ... }}"``, e.g. the catalog) is validated
        once rendered, when ``execute()`` builds the config.
        """
        params = config_parameters(type(self))
        templated = frozenset(p for p in params if p in self.template_fields and "{{" in str(getattr(self, p) or ""))
        try:
            try:
                arguments = json.dumps({p: getattr(self, p) for p in params if p not in templated}, sort_keys=True)
            except (TypeError, ValueError):  # a value JSON cannot hold (a model, a date): validated on its own
                cfg = self.build_config(skip=templated)
                values = cfg.model_dump(mode="json", include=set(params.values()))
            else:
                values = json.loads(_validated_arguments(arguments))
        except ValidationError as exc:
            raise ValueError(
                f"{type(self).__name__} {self.task_id!r}: invalid argument(s): {describe_error(exc)}"
            ) from None
        for p, f in params.items():
            if p not in templated:
                setattr(self, p, values[f])


@functools.lru_cache(maxsize=4096)
def _validated_arguments(arguments: str) -> str:
    """The JSON values of a table's arguments (given as JSON) after validation, once per distinct set.

    A table's tasks pass the same settings, and each task validating them again
    through the whole ``TableConfig`` was a large part of parsing many tables
    (docs/performance.md). A failure is not cached: each operator raises it.
    """
    given = {_field(p): v for p, v in json.loads(arguments).items()}
    return json.dumps(TableConfig(**given).model_dump(mode="json", include=set(given)))


__all__ = ["TABLE_NAME", "Settings", "TableSettings", "config_parameters", "describe_error", "operator_arguments"]
