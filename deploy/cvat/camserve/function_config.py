"""The function's settings, read once per worker from the ``CAMSERVE_*`` environment variables
that ``function.yaml`` sets; a bad value stops the function at start with a ``ValueError`` that
names the variable."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from label_spec import DEFAULT_FUNCTION_YAML, spec_label_names

SHAPE_TYPES = ("rectangle", "polygon", "mask")
TASKS = ("classification", "detection", "segmentation")


@dataclass(frozen=True)
class Config:
    """The function's settings, read once from the environment."""

    url: str
    model: str | None = None
    method: str = "gradcam"
    layer: str | None = None
    api_key: str | None = None
    top_k: int = 1
    threshold: str = "0.5"
    regions: str = "all"
    shapes: tuple[str, ...] = SHAPE_TYPES
    timeout_s: float = 30.0
    label_names: Mapping[int, str] = field(default_factory=dict)
    task: str = "classification"
    score_threshold: str = "0.5"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Config:
        url = env.get("CAMSERVE_URL", "").strip()
        if not url:
            raise ValueError("set CAMSERVE_URL to camserve's address, e.g. http://camserve:8000")
        model = env.get("CAMSERVE_MODEL", "").strip() or None
        spec_path = Path(env.get("CAMSERVE_FUNCTION_YAML", "") or DEFAULT_FUNCTION_YAML)
        return cls(
            url=url.rstrip("/"),
            model=model,
            method=env.get("CAMSERVE_METHOD", "").strip() or "gradcam",
            layer=env.get("CAMSERVE_LAYER", "").strip() or None,
            api_key=env.get("CAMSERVE_API_KEY", "").strip() or None,
            top_k=_positive_int(env.get("CAMSERVE_TOP_K", "1"), "CAMSERVE_TOP_K"),
            threshold=env.get("CAMSERVE_THRESHOLD", "").strip() or "0.5",
            regions=env.get("CAMSERVE_REGIONS", "").strip() or "all",
            shapes=_shape_types(env.get("CAMSERVE_SHAPES", ",".join(SHAPE_TYPES))),
            timeout_s=_positive_seconds(env.get("CAMSERVE_TIMEOUT_S", "30"), "CAMSERVE_TIMEOUT_S"),
            label_names=spec_label_names(spec_path, model),
            task=_task(env.get("CAMSERVE_TASK", "")),
            score_threshold=_fraction(env.get("CAMSERVE_SCORE_THRESHOLD", "0.5")),
        )


def _positive_int(text: str, name: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{name} must be a whole number of at least 1, got {text!r}")
    return value


def _positive_seconds(text: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise ValueError(f"{name} must be a number of seconds above 0, got {text!r}")
    return value


def _task(text: str) -> str:
    task = text.strip().lower() or "classification"
    if task not in TASKS:
        raise ValueError(f"CAMSERVE_TASK must be one of {', '.join(TASKS)}, got {text!r}")
    return task


def _fraction(text: str) -> str:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"CAMSERVE_SCORE_THRESHOLD must be from 0 to 1, got {text!r}")
    return text.strip()


def _shape_types(text: str) -> tuple[str, ...]:
    wanted = {part.strip().lower() for part in text.split(",") if part.strip()}
    unknown = sorted(wanted.difference(SHAPE_TYPES))
    if unknown or not wanted:
        raise ValueError(
            f"CAMSERVE_SHAPES must be one or more of {', '.join(SHAPE_TYPES)}, got {text!r}"
        )
    return tuple(shape for shape in SHAPE_TYPES if shape in wanted)
