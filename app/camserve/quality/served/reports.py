"""Each served version's explanation report, computed in the background and kept on disk.

The batching worker tells this object (a ``VersionObserver``) of every version it makes current,
at start and on each reload. Each new version gets a report (a classifier's, a segmenter's or a
detector's: ``camserve.quality.audit.subjects``): one thread, the
reports' own, takes the versions in turn, reads the reference images (``reference_images.py``),
and either finds the report of the same version and images on disk (``store.py``: a
restart computes nothing again) or computes it (``plan.py``: the CLI's report, made
cheap), every pass through the worker as low-priority units (``worker_passes.py``). A version
replaced or removed meanwhile stops at its next unit.

On a reload, the new version's maps of the reference images are compared with the old one's
(``camserve.quality.audit.drift``) as soon as they are computed: in the report's ``drift``, in a log
line and as Prometheus gauges at the model's default layer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from camserve.config import Settings
from camserve.engine.errors import CamserveError
from camserve.quality.audit.drift import Drift, VersionMaps, compare_versions, version_maps
from camserve.quality.audit.reference import ReferenceMaps, reference_maps
from camserve.quality.audit.report_json import audit_json
from camserve.quality.audit.run import AuditSettings, run_audit
from camserve.quality.audit.subjects import AuditedModel, audited
from camserve.quality.served.plan import UNIT_IMAGES, report_key, served_settings
from camserve.quality.served.reference_images import (
    ReferenceImages,
    load_reference_images,
    reference_folder_of,
)
from camserve.quality.served.states import ReportState, VersionReport
from camserve.quality.served.store import ReportStore, default_report_dir
from camserve.quality.served.worker_passes import ReportCancelledError, WorkerPasses
from camserve.serving.errors import ReportsOffError
from camserve.serving.idle_work import lower_this_thread
from camserve.serving.live_versions import LiveVersion
from camserve.serving.prometheus import Metrics
from camserve.serving.served_model import ServedModel
from camserve.serving.worker import BatchingWorker

__all__ = ["ExplanationReports"]

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class _Job:
    report: VersionReport
    live: LiveVersion
    previous: LiveVersion | None
    """The version this one replaced, until drift has read its maps."""


@dataclass(frozen=True)
class _Plan:
    """What one job computes on: the audited model, what is served of it, settings, images and
    key."""

    subject: AuditedModel
    model: ServedModel
    settings: AuditSettings
    images: ReferenceImages
    key: str


class ExplanationReports:
    """The reports of the versions ``worker`` serves (none when ``settings.audit`` is off)."""

    def __init__(self, settings: Settings, worker: BatchingWorker, metrics: Metrics) -> None:
        self.enabled = settings.audit
        self._store = ReportStore(settings.audit_dir or default_report_dir())
        self._max_images = settings.audit_max_images
        self._seeds = settings.audit_seeds
        self._worker = worker
        self._metrics = metrics
        self._lock = threading.Condition()
        self._reports: dict[str, VersionReport] = {}
        """Each served model's current version's report."""
        self._kept_maps: dict[tuple[str, str], str] = {}
        """(model, version) to the key its reference maps are kept under on disk."""
        self._jobs: deque[_Job] = deque()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="camserve-reports", daemon=True)
        if self.enabled:
            worker.version_announcer.observer = self

    # ------------------------------------------------------------------ any thread

    def start(self) -> None:
        if self.enabled:
            self._thread.start()

    def stop(self, timeout: float) -> None:
        """Stop after the unit under way (the worker's stop cancels the units that wait)."""
        with self._lock:
            self._stopping = True
            self._lock.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def report_of(self, model: ServedModel) -> dict[str, Any]:
        """The report of ``model``'s current version as the route answers it."""
        if not self.enabled:
            raise ReportsOffError(
                "explanation reports are off on this server (CAMSERVE_AUDIT=false)"
            )
        with self._lock:
            report = self._reports.get(model.name)
            if report is None:  # published, not yet handed over by the worker
                report = VersionReport(model.name, model.version)
            return report.as_json()

    def installed(self, name: str, live: LiveVersion, previous: LiveVersion | None) -> None:
        """The worker serves ``live`` now: its report is queued (the one of the version it
        replaces, if still queued or running, stops)."""
        report = VersionReport(name, live.version)
        if live.model is None:
            report.state = ReportState.UNSUPPORTED
            report.message = "a bare engine, served under no manifest, has no report"
        with self._lock:
            self._reports[name] = report
            self._drop_queued(name)
            if report.state is ReportState.QUEUED:
                self._jobs.append(_Job(report, live, previous))
                self._lock.notify_all()

    def removed(self, name: str) -> None:
        with self._lock:
            self._reports.pop(name, None)
            self._drop_queued(name)
            self._metrics.forget_drift(name)

    def _drop_queued(self, name: str) -> None:
        """Forget the queued report of ``name`` (call with the lock held)."""
        for job in [job for job in self._jobs if job.report.model == name]:
            self._jobs.remove(job)

    # ------------------------------------------------------------------ the reports' thread

    def _run(self) -> None:
        # No torch.set_num_threads here: torch's thread count is the process's, so one thread
        # for the report was one thread for every request (a Score-CAM took 1.6 times as long).
        # Its passes and imputations run on the worker; the rest gets what the requests leave.
        lower_this_thread()
        while (job := self._next_job()) is not None:
            try:
                self._compute(job)
            except ReportCancelledError:
                logger.info(
                    "model %s version %s: report stopped (replaced, removed or shutting down)",
                    job.report.model,
                    job.report.version,
                )
            except Exception as error:
                self._failed(job, error)
            finally:
                job.previous = None

    def _next_job(self) -> _Job | None:
        with self._lock:
            while not self._jobs and not self._stopping:
                self._lock.wait()
            if self._stopping:
                return None
            return self._jobs.popleft()

    def _wanted(self, job: _Job) -> Callable[[], bool]:
        def wanted() -> bool:
            with self._lock:
                return not self._stopping and self._reports.get(job.report.model) is job.report

        return wanted

    def _compute(self, job: _Job) -> None:
        started = time.perf_counter()
        report = job.report
        plan = self._plan(job)
        self._update(report, state=ReportState.RUNNING, key=plan.key, stage="reference images")
        passes = WorkerPasses(self._worker, UNIT_IMAGES, self._wanted(job))
        kept = self._store.load_report(report.model, report.version, plan.key)
        maps = self._store.load_maps(report.model, report.version, plan.key)
        if kept is not None and maps is not None:
            self._remember_maps(report, plan.key)
            self._compare(job, plan, maps, passes)
            self._metrics.reports.labels("reused").inc()
            self._ready(report, kept, started, reused=True)
            return

        def on_reference(reference: ReferenceMaps) -> None:
            new = version_maps(report.version, reference.images, reference.targets, reference.maps)
            self._store.save_maps(report.model, plan.key, new)
            self._remember_maps(report, plan.key)
            self._compare(job, plan, new, passes)

        audit = run_audit(
            plan.subject,
            plan.images.samples,
            plan.settings,
            model=report.model,
            version=report.version,
            passes=passes,
            on_progress=lambda stage, done: self._update(report, stage=stage, progress=done),
            on_reference=on_reference,
        )
        body = audit_json(audit)
        self._store.save_report(report.model, report.version, plan.key, body)
        self._metrics.reports.labels("computed").inc()
        self._ready(report, body, started, reused=False)

    def _plan(self, job: _Job) -> _Plan:
        subject, model = audited(job.live.explainer), job.live.model
        assert model is not None  # installed() queues no bare engine
        settings = served_settings(subject, model, self._seeds)
        folder = reference_folder_of(model.name, model.reference_images)
        images = load_reference_images(folder, self._max_images)
        return _Plan(subject, model, settings, images, report_key(model.version, settings, images))

    def _remember_maps(self, report: VersionReport, key: str) -> None:
        with self._lock:
            self._kept_maps[(report.model, report.version)] = key

    def _compare(self, job: _Job, plan: _Plan, new: VersionMaps, passes: WorkerPasses) -> None:
        """Drift against the replaced version, if any: from its kept maps, else computed now
        with its engine (which the worker may have dropped already: the job still holds it)."""
        previous, job.previous = job.previous, None
        if previous is None or previous.version == new.version:
            return
        old = self._previous_maps(previous, plan, passes)
        if old is None:
            return
        drift = compare_versions(old, new)
        self._update(job.report, drift=drift.as_json())
        if self._wanted(job)():  # not removed meanwhile: its gauges were dropped
            self._announce(plan.model, drift)

    def _previous_maps(
        self, previous: LiveVersion, plan: _Plan, passes: WorkerPasses
    ) -> VersionMaps | None:
        name = plan.model.name
        with self._lock:
            key = self._kept_maps.get((name, previous.version))
        if key is not None and (kept := self._store.load_maps(name, previous.version, key)):
            return kept
        try:
            old = reference_maps(
                audited(previous.explainer),
                plan.images.samples,
                plan.settings.methods,
                plan.settings.layers,
                passes,
            )
        except CamserveError as error:  # the old version lacks a layer or method of the new
            logger.warning(
                "model %s: no drift against version %s: %s", name, previous.version, error
            )
            return None
        return version_maps(previous.version, old.images, old.targets, old.maps)

    def _announce(self, model: ServedModel, drift: Drift) -> None:
        layers = {pair.layer for pair in drift.pairs}
        layer = model.layer if model.layer in layers else next(iter(sorted(layers)), model.layer)
        with self._lock:
            self._metrics.forget_drift(model.name)
            for pair in drift.pairs:
                if pair.layer == layer:
                    self._metrics.set_drift(
                        model.name, pair.method, pair.moved_ratio, pair.mean_spearman
                    )
        logger.info(
            "model %s reloaded (version %s -> %s): %s",
            model.name,
            drift.previous_version,
            drift.version,
            drift.sentence(layer),
        )

    def _ready(
        self, report: VersionReport, body: dict[str, Any], started: float, *, reused: bool
    ) -> None:
        seconds = time.perf_counter() - started
        rows = body.get("rows") or []
        passed = sum(1 for row in rows if row["sanity"]["passed"])
        how = "found on disk" if reused else "computed"
        self._update(
            report,
            state=ReportState.READY,
            progress=1.0,
            stage=how,
            report=body,
            reused=reused,
            seconds=seconds,
        )
        logger.info(
            "model %s version %s: explanation report %s in %.1f s (%d of %d method and layer "
            "pairs pass the sanity check)",
            report.model,
            report.version,
            how,
            seconds,
            passed,
            len(rows),
        )

    def _failed(self, job: _Job, error: Exception) -> None:
        report = job.report
        if isinstance(error, CamserveError):
            message = str(error)
            logger.warning("model %s version %s: report failed: %s", *_named(report), message)
        else:
            message = f"{type(error).__name__}: {error}"
            logger.exception("model %s version %s: report failed", *_named(report))
        self._metrics.reports.labels("failed").inc()
        self._update(report, state=ReportState.FAILED, message=message)

    def _update(self, entry: VersionReport, **changes: object) -> None:
        with self._lock:
            for name, value in changes.items():
                setattr(entry, name, value)


def _named(report: VersionReport) -> tuple[str, str]:
    return report.model, report.version
