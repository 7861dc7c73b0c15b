"""A V2 inference request's ``parameters`` read as ``/v1/explain``'s query parameters: the same
``ExplainParams``, so the same checks, limits and errors (422 ``invalid_parameter``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from pydantic import ValidationError

from camserve.api.schemas import ExplainParams
from camserve.api.unknown_parameters import unknown_parameters_message
from camserve.api.v2_requests import boolean_parameter
from camserve.api.v2_schemas import Parameter
from camserve.engine.errors import ExplanationError

__all__ = ["BINARY_OUTPUT", "PARAMETERS", "SCHEDULING_HINTS", "RequestOptions", "request_options"]

BINARY_OUTPUT = "binary_data_output"
"""The binary tensor data extension's request parameter: every output in binary unless the
output's own ``binary_data`` says otherwise (Triton's client sends it when it names no output)."""
SCHEDULING_HINTS = frozenset({"priority", "timeout"})
"""Triton's client's hints to its scheduler: taken and not used (camserve's queue and
``CAMSERVE_REQUEST_TIMEOUT_S`` apply)."""
NOT_TAKEN = frozenset({"model", "include", "threshold", "regions"})
"""``/v1/explain``'s parameters that a V2 request does not take: the path names the model, and
the request's outputs say what comes back."""
PARAMETERS = tuple(name for name in ExplainParams.model_fields if name not in NOT_TAKEN)
TEXT_PARAMETERS = frozenset(
    name
    for name, field in ExplainParams.model_fields.items()
    if field.annotation is str or str in get_args(field.annotation)
)
"""Parameters that take text, where a number is read as its text (``"target": 3``)."""


@dataclass(frozen=True)
class RequestOptions:
    params: ExplainParams
    """With ``model`` set to the path's model."""
    binary_outputs: bool


def request_options(parameters: dict[str, Parameter], model: str) -> RequestOptions:
    """The request's options, or the 422 ``/v1/explain`` gives for the same values."""
    given = {
        name: value
        for name, value in parameters.items()
        if name not in SCHEDULING_HINTS and name != BINARY_OUTPUT
    }
    unknown = [name for name in given if name not in PARAMETERS]
    if unknown:
        raise ExplanationError(unknown_parameters_message(unknown, PARAMETERS))
    values = {
        name: _as_text(value) if name in TEXT_PARAMETERS else value for name, value in given.items()
    }
    try:
        params = ExplainParams.model_validate({**values, "model": model})
    except ValidationError as error:
        raise ExplanationError(_problems(error)) from error
    binary = boolean_parameter(BINARY_OUTPUT, parameters.get(BINARY_OUTPUT, False))
    return RequestOptions(params, binary)


def _as_text(value: Parameter) -> Parameter:
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


def _problems(error: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(part) for part in issue['loc'])}: {issue['msg']}"
        if issue["loc"]
        else issue["msg"]
        for issue in error.errors()
    )
