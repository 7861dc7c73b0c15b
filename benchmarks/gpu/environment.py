"""What a GPU run ran on, as JSON: the machine, Python, torch and its CUDA device, the versions
of the packages camserve uses there (the machine's own and the carried wheels), and whether
camserve's modules import. The first part of ``benchmarks/gpu/run.py``.

Usage::

    python -m benchmarks.gpu.environment OUT.json
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import sys
import traceback
from importlib import metadata
from pathlib import Path

import torch

PACKAGES = [
    "torch",
    "torchvision",
    "numpy",
    "pillow",
    "opencv-python-headless",
    "timm",
    "scikit-image",
    "pytest",
    "fastapi",
    "starlette",
    "pydantic",
    "uvicorn",
    "grad-cam",
    "zlib-ng",
    "isal",
    "orjson",
]
MODULES = [
    "camserve.api.application",
    "camserve.serving.runtime",
    "pytorch_grad_cam",
    "tests.gpu.subjects",
]
"""What the parts import first: a missing wheel shows here, once, rather than in every part."""


def version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "missing"


def import_error(module: str) -> str | None:
    try:
        importlib.import_module(module)
    except Exception:  # any failure to import is what this reports
        return traceback.format_exc(limit=1).strip().splitlines()[-1]
    return None


def device() -> dict[str, object]:
    if not torch.cuda.is_available():
        return {"name": "cpu", "cuda": False}
    properties = torch.cuda.get_device_properties(0)
    return {
        "name": torch.cuda.get_device_name(0),
        "cuda": torch.version.cuda,
        "memory_gib": round(properties.total_memory / 1024**3, 1),
        "multiprocessors": properties.multi_processor_count,
        "capability": f"{properties.major}.{properties.minor}",
        "cudnn": torch.backends.cudnn.version(),
    }


def main() -> None:
    about = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "device": device(),
        "packages": {package: version(package) for package in PACKAGES},
        "import_errors": {
            module: error for module in MODULES if (error := import_error(module)) is not None
        },
    }
    Path(sys.argv[1]).write_text(json.dumps(about, indent=1) + "\n")
    print(json.dumps(about, indent=1))


if __name__ == "__main__":
    main()
