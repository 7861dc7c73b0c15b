"""The browser page: a form to upload an image and look at its heatmaps, served at ``/``."""
