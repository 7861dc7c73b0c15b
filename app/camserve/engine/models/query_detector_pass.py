"""One pass of a query-based detector (RT-DETR, DETR from transformers) with gradients at a layer.

The pass runs the detector's image processor and one forward with the explained layer's output
replaced by a leaf that requires grad: the same values, so the same logits, boxes and
detections, and a backward that stops at the layer. The detections are those of the image
processor's ``post_process_object_detection``, computed with its own operations in its order
(a test pins them equal), keeping for each the query (``Detections.rows``) and the class that
produced it. A detection's target is that query's class logit before the sigmoid or softmax:
there is no NMS between the logit and the kept box, so the logit alone decides the detection.

Several detections of one image share the pass and one batched backward through the kept graph
(``is_grads_batched``: K one-hot output gradients under ``vmap``); each detection's gradient is
the one a full backward of its logit alone gives (a test pins this).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from camserve.engine.errors import UnknownLayerError
from camserve.engine.models.detector_pass import Detections
from camserve.engine.models.sources.hf_detectors import HfDetector

__all__ = ["QueryPass", "corner_boxes", "query_logit_gradients", "run_query_detector"]


@dataclass(frozen=True)
class QueryPass:
    """What one query-detector pass over a batch of images produced."""

    layer: str
    features: OrderedDict[str, Tensor]
    """The layer's output (B, C, h, w) under its name: the leaf the gradients are taken at."""
    logits: Tensor
    """(B, queries, classes) class logits, still tied to ``features`` by the graph."""
    image_sizes: list[tuple[int, int]]
    """Each image's (height, width) after the processor's resize, inside the padded canvas."""
    canvas: tuple[int, int]
    """The processor's padded input (height, width), which the layer's map covers."""
    original_sizes: list[tuple[int, int]]
    detections: list[Detections]
    """Each image's detections; ``rows`` holds the query each came from."""


def run_query_detector(
    detector: HfDetector, images: list[Tensor], layer: str, threshold: float
) -> QueryPass:
    """Detections of ``images`` ((3, H, W) floats in [0, 1]) scoring above ``threshold``, with
    ``layer``'s output held as a leaf for the targets' gradients."""
    original_sizes = [(int(image.shape[-2]), int(image.shape[-1])) for image in images]
    batch = detector.processor(images=images, return_tensors="pt", do_rescale=False)
    inputs = {key: value for key, value in batch.items() if key in {"pixel_values", "pixel_mask"}}
    with torch.enable_grad(), _leaf_at(detector.module, layer) as held:
        outputs = detector.module(**inputs)
    pixels = inputs["pixel_values"]
    canvas = (int(pixels.shape[-2]), int(pixels.shape[-1]))
    mask = inputs.get("pixel_mask")
    sizes = [canvas] * len(images) if mask is None else [_filled(each) for each in mask]
    found = _post_process(
        outputs.logits.detach(), outputs.pred_boxes.detach(), original_sizes, detector, threshold
    )
    features = OrderedDict([(layer, held[0])])
    return QueryPass(layer, features, outputs.logits, sizes, canvas, original_sizes, found)


@contextmanager
def _leaf_at(module: nn.Module, layer: str) -> Iterator[list[Tensor]]:
    """Within the block, ``layer``'s output is swapped for a detached copy that requires grad
    (collected in the yielded list)."""
    named = dict(module.named_modules())
    if layer not in named:
        stages = [name for name in named if ".stages." in name and name.count(".") <= 5]
        raise UnknownLayerError(
            f"unknown detector layer {layer!r}; for example: {', '.join(stages[-3:])}"
        )
    held: list[Tensor] = []

    def swap(_module: nn.Module, _inputs: Any, output: Tensor) -> Tensor:
        leaf = output.detach().requires_grad_(True)
        held.append(leaf)
        return leaf

    handle = named[layer].register_forward_hook(swap)
    try:
        yield held
    finally:
        handle.remove()


def _filled(mask: Tensor) -> tuple[int, int]:
    """The (height, width) of the image inside its padded canvas: the mask's ones."""
    return (int(mask[:, 0].sum()), int(mask[0, :].sum()))


def corner_boxes(centred: Tensor) -> Tensor:
    """(cx, cy, w, h) boxes as (x0, y0, x1, y1), transformers' ``center_to_corners_format``."""
    centre_x, centre_y, width, height = centred.unbind(-1)
    corners = [
        centre_x - 0.5 * width,
        centre_y - 0.5 * height,
        centre_x + 0.5 * width,
        centre_y + 0.5 * height,
    ]
    return torch.stack(corners, dim=-1)


def _post_process(
    logits: Tensor,
    centred: Tensor,
    sizes: list[tuple[int, int]],
    detector: HfDetector,
    threshold: float,
) -> list[Detections]:
    """The processor's ``post_process_object_detection`` (boxes in original pixels), with the
    query of each detection kept."""
    heights = torch.tensor([float(size[0]) for size in sizes])
    widths = torch.tensor([float(size[1]) for size in sizes])
    scale = torch.stack([widths, heights, widths, heights], dim=1)
    boxes = corner_boxes(centred) * scale[:, None, :]
    queries, classes = logits.shape[1], logits.shape[2]
    if detector.scores == "sigmoid":
        scores, index = torch.topk(torch.sigmoid(logits).flatten(1), queries, dim=-1)
        labels, rows = index % classes, index // classes
    else:
        scores, labels = torch.softmax(logits, -1)[..., :-1].max(-1)
        rows = torch.arange(queries).expand(len(sizes), -1)
    found = []
    for image in range(len(sizes)):
        kept = scores[image] > threshold
        chosen = rows[image][kept]
        found.append(
            Detections(boxes[image][chosen], labels[image][kept], scores[image][kept], chosen)
        )
    return found


def query_logit_gradients(
    run: QueryPass, image: int, queries: Tensor, labels: Tensor
) -> tuple[Tensor, OrderedDict[str, Tensor]]:
    """The class logit of each (query, label) of ``image``, (K,), and its gradient at the
    pass's layer, (K, C, h, w): one batched backward through the pass's graph (``vmap`` over
    K one-hot output gradients), each row what a backward of that logit alone gives."""
    leaf = run.features[run.layer]
    targets = run.logits[image, queries, labels].detach()
    if len(queries) == 0:
        return targets, OrderedDict([(run.layer, leaf.new_zeros((0, *leaf.shape[1:])))])
    picks = run.logits.detach().new_zeros((len(queries), *run.logits.shape))
    picks[torch.arange(len(queries)), image, queries, labels] = 1.0
    (gradients,) = torch.autograd.grad(
        run.logits, leaf, picks, retain_graph=True, is_grads_batched=True
    )
    return targets, OrderedDict([(run.layer, gradients[:, image])])
