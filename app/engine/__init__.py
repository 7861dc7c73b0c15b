"""The CAM engine: build from an ``nn.Module`` or a model name, explain batches of images.

Importable without FastAPI; the HTTP service, the CLI and the labeling adapters all use it.
"""

from app.engine.engine import CamEngine, CamMaps, Explanation
from app.engine.images.preprocess import Preprocessing
from app.engine.images.render import RenderedImage
from app.engine.methods import METHODS

__all__ = ["METHODS", "CamEngine", "CamMaps", "Explanation", "Preprocessing", "RenderedImage"]
