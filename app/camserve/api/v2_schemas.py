"""Bodies of the Open Inference Protocol (KServe V2) REST routes: the inference request as
received, and the metadata, health and error answers (they also make the OpenAPI docs)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "InferenceRequest",
    "InferenceResponse",
    "ModelMetadata",
    "Parameter",
    "ProtocolError",
    "RequestInput",
    "RequestOutput",
    "ResponseOutput",
    "ServerLive",
    "ServerMetadata",
    "ServerReady",
    "TensorMetadata",
]

Parameter = bool | int | float | str
"""A protocol parameter's value."""


class RequestInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    shape: list[int]
    datatype: str
    parameters: dict[str, Parameter] = Field(default_factory=dict)
    data: list[Any] | None = Field(
        None, description="The tensor's elements in JSON; absent when they come as binary data."
    )


class RequestOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    parameters: dict[str, Parameter] = Field(default_factory=dict)


class InferenceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    parameters: dict[str, Parameter] = Field(default_factory=dict)
    inputs: list[RequestInput] = Field(min_length=1)
    outputs: list[RequestOutput] | None = None
    model_name: str | None = Field(
        None, description="Not in the protocol; KServe's client sends it. Must match the path."
    )
    model_version: str | None = Field(None, description="As model_name.")


class ResponseOutput(BaseModel):
    name: str
    datatype: str
    shape: list[int]
    parameters: dict[str, Parameter] | None = Field(
        None, description='{"binary_data_size": n} for an output sent as binary data.'
    )
    data: list[Any] | None = Field(
        None, description="The elements, flat in row-major order, for an output sent in JSON."
    )


class InferenceResponse(BaseModel):
    model_name: str
    model_version: str
    id: str | None = None
    outputs: list[ResponseOutput]


class TensorMetadata(BaseModel):
    name: str
    datatype: str
    shape: list[int] = Field(description="-1 for a dimension whose size varies.")


class ServerMetadata(BaseModel):
    name: str
    version: str
    extensions: list[str]


class ModelMetadata(BaseModel):
    name: str
    versions: list[str]
    platform: str
    inputs: list[TensorMetadata]
    outputs: list[TensorMetadata]


class ServerLive(BaseModel):
    live: bool


class ServerReady(BaseModel):
    ready: bool


class ProtocolError(BaseModel):
    error: str
