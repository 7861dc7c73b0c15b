"""Checks before a release: ``make image-check`` builds camserve's Docker image with rootful
podman, runs it and checks it as a user would (``image_check.py``, with the requests of
``image_check_requests.py``)."""
