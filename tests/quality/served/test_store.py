"""Reports and reference maps kept on disk: read back as written, per model, version and key;
a missing or broken file reads as none (the report is computed again)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from camserve.quality.audit.drift import VersionMaps
from camserve.quality.served.store import ReportStore


def maps(version: str) -> VersionMaps:
    rng = np.random.default_rng(0)
    heat = rng.random((2, 8, 6)).astype(np.float16).astype(np.float32)
    return VersionMaps(
        version,
        ["a.jpg", "b/c.png"],
        [3, 1],
        {("gradcam++", "layer4"): heat, ("cam", "fused"): heat[:, ::-1].copy()},
    )


def test_a_report_and_its_maps_read_back_as_written(tmp_path: Path) -> None:
    store = ReportStore(tmp_path / "reports")
    written = maps("v1")
    store.save_maps("m", "k1", written)
    path = store.save_report("m", "v1", "k1", {"rows": [{"method": "gradcam", "road": 0.25}]})
    assert path == tmp_path / "reports" / "m" / "v1-k1" / "report.json"
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert store.load_report("m", "v1", "k1") == {"rows": [{"method": "gradcam", "road": 0.25}]}
    read = store.load_maps("m", "v1", "k1")
    assert read is not None
    assert (read.version, read.images, read.targets) == ("v1", ["a.jpg", "b/c.png"], [3, 1])
    assert set(read.maps) == set(written.maps)
    for pair, heat in written.maps.items():
        assert np.array_equal(read.maps[pair], heat)
        assert read.maps[pair].dtype == np.float32
    assert [file.name for file in path.parent.iterdir() if file.suffix == ".part"] == []


def test_another_key_or_version_finds_nothing(tmp_path: Path) -> None:
    store = ReportStore(tmp_path)
    store.save_maps("m", "k1", maps("v1"))
    store.save_report("m", "v1", "k1", {})
    assert store.load_report("m", "v1", "k2") is None
    assert store.load_report("m", "v2", "k1") is None
    assert store.load_maps("m", "v2", "k1") is None
    assert store.load_report("other", "v1", "k1") is None


def test_a_broken_file_reads_as_none(tmp_path: Path) -> None:
    store = ReportStore(tmp_path)
    folder = store.folder("m", "v1", "k1")
    folder.mkdir(parents=True)
    (folder / "report.json").write_text('{"rows": [')
    (folder / "maps.npz").write_bytes(b"not a zip")
    assert store.load_report("m", "v1", "k1") is None
    assert store.load_maps("m", "v1", "k1") is None
