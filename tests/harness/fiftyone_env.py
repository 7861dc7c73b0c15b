"""Real FiftyOne for camserve's tests and scripts, run from its own environment.

FiftyOne's pins clash with camserve's (constraints.txt), so it lives in ``.venv-fiftyone``
(``make .venv-fiftyone/.installed-stamp``, pinned by constraints-fiftyone.txt), with the mongod
of fiftyone-db 0.4.5 and, unpacked beside it, the OpenSSL 1.1 that mongod needs
(``tests/harness/fetch_libssl11.sh``). ``FiftyOne`` runs, from camserve's own environment:

* one ``mongod`` on 127.0.0.1, its database in a temporary folder, the OpenSSL 1.1 folder on
  its ``LD_LIBRARY_PATH`` (that process only), stopped when the ``FiftyOne`` is closed;
* ``tests.harness.fiftyone_driver`` in ``.venv-fiftyone``'s Python, connected to that mongod, with
  camserve's own site-packages after FiftyOne's (so it can import camserve's engine), and no
  telemetry. Jobs go to it as JSON lines on stdin and come back on stdout.

Two driver processes are used: a ``writer`` that makes datasets, and a ``reader`` that loads
them back, so what a test compares is what the database holds, not objects cached by the
process that wrote them. Typical use::

    with FiftyOne(locate_fiftyone(), work_dir) as fiftyone:
        loaded = fiftyone.load_json(Path("out/samples.json"), name="cams")
        loaded["samples"][0]["labels"]["cam_gradcam"]  # the Heatmap as FiftyOne loaded it
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.harness.live_server import LOOPBACK, ServerProcess, start_server

__all__ = [
    "DEFAULT_VENV",
    "INSTALL_HINT",
    "FiftyOne",
    "FiftyOneEnv",
    "FiftyOneJobError",
    "MongoServer",
    "fiftyone_required",
    "locate_fiftyone",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_VENV = REPO_ROOT / ".venv-fiftyone"
INSTALL_HINT = (
    "make .venv-fiftyone/.installed-stamp (pinned by constraints-fiftyone.txt), "
    "or point FIFTYONE_VENV at such an environment"
)
STOP_TIMEOUT_S = 60.0
MONGOD_CACHE_GB = "0.25"
"""WiredTiger's cache; its default is half of the machine's memory."""


class FiftyOneJobError(RuntimeError):
    """A job failed inside FiftyOne's environment, or its process died."""


@dataclass(frozen=True)
class FiftyOneEnv:
    """A FiftyOne environment made by the Makefile: a virtual environment holding fiftyone
    and fiftyone-db, and ``libssl1.1/`` inside it."""

    venv: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def mongod(self) -> Path:
        return _only(self.venv.glob("lib/python3*/site-packages/fiftyone/db/bin/mongod"))

    @property
    def openssl_libs(self) -> Path:
        """The folder of ``libcrypto.so.1.1`` and ``libssl.so.1.1``."""
        return _only(self.venv.glob("libssl1.1/usr/lib/*/libcrypto.so.1.1")).parent

    def is_complete(self) -> bool:
        try:
            return self.python.is_file() and self.mongod.is_file() and self.openssl_libs.is_dir()
        except FileNotFoundError:
            return False


def _only(paths: Iterable[Path]) -> Path:
    found = sorted(paths)
    if len(found) != 1:
        raise FileNotFoundError(f"expected one match, found {[str(p) for p in found]}")
    return found[0]


def locate_fiftyone(explicit: str | None = None) -> FiftyOneEnv | None:
    """The FiftyOne environment: ``explicit``, else ``$FIFTYONE_VENV``, else ``.venv-fiftyone``
    in this clone; None when it is not there or not complete."""
    named = explicit or os.environ.get("FIFTYONE_VENV")
    env = FiftyOneEnv(Path(named).absolute() if named else DEFAULT_VENV)
    return env if env.is_complete() else None


def fiftyone_required() -> bool:
    """Whether a missing FiftyOne environment is a failure rather than a reason to skip: in CI
    (``CI=true``), and when ``FIFTYONE_VENV`` names one (as ``make test`` does)."""
    return os.environ.get("CI", "").lower() == "true" or bool(os.environ.get("FIFTYONE_VENV"))


class MongoServer:
    """The mongod of ``env`` on 127.0.0.1 and a free port, its data in ``work_dir``, removed
    once it has stopped (its journal alone takes 300 MB); its log stays."""

    def __init__(self, env: FiftyOneEnv, work_dir: Path) -> None:
        self.data = data = work_dir / "mongo-data"
        data.mkdir(parents=True, exist_ok=True)
        mongod_env = {**os.environ, "LD_LIBRARY_PATH": str(env.openssl_libs)}

        def command(port: int) -> list[str]:
            return [
                *(str(env.mongod), "--dbpath", str(data), "--nounixsocket"),
                *("--bind_ip", LOOPBACK, "--port", str(port)),
                *("--wiredTigerCacheSizeGB", MONGOD_CACHE_GB),
                *("--setParameter", "diagnosticDataCollectionEnabled=false"),
            ]

        self.server: ServerProcess = start_server("mongod", command, mongod_env, work_dir)
        try:
            self.server.wait_until_listening()
        except BaseException:
            self.server.stop()
            shutil.rmtree(data, ignore_errors=True)
            raise

    @property
    def uri(self) -> str:
        return f"mongodb://{LOOPBACK}:{self.server.port}"

    @property
    def pid(self) -> int:
        return self.server.process.pid

    def stop(self) -> None:
        self.server.terminate()
        try:
            self.server.wait(STOP_TIMEOUT_S)
        finally:
            shutil.rmtree(self.data, ignore_errors=True)


class DriverProcess:
    """``tests.harness.fiftyone_driver`` in FiftyOne's environment; ``call`` runs one job."""

    def __init__(self, env: FiftyOneEnv, uri: str, work_dir: Path, name: str) -> None:
        self.name = name
        self.log_path = work_dir / f"{name}.log"
        child_env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("FIFTYONE_", "PYTHON", "VIRTUAL_ENV"))
        }
        child_env.update(
            {
                "PYTHONPATH": str(REPO_ROOT),
                "CAMSERVE_SITE_PACKAGES": os.pathsep.join(_site_packages()),
                "FIFTYONE_DATABASE_URI": uri,
                "FIFTYONE_DATABASE_DIR": str(work_dir / "unused-database-dir"),
                "FIFTYONE_CONFIG_PATH": str(work_dir / "no-config.json"),
                "FIFTYONE_DO_NOT_TRACK": "true",
                "FIFTYONE_SHOW_PROGRESS_BARS": "false",
                "OMP_NUM_THREADS": "1",
            }
        )
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [str(env.python), "-m", "tests.harness.fiftyone_driver"],
                cwd=REPO_ROOT,
                env=child_env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )

    def call(self, job: str, **arguments: Any) -> Any:
        """Run ``job`` (a name in ``tests.harness.fiftyone_driver.JOBS``) with ``arguments``; its
        JSON result. A failure raises ``FiftyOneJobError`` with the driver's traceback."""
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        try:
            self.process.stdin.write(json.dumps({"job": job, "arguments": arguments}) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # reported below, with the log
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(STOP_TIMEOUT_S)
            raise FiftyOneJobError(
                f"the FiftyOne {self.name} exited with {self.process.returncode}:\n{self.log()}"
            )
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise FiftyOneJobError(f"{job} failed in FiftyOne's environment:\n{answer['error']}")
        return answer["result"]

    def log(self, tail: int = 20_000) -> str:
        return self.log_path.read_text(errors="replace")[-tail:]

    def end_input(self) -> None:
        """Tells the driver that no more jobs come: it exits."""
        if self.process.stdin is not None:
            self.process.stdin.close()

    def close(self) -> None:
        """End of input, and the driver's exit; killed if it has not exited after
        ``STOP_TIMEOUT_S``."""
        self.end_input()
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def _site_packages() -> list[str]:
    """This environment's site-packages folders, for the driver to import camserve from."""
    return list(dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib")))


class FiftyOne:
    """A mongod and, started on first use, a writer and a reader driver (see the module's
    docstring); all of them stopped on ``close`` or at the end of a ``with`` block."""

    def __init__(self, env: FiftyOneEnv, work_dir: Path) -> None:
        self.env = env
        self.work_dir = work_dir
        self.mongo = MongoServer(env, work_dir)
        self._drivers: dict[str, DriverProcess] = {}

    def driver(self, name: str) -> DriverProcess:
        if name not in self._drivers:
            self._drivers[name] = DriverProcess(self.env, self.mongo.uri, self.work_dir, name)
        return self._drivers[name]

    @property
    def writer(self) -> DriverProcess:
        return self.driver("writer")

    @property
    def reader(self) -> DriverProcess:
        return self.driver("reader")

    def load(self, name: str) -> dict[str, Any]:
        """The dataset ``name`` as a fresh process loads it from the database (``dump`` in
        tests.harness.fiftyone_driver describes the result)."""
        loaded: dict[str, Any] = self.reader.call("dump", name=name)
        return loaded

    def load_json(self, samples_json: Path, name: str) -> dict[str, Any]:
        """``fiftyone.Dataset.from_json(samples_json, name=name)`` in the writer, then the
        dataset as the reader loads it back."""
        self.writer.call("load_json", path=str(samples_json), name=name)
        return self.load(name)

    def close(self) -> None:
        try:
            for driver in self._drivers.values():  # all of them start exiting at once
                driver.end_input()
            for driver in self._drivers.values():
                driver.close()
        finally:
            self.mongo.stop()

    def __enter__(self) -> FiftyOne:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
