"""CamEngine: a batch of images in; class-activation maps, logits and overlays out.

One call computes any set of methods on any set of layers from one forward pass with capture
hooks on those layers: it chooses the targets (given per image, or the top-k predictions) and,
when a requested method needs gradients, runs one backward pass for all target ranks and all
layers (a vmapped one for top-k) from the selected scores to the captured activations. Each
method then runs on the same ``MethodContext``; only Score-CAM adds forward passes, its masked
ones. Nothing below the shallowest target layer takes part in the backward pass: the parameters
are frozen and the graph starts there. The model stays in eval mode; the engine remembers only
whether each layer can carry a gradient at all (probed once: ``flat_gradients.py``). An image
whose gradient at a layer is zero gets its all-zero map, flagged in ``CamMaps.empty_maps``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from functools import cached_property, partial

import torch
from torch import Tensor, nn

from camserve.engine import fusion
from camserve.engine import methods as family
from camserve.engine.errors import MethodNotApplicableError, UnknownLayerError
from camserve.engine.flat_gradients import GradientReach, empty_gradient_flags, probe_inputs
from camserve.engine.gradients import hooked_pass, model_input
from camserve.engine.images.colormaps import DEFAULT_COLORMAP
from camserve.engine.images.imaging import ImageInput, as_image_tensor
from camserve.engine.images.preprocess import Preprocessing
from camserve.engine.images.render import DEFAULT_ALPHA, RenderOptions, render_together
from camserve.engine.methods import CamReach, MethodContext, get_method, never_stop
from camserve.engine.models.classifier import cam_classifier
from camserve.engine.models.dense import LoadedDenseModel
from camserve.engine.models.devices import resolve_device
from camserve.engine.models.layers import find_candidate_layers, resolve_layer
from camserve.engine.models.manifest import ModelSpec
from camserve.engine.models.registry import LoadedModel, load_model
from camserve.engine.models.segmenters import area_ranking, keeping_last_scores
from camserve.engine.models.tokens import class_logits, describe_layout
from camserve.engine.results import (
    BatchExplanation,
    CamMaps,
    CamResults,
    CapturedPass,
    Explanation,
    PriorPass,
    images_per_pair,
    repeat_for_targets,
)
from camserve.engine.run_control import RunControl
from camserve.engine.score_cam import MaskedPasses, MaskedRun, layer_share
from camserve.engine.targets import Targets, TargetSpec, chooser, class_index

__all__ = ["BatchExplanation", "CamEngine", "CamMaps", "CamResults", "Explanation", "ImageInput"]
__all__ += ["RunControl", "TargetSpec", "Targets"]

DEFAULT_SCORE_CAM_BATCH = 64
RUN_TO_THE_END = RunControl()


class CamEngine:
    """Explain a classifier's decisions with the CAM family of methods.

    The engine takes ownership of ``model``: it moves it to ``device``, puts it in eval mode and
    freezes its parameters (``requires_grad=False``); their values are never changed.
    """

    def __init__(
        self,
        model: nn.Module,
        layer: str,
        *,
        preprocessing: Preprocessing | None = None,
        labels: Sequence[str] | None = None,
        device: str | torch.device | None = None,
        autocast: torch.dtype | None = None,
        score_cam_batch_size: int = DEFAULT_SCORE_CAM_BATCH,
        score_cam_dtype: torch.dtype | None = None,
        fusion_layers: Sequence[str] = (),
        fusion_augment: Sequence[str] = (),
    ) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        self.device = resolve_device(device)
        self.model = model.to(self.device).eval().requires_grad_(False)
        self.preprocessing = preprocessing or Preprocessing()
        self.labels = list(labels) if labels is not None else None
        self.autocast = autocast
        self.masked_passes = MaskedPasses(
            self.model,
            self.device,
            self.preprocessing.input_size,
            chunk_size=score_cam_batch_size,
            dtype=score_cam_dtype or autocast,
        )
        self.layer = layer
        self.token_layout = describe_layout(self.model, self.preprocessing.input_size, layer)
        self.fusion_layers = tuple(dict.fromkeys(fusion_layers))  # what "fused" combines
        self.fusion_augment = fusion.check_augmentations(fusion_augment, self.fusion_layers)
        for name in (layer, *self.fusion_layers):
            self.layer_module(name)
        self._gradient_reach = GradientReach(self._forward, self.token_layout, self.device)
        self._cam_reach = CamReach(self._cam_probe)

    @classmethod
    def from_loaded(
        cls,
        loaded: LoadedModel | LoadedDenseModel,
        *,
        device: str | torch.device | None = None,
        autocast: torch.dtype | None = None,
        score_cam_batch_size: int = DEFAULT_SCORE_CAM_BATCH,
        score_cam_dtype: torch.dtype | None = None,
    ) -> CamEngine:
        """An engine for a model the registry loaded (from a manifest or by name), or for a
        segmenter ``load_dense_model`` loaded (its ``SegmentationScores`` explained per class)."""
        return cls(
            loaded.module,
            loaded.layer,
            preprocessing=loaded.preprocessing,
            labels=loaded.labels,
            device=device,
            autocast=autocast,
            score_cam_batch_size=score_cam_batch_size,
            score_cam_dtype=score_cam_dtype,
            fusion_layers=loaded.fusion_layers,
            fusion_augment=loaded.fusion_augment,
        )

    @classmethod
    def from_name(
        cls,
        architecture: str,
        *,
        weights: str = "DEFAULT",
        layer: str | None = None,
        num_classes: int | None = None,
        labels: Sequence[str] | None = None,
        device: str | torch.device | None = None,
        autocast: torch.dtype | None = None,
    ) -> CamEngine:
        """An engine for a torchvision architecture; ``weights`` is a torchvision weights name,
        ``random``, or a checkpoint path."""
        spec = ModelSpec(
            name=architecture,
            architecture=architecture,
            weights=weights,
            layer=layer,
            num_classes=num_classes,
            labels=list(labels) if labels is not None else None,
        )
        return cls.from_loaded(load_model(spec), device=device, autocast=autocast)

    @cached_property
    def candidate_layers(self) -> list[str]:
        """Shallow modules that output a feature map once per forward pass, in execution order."""
        probe = torch.zeros((1, 3, *self.preprocessing.input_size), device=self.device)
        return find_candidate_layers(self.model, probe, self.token_layout)

    def cam_layers(self, layers: Sequence[str] = ()) -> list[str]:
        """Where CAM answers: of the layer, candidates, fusion layers and ``layers``."""
        own = [self.layer, *self.candidate_layers, *self.fusion_layers]
        return self._cam_reach.answering([*own, *layers])

    def _cam_probe(self, layers: Sequence[str]) -> dict[str, MethodContext]:
        probe = probe_inputs((3, *self.preprocessing.input_size), self.device)
        choose = chooser(None, 1, self.labels, partial(area_ranking, self.model))
        with keeping_last_scores(self.model):  # the probe's pass is not a request's
            captured = self._capture(probe, [], layers, choose, prior=None)
        return {name: self._context(captured, name, never_stop, None) for name in layers}

    def layer_module(self, name: str | None = None) -> nn.Module:
        """The target module called ``name`` (default: the engine's layer)."""
        name = name or self.layer
        if name:
            try:  # a walk down the dotted path, not over every module of the model
                return self.model.get_submodule(name)
            except AttributeError:
                pass
        choices = fusion.layer_choices(self.candidate_layers, self.fusion_layers)
        return resolve_layer(self.model, name, choices)

    def compute_all(
        self,
        inputs: Tensor,
        methods: Sequence[str],
        targets: Targets = None,
        *,
        top_k: int = 1,
        layers: Sequence[str] | None = None,
        control: RunControl = RUN_TO_THE_END,
    ) -> CamResults:
        """Every method's maps on every layer for a preprocessed batch ``inputs`` (B, 3, h, w),
        from one hooked forward pass and at most one backward pass (none with a
        ``control.prior`` pass on these inputs, whose targets are already chosen).

        ``targets`` gives each image's class (index or label) or classes, or ``None`` for its
        ``top_k`` predictions; or a (B,) / (B, K) tensor of indices. A class-agnostic method
        (Eigen-CAM) gets one map per image, (B, 1, h, w). ``fused`` fuses each method's maps
        over ``fusion_layers``; with ``fusion_augment``, ``fused`` is averaged over views in the
        same (new) pass. ``control`` stops, budgets and follows the call (``RunControl``)."""
        checkpoint, prior = control.checkpoint, control.prior
        specs = list(dict.fromkeys(get_method(name) for name in methods))
        requested = list(dict.fromkeys(layers or [self.layer]))
        layer_names = fusion.layers_to_capture(requested, self.fusion_layers)
        batch = model_input(inputs, self.device)
        batch, views, prior = fusion.viewed(batch, self.fusion_augment, requested, prior)
        choose = chooser(targets, top_k, self.labels, partial(area_ranking, self.model), len(views))
        captured = self._capture(batch, specs, layer_names, choose, prior=prior)
        grads = family.any_needs_gradients(specs)
        flat = self.gradient_refusals(layer_names, batch.shape[1:]) if grads else {}
        checkpoint()
        results = CamResults(captured.logits, captured.targets, {}, captured=captured)
        known = {} if prior is None else prior.maps
        for index, layer_name in enumerate(layer_names):
            share = layer_share(control.progress, index, len(layer_names))
            masked = MaskedRun(self.masked_passes, control.channel_budget, share)
            context = self._context(captured, layer_name, checkpoint, masked)
            empty = None if context.gradients is None else empty_gradient_flags(context.gradients)
            for spec in specs:
                try:
                    if spec.needs_gradients and layer_name in flat:
                        raise UnknownLayerError(flat[layer_name])
                    raw = known.get((layer_name, spec.name))
                    raw = spec.compute(context).contiguous() if raw is None else raw
                except (MethodNotApplicableError, UnknownLayerError) as refusal:
                    results.refusals[(layer_name, spec.name)] = refusal
                    continue
                results.maps[(layer_name, spec.name)] = CamMaps(
                    spec.name,
                    layer_name,
                    raw,
                    captured.logits,
                    captured.targets,
                    class_agnostic=spec.class_agnostic,
                    empty=empty if spec.needs_gradients else None,
                )
                checkpoint()
        results = fusion.fused_results(results, requested, self.fusion_layers)
        return fusion.collapse_views(results, views)

    def gradient_refusals(
        self, layers: Sequence[str], shape: Sequence[int] | None = None
    ) -> dict[str, str]:
        """Why gradient methods get a 422 on each of ``layers`` that never carries a gradient,
        decided once per layer on seeded random inputs of ``shape`` (default 3 × input size)."""
        shape = shape or (3, *self.preprocessing.input_size)
        with keeping_last_scores(self.model):  # the probe's pass is not the request's
            return self._gradient_reach.refusals({n: self.layer_module(n) for n in layers}, shape)

    def compute(
        self,
        inputs: Tensor,
        method: str = "gradcam",
        targets: Targets = None,
        *,
        top_k: int = 1,
        layer: str | None = None,
    ) -> CamMaps:
        """One method's maps on one layer (see ``compute_all``); a class-agnostic method's map
        is repeated for each of the K targets, so ``raw_maps`` is always (B, K, h, w)."""
        layer_name = layer or self.layer
        results = self.compute_all(inputs, [method], targets, top_k=top_k, layers=[layer_name])
        return results[(layer_name, get_method(method).name)].per_target()

    @torch.no_grad()
    def probabilities(self, inputs: Tensor) -> Tensor:
        """Class probabilities (B, classes) for a preprocessed batch; no hooks, no gradients."""
        return torch.softmax(self._forward(model_input(inputs, self.device)).float(), dim=1)

    def explain_all(
        self,
        images: Sequence[Tensor],
        methods: Sequence[str],
        targets: Targets = None,
        *,
        top_k: int = 1,
        layers: Sequence[str] | None = None,
        options: Sequence[RenderOptions] | None = None,
        wanted: Sequence[Collection[str]] | None = None,
        control: RunControl = RUN_TO_THE_END,
    ) -> BatchExplanation:
        """The one pipeline: preprocess ``images`` ((3, H, W) uint8 on the engine's device),
        compute every method on every layer, and render each (layer, method) over the originals
        with each image's ``options``.

        ``wanted`` names, per image, the methods to render for it (default: all of ``methods``):
        a batch mixing requests for different methods renders each image's own methods only;
        ``control`` as in ``compute_all`` (its ``prior`` unused when views are augmented)."""
        if fusion.augments(self.fusion_augment, layers or [self.layer]):
            control = replace(control, prior=None)
        prior = control.prior
        if prior is None or prior.runs_the_model([get_method(name) for name in methods]):
            batch = self.preprocessing(images, self.device)
        else:  # no method reads the model input: it need not be prepared
            batch = self.preprocessing.unfilled(len(images), self.device)
        results = self.compute_all(
            batch, methods, targets, top_k=top_k, layers=layers, control=control
        )
        per_image = list(options) if options is not None else [RenderOptions()] * len(images)
        maps = {key: cams.layer_maps for key, cams in results.maps.items()}
        renders = images_per_pair(results, wanted, len(images))
        rendered = render_together(maps, images, per_image, renders, self.preprocessing.placement)
        return BatchExplanation(results, rendered)

    def explain(
        self,
        images: Sequence[ImageInput],
        method: str = "gradcam",
        targets: Targets = None,
        *,
        top_k: int = 1,
        layer: str | None = None,
        alpha: float = DEFAULT_ALPHA,
        colormap: str = DEFAULT_COLORMAP,
    ) -> Explanation:
        """``explain_all`` for one method and layer (class-agnostic maps repeated as in compute)."""
        originals = [as_image_tensor(image).to(self.device) for image in images]
        layer_name = layer or self.layer
        options = [RenderOptions(alpha, colormap)] * len(originals)
        explained = self.explain_all(
            originals, [method], targets, top_k=top_k, layers=[layer_name], options=options
        )
        key = (layer_name, get_method(method).name)
        cams = explained.results[key]
        rendered = explained.rendered[key]
        images_out = [rendered[index] for index in range(len(originals))]
        if cams.class_agnostic:
            ranks = cams.targets.shape[1]
            images_out = [repeat_for_targets(image, ranks) for image in images_out]
        return Explanation(cams.per_target(), images_out)

    def _capture(
        self,
        batch: Tensor,
        specs: Sequence[family.CamMethod],
        layer_names: Sequence[str],
        choose: Callable[[Tensor], Tensor],
        *,
        prior: PriorPass | None,
    ) -> CapturedPass:
        """The one forward pass (and backward pass, for gradients); none after a ``prior``."""
        if prior is not None:
            return prior.captured(batch)
        return hooked_pass(
            self.model,
            self._forward,
            batch,
            modules={name: self.layer_module(name) for name in layer_names},
            layout=self.token_layout,
            needs_gradients=family.any_needs_gradients(specs),
            choose=choose,
        )

    def _context(
        self,
        captured: CapturedPass,
        layer_name: str,
        checkpoint: Callable[[], None],
        masked: MaskedRun | None,
    ) -> MethodContext:
        return MethodContext(
            layer=layer_name,
            activations=captured.activations[layer_name],
            gradients=captured.gradients.get(layer_name),
            targets=captured.targets,
            logits=captured.logits,
            inputs=captured.batch,
            classifier=partial(cam_classifier, self.model, self.token_layout),
            logit_tolerance=1e-3 if self.autocast is None else 5e-2,
            checkpoint=checkpoint,
            masked=masked,
            cam_layers=self.cam_layers,
        )

    def _forward(self, batch: Tensor) -> Tensor:
        enabled = self.autocast is not None
        with torch.autocast(self.device.type, dtype=self.autocast, enabled=enabled):
            return class_logits(self.model(batch))

    def label_of(self, index: int) -> str:
        """The label of class ``index`` (its number when the engine has no labels)."""
        if self.labels is not None and 0 <= index < len(self.labels):
            return self.labels[index]
        return str(index)

    def class_index(self, target: int | str) -> int:
        """The class index for an index or a label (exact, then case-insensitive)."""
        return class_index(self.labels, target)
