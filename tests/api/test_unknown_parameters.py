"""Tests for camserve.api.unknown_parameters: the message for query parameters a route does not
take."""

from __future__ import annotations

from camserve.api.unknown_parameters import is_unknown_query_parameter, unknown_parameters_message

KNOWN = ["model", "method", "layer", "alpha"]


def test_a_close_name_is_suggested_and_every_name_listed() -> None:
    assert unknown_parameters_message(["metod"], KNOWN) == (
        "unknown parameter 'metod'; did you mean 'method'? "
        "The parameters are: model, method, layer, alpha"
    )


def test_a_name_like_no_parameter_gets_no_suggestion() -> None:
    assert unknown_parameters_message(["colour"], KNOWN) == (
        "unknown parameter 'colour'. The parameters are: model, method, layer, alpha"
    )


def test_only_extra_query_parameters_count() -> None:
    assert is_unknown_query_parameter({"type": "extra_forbidden", "loc": ("query", "metod")})
    assert not is_unknown_query_parameter({"type": "extra_forbidden", "loc": ("body", "x")})
    assert not is_unknown_query_parameter({"type": "missing", "loc": ("query", "model")})
    assert not is_unknown_query_parameter(
        {"type": "extra_forbidden", "loc": ("body", "instances", 0, "imagee")}
    )
