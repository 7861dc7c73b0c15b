"""The candidate default explanations score what the engine serves: the shipped default's
candidate hits where the served ``fused`` map hits, and the mirror candidate's map is the one
``fusion_augment`` serves."""

from __future__ import annotations

from dataclasses import replace

import pytest

from camserve.engine.engine import CamEngine
from camserve.engine.fusion import FUSED_LAYER
from camserve.engine.models.registry import LoadedModel
from camserve_lab.composites import composites
from camserve_lab.default_candidates import CANDIDATES, candidate_hits, view_engines
from camserve_lab.pointing import study_composites
from camserve_lab.real_model import efficientnet_lite0

SHIPPED = "LayerCAM @ blocks.3+4+6"
MIRROR = "LayerCAM @ blocks.4+6 + mirror"


@pytest.fixture(scope="module")
def loaded() -> LoadedModel:
    return efficientnet_lite0()


def test_the_shipped_defaults_candidate_scores_the_served_map(loaded: LoadedModel) -> None:
    (candidate,) = [c for c in CANDIDATES if c.name == SHIPPED]
    assert candidate.layers == loaded.fusion_layers
    images = list(composites(0, 4))
    engines = view_engines(loaded, candidate.views)
    hits = [candidate_hits(engines, image, [candidate])[SHIPPED] for image in images]
    served = study_composites(CamEngine.from_loaded(loaded), images, ["layercam"], [FUSED_LAYER])
    assert hits == [result.hit for result in served.rows[f"layercam @ {FUSED_LAYER}"]]


def test_the_mirror_candidate_scores_what_fusion_augment_serves(loaded: LoadedModel) -> None:
    (candidate,) = [c for c in CANDIDATES if c.name == MIRROR]
    augmented = replace(loaded, fusion_layers=candidate.layers, fusion_augment=("hflip",))
    images = list(composites(0, 4))
    engines = view_engines(loaded, candidate.views)
    hits = [candidate_hits(engines, image, [candidate])[MIRROR] for image in images]
    served = study_composites(CamEngine.from_loaded(augmented), images, ["layercam"], [FUSED_LAYER])
    assert hits == [result.hit for result in served.rows[f"layercam @ {FUSED_LAYER}"]]
