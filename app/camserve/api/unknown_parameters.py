"""A 422 for query parameters a route does not take, naming the ones it does.

Pydantic's own message for a misspelt parameter ("metod: Extra inputs are not permitted") says
neither what was meant nor what exists; this one does both: "unknown parameter 'metod'; did you
mean 'method'? The parameters are: model, method, ...".
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from fastapi import Request
from fastapi.routing import APIRoute
from pydantic import BaseModel

__all__ = ["is_unknown_query_parameter", "route_query_parameters", "unknown_parameters_message"]


def is_unknown_query_parameter(issue: dict[str, object]) -> bool:
    """Whether a validation issue is a query parameter that no field of the route accepts."""
    location = issue.get("loc")
    return (
        issue.get("type") == "extra_forbidden"
        and isinstance(location, tuple)
        and len(location) == 2
        and location[0] == "query"
    )


def route_query_parameters(request: Request) -> list[str]:
    """The query parameters the matched route takes, in the order they are declared."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return []
    names: list[str] = []
    for parameter in route.dependant.query_params:
        declared = parameter.field_info.annotation
        if isinstance(declared, type) and issubclass(declared, BaseModel):
            names.extend(field.alias or name for name, field in declared.model_fields.items())
        else:
            names.append(parameter.alias)
    return names


def unknown_parameters_message(unknown: Sequence[str], known: Sequence[str]) -> str:
    """One clause per unknown name, with the closest known one, then the known names once."""
    clauses = [_unknown_parameter_clause(name, known) for name in unknown]
    listing = f"The parameters are: {', '.join(known)}" if known else ""
    return " ".join([*clauses, listing]).strip()


def _unknown_parameter_clause(name: str, known: Sequence[str]) -> str:
    closest = difflib.get_close_matches(name, known, n=1)
    suggestion = f"; did you mean {closest[0]!r}?" if closest else "."
    return f"unknown parameter {name!r}{suggestion}"
