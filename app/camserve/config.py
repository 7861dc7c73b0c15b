"""Service settings, read from ``CAMSERVE_*`` environment variables (and a ``.env`` file).
Build them with ``load_settings()``; nothing is read at import time."""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Iterable
from contextlib import suppress
from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from camserve.engine.images.imaging import DEFAULT_MAX_PIXELS
from camserve.engine.images.regions import parse_threshold
from camserve.engine.models.devices import AUTOCAST_DTYPES
from camserve.engine.models.manifest import DEFAULT_MODELS_DIR
from camserve.engine.models.shipped import ModelsFolder

__all__ = [
    "DEFAULT_MODELS_DIR",
    "Settings",
    "default_caller_share",
    "load_settings",
    "parse_named_keys",
]

DESTINATION_FORM = re.compile(
    r"(\[(?P<v6>[0-9a-f:.]+)\]|[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?)(:(?P<port>[0-9]{1,5}))?", re.I
)
"""A host name, an IPv4 address or a bracketed IPv6 address, with an optional port."""

LogLevel = Literal["debug", "info", "warning", "error"]
ModelControl = Literal["none", "explicit", "poll"]


class Settings(BaseSettings):
    """Every knob of the service; docs/settings.md lists them with their defaults."""

    model_config = SettingsConfigDict(
        env_prefix="CAMSERVE_",
        env_file=".env",
        extra="ignore",
        frozen=True,
        populate_by_name=True,
        hide_input_in_errors=True,  # an error must not print the keys it was given
    )

    host: str = Field("127.0.0.1", description="Interface to listen on (0.0.0.0 in containers).")
    port: int = Field(8000, ge=1, le=65535, description="TCP port.")
    models_dir: ModelsFolder = Field(DEFAULT_MODELS_DIR, description="Manifests (*.toml).")
    models: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated model names to serve; empty serves every manifest. The "
        "first of them that serves is the default model unless default_model names one.",
    )
    default_model: str | None = Field(
        None,
        description="Model used when a request names none; default: the first of 'models' "
        "that serves, or with 'models' empty the first in name order that serves.",
    )
    allow_downloads: bool = Field(
        True,
        description="Whether loading a model may download pretrained weights that are not in "
        "the local caches (torchvision, timm, Hugging Face Hub); false refuses such a model "
        "with the 'camserve fetch-weights' command to run, and keeps the Hugging Face "
        "libraries offline.",
    )
    device: str = Field("auto", description="auto (CUDA when available), cpu, cuda or cuda:N.")
    autocast: str = Field("none", description="Reduced precision on CUDA: none, bf16 or fp16.")
    tf32: bool = Field(
        False,
        description="Let CUDA run float32 convolutions and matrix products in TF32 (faster on "
        "Ampere and later, maps within about 1e-3 of the CPU's); false keeps full float32.",
    )
    max_batch_size: int = Field(8, ge=1, le=1024, description="Most images in one batch.")
    max_wait_ms: float = Field(
        5.0, ge=0, le=10_000, description="How long a batch waits for more images after its first."
    )
    queue_size: int = Field(64, ge=1, description="Most queued jobs; more are refused with 429.")
    queue_per_caller: int | None = Field(
        None,
        ge=0,
        description="Most queued jobs of one caller (429 beyond); unset: all but a quarter of "
        "the queue, so that other callers still find room; 0: the whole queue.",
    )
    fair_shares: bool = Field(
        True, description="Serve the callers with queued work in turn (false: one FIFO)."
    )
    slice_ms: float = Field(
        150.0,
        ge=0,
        le=10_000,
        description="Slice of a long batch (Score-CAM), with short batches run in between; "
        "0: long batches run whole.",
    )
    request_timeout_s: float = Field(30.0, gt=0, description="Per-request deadline (then 504).")
    async_jobs: int = Field(
        256, ge=1, description="Most asynchronous jobs kept (Prefer: respond-async; 429 beyond)."
    )
    async_job_keep_s: float = Field(
        300.0, gt=0, description="Seconds an asynchronous job's answer is kept after it finished."
    )
    max_upload_bytes: int = Field(20 * 1024 * 1024, ge=1, description="Largest upload (413).")
    max_pixels: int = Field(DEFAULT_MAX_PIXELS, ge=1, description="Largest width × height (413).")
    max_top_k: int = Field(10, ge=1, description="Largest top_k a request may ask for.")
    score_cam_batch_size: int = Field(64, ge=1, description="Masked inputs per Score-CAM pass.")
    score_cam_precision: str = Field(
        "none",
        description="Precision of Score-CAM's masked passes: none (float32), bf16 (a GPU, or a "
        "CPU with AVX-512 BF16 or AMX) or fp16 (a GPU); docs/quality.md measures the maps.",
    )
    api_key: SecretStr | None = Field(
        None, description="When set, /v1 routes need 'Authorization: Bearer <key>'."
    )
    api_keys: Annotated[dict[str, SecretStr], NoDecode] = Field(
        default_factory=dict,
        description="Named API keys, 'name:key,name:key': any of them opens the /v1 routes, and "
        "its name is the caller in logs, metrics and the queue's fair shares.",
    )
    api_keys_file: Path | None = Field(
        None, description="A file of more named API keys, one 'name:key' a line ('#' comments)."
    )
    admin_key: SecretStr | None = Field(
        None,
        description="When set, the model repository routes (/v2/repository) are served and need "
        "'Authorization: Bearer <admin key>'.",
    )
    model_control: ModelControl = Field(
        "none",
        description="none: load at start, no changes; explicit: load and unload through "
        "/v2/repository; poll: follow the models folder.",
    )
    poll_interval_s: float = Field(
        5.0, gt=0, le=3600, description="poll: seconds between two reads of the models folder."
    )
    cache_mb: float = Field(
        256,
        ge=0,
        description="Megabytes of finished answers kept for identical requests; 0 turns the "
        "answer cache off.",
    )
    pass_cache_mb: float = Field(
        256,
        ge=0,
        description="Megabytes of kept passes (activations, gradients and maps per image), so "
        "another method, class or drawing of the same image runs no new pass; 0 keeps none.",
    )
    upload_cache_mb: float = Field(
        64,
        ge=0,
        description="Megabytes of decoded uploads kept by the sha256 of their bytes, so the "
        "same file sent again is neither decoded nor hashed again; 0 keeps none.",
    )
    audit: bool = Field(True, description="Compute each served version's explanation report.")
    audit_dir: Path | None = Field(None, description="Where reports are kept; unset: the cache.")
    audit_max_images: int = Field(8, ge=1, le=256, description="Most images in a report.")
    audit_seeds: int = Field(3, ge=1, le=20, description="Cascades a sanity verdict rests on.")
    cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Comma-separated origins allowed by CORS."
    )
    log_level: LogLevel = Field("info", description="debug, info, warning or error.")
    torch_threads: int = Field(
        0, ge=0, description="Threads torch may use for one pass; 0 keeps torch's default."
    )
    codec_threads: int = Field(
        0, ge=0, description="Threads that decode and encode images; 0 means one per CPU core."
    )
    labelstudio_enabled: bool = Field(
        True, description="Serve the Label Studio ML backend under /labelstudio."
    )
    label_studio_url: str | None = Field(
        None,
        validation_alias=AliasChoices("CAMSERVE_LABEL_STUDIO_URL", "LABEL_STUDIO_URL"),
        description="Label Studio's address, for task images under /data/ (LABEL_STUDIO_URL).",
    )
    label_studio_api_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("CAMSERVE_LABEL_STUDIO_API_KEY", "LABEL_STUDIO_API_KEY"),
        description="Label Studio token (legacy or personal access token) for its task images.",
    )
    local_files_document_root: Path | None = Field(
        None,
        validation_alias=AliasChoices(
            "CAMSERVE_LOCAL_FILES_DOCUMENT_ROOT",
            "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT",
            "LOCAL_FILES_DOCUMENT_ROOT",
        ),
        description="Root of Label Studio's local-files storage; no local file outside it is read.",
    )
    labelstudio_basic_auth_user: str | None = Field(
        None, description="User name Label Studio must send (basic auth) to /labelstudio."
    )
    labelstudio_basic_auth_pass: SecretStr | None = Field(
        None, description="Password Label Studio must send (basic auth) to /labelstudio."
    )
    labelstudio_model: str | None = Field(
        None, description="Model for Label Studio predictions; default: the default model."
    )
    labelstudio_method: str | None = Field(None, description="CAM method; default: the model's.")
    labelstudio_layer: str | None = Field(None, description="Layer; default: the model's.")
    labelstudio_threshold: str = Field(
        "0.5", description="Region threshold: a fraction of the map's maximum, or 'otsu'."
    )
    labelstudio_regions: Literal["largest", "all"] = Field(
        "largest", description="Regions per class: the largest, or all of them."
    )
    labelstudio_classes: int = Field(
        1, ge=1, description="How many of the most likely mapped classes each control gets."
    )
    labelstudio_score_threshold: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Detectors: detections scoring above this become Label Studio boxes.",
    )
    labelstudio_label_map: dict[str, str] = Field(
        default_factory=dict,
        description='JSON object, model label → project label, e.g. {"tabby": "cat"}.',
    )
    labelstudio_fetch_timeout_s: float = Field(
        10.0, gt=0, description="Timeout for fetching one task image."
    )
    task_image_allow: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated hosts, host:port, addresses or CIDR networks that task "
        "images may come from besides public addresses and Label Studio's own origin.",
    )

    @property
    def caller_share(self) -> int:
        """The queue slots one caller may hold (``queue_per_caller`` resolved)."""
        if self.queue_per_caller is None:
            return default_caller_share(self.queue_size)
        return min(self.queue_per_caller or self.queue_size, self.queue_size)

    @cached_property
    def named_api_keys(self) -> dict[str, SecretStr]:
        """Every API key by name: ``api_keys`` and ``api_key`` (named ``key <sha256 start>``)."""
        keys = dict(self.api_keys)
        if self.api_key is not None:
            keys[single_key_name(self.api_key)] = self.api_key
        return keys

    @model_validator(mode="before")
    @classmethod
    def _read_api_keys(cls, values: object) -> object:
        """``api_keys`` from its comma list and ``api_keys_file``, merged, by name."""
        if not isinstance(values, dict):
            return values
        given = values.get("api_keys") or {}
        if isinstance(given, str):
            given = parse_named_keys(given.split(","), "CAMSERVE_API_KEYS")
        path = values.get("api_keys_file")
        if not path:
            return {**values, "api_keys": given}
        try:
            lines = Path(path).read_text().splitlines()
        except OSError as error:
            raise ValueError(f"api_keys_file {path}: {error.strerror}") from error
        from_file = parse_named_keys(lines, f"api_keys_file {path}")
        if clash := sorted(set(given) & set(from_file)):
            raise ValueError(f"api key names given twice (CAMSERVE_API_KEYS and file): {clash}")
        return {**values, "api_keys": {**given, **from_file}}

    @model_validator(mode="after")
    def _api_keys_differ(self) -> Settings:
        secrets = [key.get_secret_value() for key in self.named_api_keys.values()]
        if len(set(secrets)) < len(secrets):
            raise ValueError("two API keys (CAMSERVE_API_KEY, CAMSERVE_API_KEYS) are the same")
        return self

    @field_validator("models", "cors_origins", "task_image_allow", mode="before")
    @classmethod
    def _split_commas(cls, value: object) -> object:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("autocast")
    @classmethod
    def _known_autocast(cls, value: str) -> str:
        key = value.strip().lower()
        if key not in AUTOCAST_DTYPES:
            raise ValueError(f"must be one of {', '.join(AUTOCAST_DTYPES)}")
        return key

    @field_validator("api_key", "admin_key")
    @classmethod
    def _non_empty_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().strip():
            return None
        return value

    @field_validator("task_image_allow")
    @classmethod
    def _valid_destinations(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            if not _names_a_destination(entry):
                raise ValueError(f"{entry!r} is not a host, host:port, address or CIDR network")
        return entries

    @field_validator("labelstudio_threshold")
    @classmethod
    def _valid_threshold(cls, value: str) -> str:
        parse_threshold(value)
        return value

    @model_validator(mode="after")
    def _basic_auth_is_complete(self) -> Settings:
        if (self.labelstudio_basic_auth_user is None) != (self.labelstudio_basic_auth_pass is None):
            raise ValueError(
                "set both labelstudio_basic_auth_user and labelstudio_basic_auth_pass, or neither"
            )
        return self

    @model_validator(mode="after")
    def _explicit_control_has_its_routes(self) -> Settings:
        if self.model_control == "explicit" and self.admin_key is None:
            raise ValueError(
                "model_control 'explicit' loads and unloads models through /v2/repository, "
                "which is served only with an admin key: set CAMSERVE_ADMIN_KEY"
            )
        return self

    @model_validator(mode="after")
    def _default_model_is_served(self) -> Settings:
        if self.default_model and self.models and self.default_model not in self.models:
            raise ValueError(
                f"default_model {self.default_model!r} is not among the served models "
                f"({', '.join(self.models)})"
            )
        return self


def _names_a_destination(entry: str) -> bool:
    """Whether a ``task_image_allow`` entry has a destination's form: an address or CIDR
    network, or a host name or ``[IPv6 address]`` with an optional port. Checked here to fail
    fast; ``app/camserve/labeling/destinations.py`` reads the entries into rules."""
    with suppress(ValueError):
        return ipaddress.ip_network(entry) is not None
    form = DESTINATION_FORM.fullmatch(entry)
    if form is None or not 0 < int(form["port"] or 1) < 65536:
        return False
    with suppress(ValueError):
        return form["v6"] is None or ipaddress.IPv6Address(form["v6"]) is not None
    return False


def default_caller_share(total: int) -> int:
    """The queue slots one caller may hold when no bound is configured: all but a quarter of
    the queue (at least one slot), so that while one caller floods, the others still find a
    quarter of it free (16 of 64 slots: two batches of 8), and a caller alone still gets
    three quarters of it (48 of 64). A queue of one slot has nothing to keep back."""
    return max(1, total - max(1, total // 4))


API_KEY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""A key's name: it appears in logs and metric labels as it is."""


def single_key_name(key: SecretStr) -> str:
    """The name of ``CAMSERVE_API_KEY``: ``key`` and the first 8 hex digits of its sha256."""
    return "key " + hashlib.sha256(key.get_secret_value().encode()).hexdigest()[:8]


def parse_named_keys(entries: Iterable[str], source: str) -> dict[str, str]:
    """``name:key`` entries (blank ones and ``#`` comments skipped) as key by name; a
    ``ValueError`` that names ``source`` and the entry's position (never the key) when one is
    malformed, a name repeats or two names share a key."""
    keys: dict[str, str] = {}
    for position, raw in enumerate(entries, start=1):
        entry = raw.strip()
        if not entry or entry.startswith("#"):
            continue
        name, colon, key = (part.strip() for part in entry.partition(":"))
        where = f"{source}, entry {position}"
        if not colon or not key:
            raise ValueError(f"{where}: write each key as 'name:key'")
        if API_KEY_NAME.fullmatch(name) is None:
            raise ValueError(
                f"{where}: the name {name!r} must be 1-64 letters, digits, '_', '.' or '-', "
                "starting with a letter or digit"
            )
        if name in keys:
            raise ValueError(f"{where}: the name {name!r} is given twice")
        if key in keys.values():
            raise ValueError(f"{where}: {name!r} has the same key as another name")
        keys[name] = key
    return keys


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment, with ``overrides`` (e.g. CLI flags) taking precedence."""
    return Settings(**{key: value for key, value in overrides.items() if value is not None})  # type: ignore[arg-type]
