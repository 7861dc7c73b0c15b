"""Settings: environment variables, comma lists, overrides and fail-fast validation."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from camserve.config import load_settings
from camserve.engine.models.shipped import SHIPPED_MODELS_DIR
from camserve.serving.callers import KeyRing


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir("/")  # no .env file here, and no models folder: the shipped models
    settings = load_settings()
    assert settings.host == "127.0.0.1"
    assert settings.port == 8000
    assert settings.models_dir == SHIPPED_MODELS_DIR
    assert settings.max_batch_size == 8
    assert settings.api_key is None
    assert settings.models == []
    assert settings.allow_downloads is True  # as before the setting existed


@pytest.mark.parametrize(("value", "allowed"), [("false", False), ("0", False), ("true", True)])
def test_downloads_can_be_turned_off(
    monkeypatch: pytest.MonkeyPatch, value: str, allowed: bool
) -> None:
    monkeypatch.setenv("CAMSERVE_ALLOW_DOWNLOADS", value)
    assert load_settings().allow_downloads is allowed


def test_environment_and_comma_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAMSERVE_PORT", "9001")
    monkeypatch.setenv("CAMSERVE_MODELS", "a, b ,c")
    monkeypatch.setenv("CAMSERVE_CORS_ORIGINS", "http://x.test,http://y.test")
    monkeypatch.setenv("CAMSERVE_API_KEY", "s3cret")
    settings = load_settings()
    assert settings.port == 9001
    assert settings.models == ["a", "b", "c"]
    assert settings.cors_origins == ["http://x.test", "http://y.test"]
    assert settings.api_key is not None
    assert settings.api_key.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(settings)


def test_overrides_win_and_none_means_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAMSERVE_PORT", "9001")
    assert load_settings(port=9100).port == 9100
    assert load_settings(port=None).port == 9001


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("CAMSERVE_PORT", "70000", "port"),
        ("CAMSERVE_MAX_BATCH_SIZE", "0", "max_batch_size"),
        ("CAMSERVE_AUTOCAST", "fp8", "none, bf16, fp16"),
        ("CAMSERVE_LOG_LEVEL", "loud", "log_level"),
    ],
)
def test_bad_values_fail_fast_with_the_field_named(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError, match=message):
        load_settings()


def test_default_model_must_be_served(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAMSERVE_MODELS", "a,b")
    monkeypatch.setenv("CAMSERVE_DEFAULT_MODEL", "c")
    with pytest.raises(ValidationError, match="not among the served models"):
        load_settings()


def test_blank_api_key_means_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAMSERVE_API_KEY", "  ")
    assert load_settings().api_key is None


def test_model_control_defaults_to_none_and_reads_its_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir("/")
    defaults = load_settings()
    assert (defaults.model_control, defaults.poll_interval_s, defaults.admin_key) == (
        "none",
        5.0,
        None,
    )
    monkeypatch.setenv("CAMSERVE_MODEL_CONTROL", "poll")
    monkeypatch.setenv("CAMSERVE_POLL_INTERVAL_S", "0.5")
    monkeypatch.setenv("CAMSERVE_ADMIN_KEY", "  ")
    polled = load_settings()
    assert (polled.model_control, polled.poll_interval_s, polled.admin_key) == ("poll", 0.5, None)


def test_explicit_model_control_needs_the_admin_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir("/")
    with pytest.raises(ValidationError, match="set CAMSERVE_ADMIN_KEY"):
        load_settings(model_control="explicit")
    explicit = load_settings(model_control="explicit", admin_key="k")
    assert explicit.admin_key is not None
    assert explicit.admin_key.get_secret_value() == "k"
    with pytest.raises(ValidationError, match="model_control"):
        load_settings(model_control="watch")
    with pytest.raises(ValidationError, match="poll_interval_s"):
        load_settings(poll_interval_s=0)


def test_one_caller_holds_three_quarters_of_the_queue_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir("/")
    assert load_settings().caller_share == 48  # of the default 64
    assert load_settings(queue_size=8).caller_share == 6
    monkeypatch.setenv("CAMSERVE_QUEUE_PER_CALLER", "0")  # no bound of its own
    assert load_settings(queue_size=8).caller_share == 8
    monkeypatch.setenv("CAMSERVE_QUEUE_PER_CALLER", "100")  # never above the whole queue
    assert load_settings(queue_size=8).caller_share == 8
    monkeypatch.setenv("CAMSERVE_QUEUE_PER_CALLER", "3")
    assert load_settings(queue_size=8).caller_share == 3


def test_named_api_keys_come_from_a_list_and_a_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    keys_file = tmp_path / "keys"
    keys_file.write_text("# one caller a line\ncarol: s3cret-c\n\n")
    monkeypatch.setenv("CAMSERVE_API_KEYS", "alice:s3cret-a, bob:s3cret:b")
    monkeypatch.setenv("CAMSERVE_API_KEYS_FILE", str(keys_file))
    monkeypatch.setenv("CAMSERVE_API_KEY", "s3cret-single")
    ring = KeyRing.of(load_settings())
    assert sorted(ring.names) == ["alice", "bob", "carol", "key 2843fbce"]
    assert [ring.name_of(key) for key in ("s3cret:b", "s3cret-c", "s3cret-single")] == [
        "bob",
        "carol",
        "key 2843fbce",
    ]
    assert ring.name_of("s3cret") is None
    assert "s3cret" not in repr(load_settings())


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ("alice", "CAMSERVE_API_KEYS, entry 1: write each key as 'name:key'"),
        ("alice:k1,:k2", "CAMSERVE_API_KEYS, entry 2: the name '' must be 1-64 letters"),
        ("alice:k1,alice:k2", "CAMSERVE_API_KEYS, entry 2: the name 'alice' is given twice"),
        ("alice:k1,bob:k1", "CAMSERVE_API_KEYS, entry 2: 'bob' has the same key as another"),
        ("alice:k-single", "two API keys (CAMSERVE_API_KEY, CAMSERVE_API_KEYS) are the same"),
    ],
)
def test_bad_named_keys_fail_fast_without_showing_a_key(
    monkeypatch: pytest.MonkeyPatch, keys: str, message: str
) -> None:
    monkeypatch.setenv("CAMSERVE_API_KEYS", keys)
    monkeypatch.setenv("CAMSERVE_API_KEY", "k-single")
    with pytest.raises(ValidationError) as raised:
        load_settings()
    assert message in str(raised.value)
    assert "k1" not in str(raised.value)
    assert "k-single" not in str(raised.value)
