"""Print the parity of camserve with pytorch-grad-cam on the models of issue 14, as a table.

The same comparison as ``tests/engine/models/test_token_parity.py`` (same models, random weights,
inputs, target and reference), reporting the numbers the test only bounds: for every model and
method, the largest difference between camserve's raw map and pytorch-grad-cam's at the layer's
resolution, relative to the reference's peak ("flat" where both maps are zero up to rounding).

Usage::

    python -m scripts.quality.token_parity_table
"""

from __future__ import annotations

import copy

import torch

from camserve.engine.engine import CamEngine
from camserve.engine.images.preprocess import Preprocessing
from tests.engine.models.test_token_parity import (
    CASES,
    REFERENCE,
    ROUNDING,
    TARGET,
    oriented,
    reference_map,
)
from tests.engine.source_models import seeded_images


def relative_errors(name: str) -> tuple[str, dict[str, float | None]]:
    """The case's layer and, per method, max |ours - theirs| / peak(theirs) (``None`` where
    both maps are flat)."""
    torch.manual_seed(0)
    case = CASES[name]()
    images = seeded_images(1, case.size)
    engine = CamEngine(
        copy.deepcopy(case.model), case.layer, preprocessing=Preprocessing(case.size), device="cpu"
    )
    errors: dict[str, float | None] = {}
    for method in REFERENCE:
        ours = engine.compute(images, method, targets=[TARGET]).raw_maps[0, 0]
        reference = reference_map(case, images, method)
        theirs = oriented(reference.raw[0], ours) if method == "eigencam" else reference.raw[0]
        peak = float(theirs.abs().max())
        if peak <= ROUNDING * reference.term_scale:
            errors[method] = None
            continue
        errors[method] = float((ours - theirs).abs().max()) / peak
    return case.layer, errors


def main() -> None:
    torch.set_num_threads(1)
    methods = list(REFERENCE)
    print("| model | layer | " + " | ".join(methods) + " |")
    print("|---|---|" + "---:|" * len(methods))
    for name in CASES:
        layer, errors = relative_errors(name)
        cells = ["flat" if errors[m] is None else f"{errors[m]:.1e}" for m in methods]
        print(f"| {name} | `{layer}` | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
