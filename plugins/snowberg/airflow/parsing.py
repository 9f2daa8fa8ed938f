"""Which DAG a process parses the DAG files for: every DAG (the dag-processor) or one (a task).

Airflow parses a DAG file again in every task process, with the task's DAG id
in ``airflow.sdk.get_parsing_context()``. The DAG builders read it here and
build only that DAG's table or sync, so a task's cost does not grow with the
number of configured tables (docs/performance.md).
"""

from __future__ import annotations

import json
from typing import Any

from airflow.sdk import DAG, Param
from airflow.sdk.definitions.param import ParamsDict
from airflow.sdk.exceptions import ParamValidationError


def parsing_dag_id() -> str | None:
    """The DAG id a task process parses the file for; None in the dag-processor and outside Airflow."""
    from airflow.sdk import get_parsing_context

    return get_parsing_context().dag_id


# The JSON Schema draft of every trigger-form Param (see ``form_param``).
PARAM_SCHEMA_DRAFT = "http://json-schema.org/draft-07/schema#"


def form_param(default: Any, **schema: Any) -> Param:
    """A trigger-form ``Param`` whose schema names its JSON Schema draft (draft 7).

    Airflow validates every Param of a scheduled DAG when the DAG is built,
    and jsonschema first checks the schema against its draft's meta-schema.
    Without ``$schema`` that is draft 2020-12's, seven vocabulary documents
    joined by reference: checking it was the largest single cost of parsing
    a thousand tables (docs/performance.md). Draft 7's meta-schema is one
    document, and the keywords the forms use (type, format, pattern,
    maxLength, enum, title, description) mean the same in both drafts.
    """
    return Param(default, **{"$schema": PARAM_SCHEMA_DRAFT, **schema})


def attach_form(dag: DAG, params: dict[str, Param]) -> DAG:
    """Give ``dag`` its trigger form once its tasks exist; returns ``dag``.

    Airflow copies a DAG's Params into each task created inside it, a deep copy
    at every ``__init__`` level of the operator's classes: for a thousand
    tables that copying was the largest single cost of a parse
    (docs/performance.md). A task never needs its own copy: at run time
    Airflow merges the DAG's Params first and then the task's own
    (``airflow.sdk.definitions.param.process_params``), and the trigger form
    and the serialized DAG are the DAG's.

    A scheduled DAG's Param defaults must be valid: Airflow checks that when
    ``params`` is assigned (``DAG._validate_params``), one JSON Schema
    validation per Param per DAG, each first checking the schema against its
    meta-schema. Every table's form holds the same few Params, so that check
    was the largest cost left in a thousand-table parse. Here each distinct
    Param (schema and default) is validated once per process, with Airflow's
    own ``Param.resolve`` and the same error, and the ``ParamsDict`` is then
    set as Airflow's converter sets it (``object.__setattr__``).
    """
    if dag.timetable.can_be_scheduled:
        for name, param in params.items():
            try:
                _check_default(param)
            except ParamValidationError as exc:
                raise ValueError(
                    f"Dag {dag.dag_id!r} is not allowed to define a Schedule, as there are required params without "
                    f"default values, or the default values are not valid (param {name!r}: {exc})."
                ) from exc
    object.__setattr__(dag, "params", ParamsDict(params))
    return dag


# The Params whose default this process has validated: (schema, default) as JSON.
_VALID_DEFAULTS: set[tuple[str, str]] = set()


def _check_default(param: Param) -> None:
    """``param.resolve()`` (raises ``ParamValidationError``), once per distinct schema and default."""
    try:
        key = (json.dumps(param.schema, sort_keys=True), json.dumps(param.value, sort_keys=True))
    except (TypeError, ValueError):  # a default JSON cannot hold (NOTSET, an object): no cache, Airflow's check
        param.resolve()
        return
    if key not in _VALID_DEFAULTS:
        param.resolve()
        _VALID_DEFAULTS.add(key)
