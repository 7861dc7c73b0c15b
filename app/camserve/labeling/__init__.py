"""Labeling-tool integration: CAM regions as boxes, polygons and masks; adapters."""
