"""The class names of the function's label spec (``metadata.annotations.spec`` of its
``function.yaml``), so that CVAT gets back the names it listed."""

from __future__ import annotations

import json
from pathlib import Path

DEFAULT_FUNCTION_YAML = Path(__file__).with_name("function.yaml")


def spec_label_names(path: Path, model: str | None) -> dict[int, str]:
    """Class index → label name from the function's spec, when that file describes ``model``
    (it renames repeated labels, so CVAT gets the names it listed)."""
    if not path.is_file():
        return {}
    import yaml  # noqa: PLC0415 - read once, at start-up; the requests never need it

    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    env = {item["name"]: item["value"] for item in document["spec"].get("env", [])}
    if env.get("CAMSERVE_MODEL") != model:
        return {}
    spec = json.loads(document["metadata"]["annotations"]["spec"])
    return {int(entry["id"]): str(entry["name"]) for entry in spec}
