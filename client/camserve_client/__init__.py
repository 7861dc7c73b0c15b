"""A Python client for a running camserve: ``Client`` (blocking) and ``AsyncClient`` (asyncio),
on httpx.

```python
from camserve_client import Client

with Client("http://127.0.0.1:8000", api_key=None) as client:
    result = client.explain("cat.jpg", methods=["gradcam", "layercam"], top_k=3)
    result.predictions[0].label
    result.explanation("gradcam").heatmap      # (height, width) uint8 numpy array
    result.explanation("gradcam").overlay      # PIL image
```

Images may be paths, encoded bytes, PIL images or uint8 numpy arrays. Errors are
``CamserveError`` subclasses carrying camserve's status, code and message; 429 and 503 are
retried after ``Retry-After``, a proxy's lost-replica 500/408 and a dropped connection once
(``RetryPolicy``). This package imports nothing else of camserve, and not torch.
"""

from importlib.metadata import PackageNotFoundError, version

from camserve_client.async_client import AsyncClient
from camserve_client.errors import (
    AuthenticationError,
    BadRequestError,
    CamserveError,
    ConnectionFailedError,
    DeadlineExceededError,
    InputError,
    InvalidParameterError,
    NotFoundError,
    PayloadTooLargeError,
    ProxyTimeoutError,
    QueueFullError,
    ServerError,
    UnavailableError,
    UnsupportedMediaTypeError,
)
from camserve_client.inputs import ImageInput
from camserve_client.options import CamOptions, ExplainOptions
from camserve_client.results import (
    Box,
    CamResult,
    Detection,
    ExplainResult,
    Explanation,
    ModelInfo,
    ModelList,
    Prediction,
    Segment,
    Timings,
)
from camserve_client.retry import RetryPolicy
from camserve_client.sync_client import Client

try:
    __version__ = version("camserve-client")
except PackageNotFoundError:  # sources on PYTHONPATH, not installed
    __version__ = "0+unknown"

__all__ = [
    "AsyncClient",
    "AuthenticationError",
    "BadRequestError",
    "Box",
    "CamOptions",
    "CamResult",
    "CamserveError",
    "Client",
    "ConnectionFailedError",
    "DeadlineExceededError",
    "Detection",
    "ExplainOptions",
    "ExplainResult",
    "Explanation",
    "ImageInput",
    "InputError",
    "InvalidParameterError",
    "ModelInfo",
    "ModelList",
    "NotFoundError",
    "PayloadTooLargeError",
    "Prediction",
    "ProxyTimeoutError",
    "QueueFullError",
    "RetryPolicy",
    "Segment",
    "ServerError",
    "Timings",
    "UnavailableError",
    "UnsupportedMediaTypeError",
    "__version__",
]
