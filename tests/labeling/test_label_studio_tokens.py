"""Which kind of Label Studio token a key is, read from its JWT claims (signature unchecked)."""

from __future__ import annotations

import base64
import json

import pytest

from camserve.labeling.label_studio_tokens import jwt_claims, token_kind


def segment(document: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(document).encode()).decode().rstrip("=")


def jwt(claims: dict[str, object]) -> str:
    return f"{segment({'alg': 'HS256', 'typ': 'JWT'})}.{segment(claims)}.c2lnbmF0dXJl"


def test_claims_of_a_well_formed_jwt_are_read_without_padding() -> None:
    assert jwt_claims(jwt({"token_type": "refresh", "exp": 123})) == {
        "token_type": "refresh",
        "exp": 123,
    }


@pytest.mark.parametrize(
    "key",
    [
        "0123456789abcdef0123456789abcdef01234567",  # a legacy token
        "a.b.c",  # three segments, none of them JSON
        f"{segment({'typ': 'JWT'})}.{segment({'exp': 1})}.sig",  # a header without "alg"
        f"{segment({'alg': 'HS256'})}.{segment(['not', 'a', 'dict'])}.sig",
    ],
)
def test_anything_else_has_no_claims_and_is_a_legacy_token(key: str) -> None:
    assert jwt_claims(key) is None
    assert token_kind(key) == "legacy"


def test_refresh_and_access_tokens_are_told_apart() -> None:
    assert token_kind(jwt({"token_type": "refresh"})) == "refresh"
    assert token_kind(jwt({"token_type": "access"})) == "access"
    assert token_kind(jwt({})) == "access"
