"""camserve: CAM / Grad-CAM explanations of image classifiers as a service."""

__version__ = "0.1.0"
