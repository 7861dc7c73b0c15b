"""Turning requested targets (class indices or labels, or the top-k) into class indices."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from camserve.engine.errors import InvalidTargetError

__all__ = ["TargetSpec", "Targets", "choose_targets", "chooser", "class_index"]

TargetSpec = int | str | None
"""One image's target: a class index, a class label, or ``None`` for its top prediction."""
Targets = Tensor | Sequence[TargetSpec | Sequence[int | str]] | None

_INTEGER = re.compile(r"-?[0-9]+")
"""ASCII digits only: ``str.isdigit`` also accepts superscripts, which ``int`` refuses."""


def class_index(labels: Sequence[str] | None, target: int | str) -> int:
    """``target`` as a class index: an int as is, a label (exact, then case-insensitive), or a
    string of digits. Range checks are the caller's, who knows the number of classes."""
    if isinstance(target, bool):
        raise InvalidTargetError(f"target must be a class index or label, got {target!r}")
    if isinstance(target, int):
        return target
    text = target.strip()
    if labels is not None:
        if text in labels:
            return list(labels).index(text)
        folded = [label.casefold() for label in labels]
        if text.casefold() in folded:
            return folded.index(text.casefold())
    if _INTEGER.fullmatch(text):
        return int(text)
    raise InvalidTargetError(f"unknown class label {target!r}")


def choose_targets(
    logits: Tensor,
    targets: Targets,
    top_k: int,
    labels: Sequence[str] | None,
    ranking: Tensor | None = None,
) -> Tensor:
    """(B, K) class indices on the logits' device: ``targets`` given per image (an index, a
    label, or several; ``None`` for the top ``top_k``), or the top ``top_k`` of every image,
    ranked by ``ranking`` (B, classes) when given (ties: the lower index), else the logits."""
    batch_size, num_classes = logits.shape
    if not 1 <= top_k <= num_classes:
        raise InvalidTargetError(f"top_k must be between 1 and {num_classes}, got {top_k}")
    ranked = logits.detach().topk(top_k, dim=1).indices if ranking is None else _top(ranking, top_k)
    if targets is None:
        return ranked
    if isinstance(targets, Tensor):
        chosen = targets.to(logits.device, torch.long)
        chosen = chosen.unsqueeze(1) if chosen.dim() == 1 else chosen
    else:
        chosen = _targets_from_specs(ranked, targets, labels)
    if chosen.dim() != 2 or chosen.shape[0] != batch_size or chosen.shape[1] < 1:
        raise InvalidTargetError(
            f"expected one or more targets for each of the {batch_size} images, "
            f"got shape {tuple(chosen.shape)}"
        )
    if chosen.min() < 0 or chosen.max() >= num_classes:
        raise InvalidTargetError(
            f"class index out of range: the model has {num_classes} classes (0-{num_classes - 1})"
        )
    return chosen


def _top(scores: Tensor, count: int) -> Tensor:
    order: Tensor = torch.sort(scores.detach(), dim=1, descending=True, stable=True).indices
    return order[:, :count]


def _targets_from_specs(
    ranked: Tensor, specs: Sequence[TargetSpec | Sequence[int | str]], labels: Sequence[str] | None
) -> Tensor:
    """Rows of class indices: ``None`` takes the image's ``top_k`` predictions (``ranked``);
    explicit targets must give that many classes too."""
    if len(specs) != ranked.shape[0]:
        raise InvalidTargetError(f"got {len(specs)} targets for {ranked.shape[0]} images")
    rows: list[list[int]] = []
    for image_index, spec in enumerate(specs):
        if spec is None:
            rows.append(ranked[image_index].tolist())
        elif isinstance(spec, (int, str)):
            rows.append([class_index(labels, spec)])
        else:
            rows.append([class_index(labels, item) for item in spec])
    if len({len(row) for row in rows}) != 1:
        raise InvalidTargetError(
            "every image needs the same number of targets (top_k of them when some "
            "images take their top predictions)"
        )
    return torch.tensor(rows, dtype=torch.long, device=ranked.device)


def chooser(
    targets: Targets,
    top_k: int,
    labels: Sequence[str] | None,
    ranking: Callable[[Tensor], Tensor | None],
    views: int = 0,
) -> Callable[[Tensor], Tensor]:
    """``choose_targets`` as a function of the logits (``ranking``: of them); for a batch
    followed by ``views`` views of it (``fusion.with_views``), chosen on the originals' logits
    and repeated for each view, so that every view explains its original's classes."""

    def choose(logits: Tensor) -> Tensor:
        originals = logits[: logits.shape[0] // (1 + views)]
        chosen = choose_targets(originals, targets, top_k, labels, ranking(originals))
        return chosen.repeat(1 + views, 1)

    return choose
