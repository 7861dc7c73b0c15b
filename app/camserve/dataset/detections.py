"""A detector's explanations of decoded images, in the shape the dataset rows take: for each
image its detections above the score threshold (the predictions) and, for the first
``max_detections`` of them, each method's heatmap and overlay (the explained box drawn on it)
at the original resolution. The maps are the service's: the same engine call
(``explain_detections``) and the same rendering as ``/v1/explain`` on a detector."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from camserve.dataset.explained import ExplainOptions, ImageExplanation, MethodMaps
from camserve.engine.detection_maps import DetectionMaps, detector_methods_named, explain_detections
from camserve.engine.images.render import RenderOptions
from camserve.engine.models.dense import LoadedDenseModel
from camserve.serving.detector_jobs import detector_methods, render_with_boxes

__all__ = ["detector_defaults", "explain_detected"]


def explain_detected(
    loaded: LoadedDenseModel, pixels: Sequence[Tensor], options: ExplainOptions
) -> list[ImageExplanation]:
    """Every image's detections and the maps of ``options.methods`` for the explained ones
    (one detector pass per image size); ``pixels``: (3, H, W) uint8 on the model's device."""
    layer = options.layer or loaded.layer
    answers = explain_detections(
        loaded.module,
        [image.float() / 255 for image in pixels],
        options.methods,
        [layer],
        max_detections=options.max_detections,
        score_threshold=options.score_threshold,
    )
    return [
        _explanation(loaded, image, answer, layer, options)
        for image, answer in zip(pixels, answers, strict=True)
    ]


def detector_defaults(options: ExplainOptions, loaded: LoadedDenseModel) -> ExplainOptions:
    """``options`` with the detector's own method (as the server picks it) and layer where the
    command line named none."""
    if options.methods:
        methods = tuple(method.name for method in detector_methods_named(options.methods))
    else:
        usable = detector_methods(loaded)
        own = loaded.method if loaded.method in usable else None
        methods = (own or ("gradcam" if "gradcam" in usable else "eigencam"),)
    return ExplainOptions(
        **{**vars(options), "methods": methods, "layer": options.layer or loaded.layer}
    )


def _explanation(
    loaded: LoadedDenseModel,
    image: Tensor,
    answer: DetectionMaps,
    layer: str,
    options: ExplainOptions,
) -> ImageExplanation:
    labels = answer.labels.tolist()
    scores = answer.scores.tolist()
    explained = len(answer.explained_boxes)
    boxes = [
        (float(x0), float(y0), float(x1), float(y1))
        for x0, y0, x1, y1 in answer.explained_boxes.detach().cpu().tolist()
    ]
    return ImageExplanation(
        layer=layer,
        classes=labels[:explained],
        labels=[loaded.labels[label] for label in labels[:explained]],
        scores=[round(float(score), 6) for score in scores[:explained]],
        predictions=[
            (int(label), loaded.labels[label], float(score))
            for label, score in zip(labels, scores, strict=True)
        ],
        maps=[_method_maps(image, answer, (layer, m), boxes, options) for m in options.methods]
        if explained
        else [],
        boxes=boxes,
    )


def _method_maps(
    image: Tensor,
    answer: DetectionMaps,
    key: tuple[str, str],
    boxes: list[tuple[float, float, float, float]],
    options: ExplainOptions,
) -> MethodMaps:
    render_options = RenderOptions(options.alpha, options.colormap)
    overlays, heatmaps = render_with_boxes(image, answer, key, boxes, render_options)
    return MethodMaps(method=key[1], class_agnostic=False, overlays=overlays, heatmaps=heatmaps)
