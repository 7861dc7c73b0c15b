"""The body of ``GET /v1/models``: what each served model offers, and the models that failed."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ModelInfo", "ModelsResponse"]


class ModelInfo(BaseModel):
    """A served model as ``GET /v1/models`` describes it, read from its ``ServedModel``."""

    model_config = ConfigDict(from_attributes=True)

    name: str
    model_version: str = Field(
        validation_alias="version",
        description="The version that serves now: the first 12 hex digits of a SHA-256 over the "
        "manifest's fields and the bytes of its checkpoint and labels file.",
    )
    architecture: str
    task: Literal["classification", "detection", "segmentation"] = "classification"
    description: str
    weights: str
    num_classes: int
    labels: list[str]
    default_layer: str = Field(validation_alias="layer")
    default_method: str = Field(
        validation_alias="method", description="The method of a request that names none."
    )
    candidate_layers: list[str]
    methods: list[str]
    cam_layers: list[str] = Field(
        description="The layers at which `cam` answers: those that feed global average pooling "
        "and the linear classifier (on any other layer a request for `cam` gets a 422); empty "
        "for a detector or a segmenter."
    )
    input_size: tuple[int, int]
    device: str
    score_cam_seconds: dict[str, float] = Field(
        default_factory=dict,
        description="Score-CAM's estimated seconds for one image at each offered layer, from "
        "the model's measured masked-pass time on this device (a request whose estimate exceeds "
        "the deadline is refused at once with 422 over_deadline).",
    )
    load_error: str | None = Field(
        None,
        description="Why the last load of a new version failed, while this version serves on "
        "(null when the last load succeeded).",
    )


class ModelsResponse(BaseModel):
    models: list[ModelInfo] = Field(
        description="The served models, the default first, then the others in the order the "
        "default is chosen from (CAMSERVE_MODELS' order, then name order)."
    )
    default_model: str | None = Field(
        description="The model of a request that names none: CAMSERVE_DEFAULT_MODEL, else the "
        "first model of CAMSERVE_MODELS that serves, else the first in name order that serves "
        "(null while none serves)."
    )
    failed: dict[str, str] = Field(
        description="Models that could not be loaded and do not serve, with why."
    )
    request_timeout_s: float = Field(
        description="The server's deadline per request, in seconds (CAMSERVE_REQUEST_TIMEOUT_S): "
        "a request still unanswered then gets 504, and a Score-CAM request whose estimate "
        "(`score_cam_seconds` at its layer, less with `scorecam_channels`) exceeds it is "
        "refused at once with 422 over_deadline."
    )
    model_control: Literal["none", "explicit", "poll"] = Field(
        description="How the served models may change while the server runs "
        "(CAMSERVE_MODEL_CONTROL): none, explicit (through /v2/repository) or poll (the models "
        "folder is followed); a client that shows the list may list again under the last two."
    )
    poll_interval_s: float = Field(
        description="poll: seconds between two reads of the models folder "
        "(CAMSERVE_POLL_INTERVAL_S)."
    )
