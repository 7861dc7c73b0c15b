"""The parts of scripts/release/image_check.py that need no container engine: how this machine's pip
configuration is handed to the build, and the models folder that the container mounts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from camserve.engine.models.manifest_folder import load_manifests
from scripts.release import image_check


def test_pip_settings_are_read_as_pip_config_list_prints_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    listed = "\n".join(
        [
            ":env:.find-links='/opt/wheels'",
            "global.extra-index-url='file:///srv/a/simple file:///srv/b/simple'",
            "global.find-links='/elsewhere'",
            "global.cert='/etc/ssl/certs/ca-certificates.crt'",
        ]
    )
    monkeypatch.setattr(image_check, "run", lambda *_args, **_kwargs: listed)
    assert image_check.pip_settings() == {
        "find-links": "/elsewhere",
        "extra-index-url": "file:///srv/a/simple file:///srv/b/simple",
        "cert": "/etc/ssl/certs/ca-certificates.crt",
    }


def test_a_file_index_is_mounted_with_the_folder_that_holds_its_files(tmp_path: Path) -> None:
    """A local index's pages link to ../../files/...: the folder above ``simple`` goes in."""
    (tmp_path / "pypi" / "simple").mkdir(parents=True)
    (tmp_path / "wheels").mkdir()
    value = f"file://{tmp_path}/pypi/simple https://example.invalid/simple file:///missing/simple"
    assert image_check.local_paths(value) == [str(tmp_path / "pypi")]
    assert image_check.local_paths(str(tmp_path / "wheels")) == [str(tmp_path / "wheels")]
    assert image_check.local_paths("180") == []


def test_the_build_gets_the_settings_as_etc_pip_conf_and_read_only_mounts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pypi" / "simple").mkdir(parents=True)
    settings = {"extra-index-url": f"file://{tmp_path}/pypi/simple", "default-timeout": "180"}
    monkeypatch.setattr(image_check, "pip_settings", lambda: settings)
    options = image_check.pip_build_volumes(tmp_path)
    assert options == [
        "-v",
        f"{tmp_path / 'pip.conf'}:/etc/pip.conf:ro",
        "-v",
        f"{tmp_path / 'pypi'}:{tmp_path / 'pypi'}:ro",
    ]
    assert (tmp_path / "pip.conf").read_text() == (
        f"[global]\nextra-index-url = file://{tmp_path}/pypi/simple\ndefault-timeout = 180\n"
    )


def test_the_mounted_models_folder_holds_a_model_the_image_lacks(tmp_path: Path) -> None:
    folder = image_check.mounted_models(tmp_path)
    names = sorted(spec.name for spec in load_manifests(folder))
    assert names == ["efficientnet_lite0", image_check.MOUNTED_MODEL]
    shipped = sorted(spec.name for spec in load_manifests(image_check.ROOT / "models"))
    assert image_check.MOUNTED_MODEL not in shipped


def test_without_debootstrap_the_check_prints_the_install_line_of_the_docs(tmp_path: Path) -> None:
    """podman and runc found (stand-ins that must not run), debootstrap not: one line that names
    what is missing and the docs' install line, exit status 1, no traceback."""
    for tool in ("podman", "runc"):
        stand_in = tmp_path / tool
        stand_in.write_text("#!/bin/sh\nexit 99\n")
        stand_in.chmod(0o755)
    result = subprocess.run(
        [sys.executable, "-m", "scripts.release.image_check", "--no-compose"],
        cwd=image_check.ROOT,
        env={**os.environ, "PATH": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        "image-check needs debootstrap, not found on PATH; install with: "
        "apt-get install podman runc debootstrap (docs/deploy.md)\n"
    )
    assert f"`{image_check.INSTALL_LINE}`" in (image_check.ROOT / "docs/deploy.md").read_text()


def test_with_a_base_image_debootstrap_is_not_needed(tmp_path: Path) -> None:
    for tool in ("podman", "runc"):
        (tmp_path / tool).write_text("#!/bin/sh\n")
        (tmp_path / tool).chmod(0o755)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", str(tmp_path))
        assert image_check.missing_tools(made_base=False) == []
        assert image_check.missing_tools(made_base=True) == ["debootstrap"]
