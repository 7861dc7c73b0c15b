"""Where a dataset job runs: in this process, or on Ray.

Ray pays off only once the images are many: its start-up (its processes, then each actor
importing torch and loading the model) costs several seconds before the first image, while
one engine in this process starts at once. So, unless told, a job with fewer than
``IN_PROCESS_BELOW`` images to explain runs here; a cluster address, a number of actors, or a
process already connected to Ray mean Ray. The threshold is measured (docs/benchmarks.md,
"Small datasets without Ray").
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import StrEnum

from camserve.engine.errors import CamserveError

__all__ = ["IN_PROCESS_BELOW", "RunPlace", "RunPlaceError", "Where", "choose_where"]

IN_PROCESS_BELOW = 200
"""Fewer images to explain than this run in this process, unless the job says otherwise."""


class RunPlace(StrEnum):
    AUTO = "auto"
    """In this process below ``IN_PROCESS_BELOW`` images, else on Ray."""
    HERE = "here"
    """In this process, however many images."""
    RAY = "ray"
    """On Ray, however few images."""


class RunPlaceError(CamserveError):
    """A job asked to run in this process and, at once, for something only Ray has."""

    code = "dataset_run_place"


@dataclass(frozen=True)
class Where:
    on_ray: bool
    reason: str
    """Why, in a few words (``fewer than 200 images``, ``--ray``)."""


def choose_where(place: RunPlace, images: int, *, address: str | None, actors: int | None) -> Where:
    """Where ``images`` images to explain run, as ``place`` asks."""
    ray_options = [
        name
        for name, given in (("--address", address is not None), ("--actors", actors is not None))
        if given
    ]
    if place is RunPlace.HERE:
        if ray_options:
            raise RunPlaceError(f"{' and '.join(ray_options)} need Ray; leave out --in-process")
        return Where(on_ray=False, reason="--in-process")
    if place is RunPlace.RAY:
        return Where(on_ray=True, reason="--ray")
    if ray_options:
        return Where(on_ray=True, reason=f"{ray_options[0]} given")
    if _connected_to_ray():
        return Where(on_ray=True, reason="this process is connected to Ray")
    if images < IN_PROCESS_BELOW:
        return Where(on_ray=False, reason=f"fewer than {IN_PROCESS_BELOW} images; --ray for Ray")
    return Where(on_ray=True, reason=f"{IN_PROCESS_BELOW} images or more; --in-process for here")


def _connected_to_ray() -> bool:
    """Whether this process holds a Ray connection (without importing Ray where it has not)."""
    ray = sys.modules.get("ray")
    return ray is not None and bool(ray.is_initialized())
