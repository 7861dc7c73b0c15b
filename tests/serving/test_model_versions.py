"""Model versions: derived from the manifest's fields and the bytes of its checkpoint and labels
file, and nothing else."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from camserve.engine.models.manifest import load_manifest
from camserve.serving.model_versions import ModelVersions
from tests.model_folders import manifest_text, write_checkpoint, write_manifest, write_whole


def version(path: Path, versions: ModelVersions | None = None) -> str:
    return (versions or ModelVersions()).version_of(load_manifest(path))


def test_a_version_is_twelve_hex_digits_and_the_same_for_the_same_files(tmp_path: Path) -> None:
    write_checkpoint(tmp_path / "a.pt", seed=1)
    manifest = write_manifest(tmp_path, "m", "a.pt")
    first = version(manifest)
    assert len(first) == 12
    assert int(first, 16) >= 0
    assert version(manifest) == first
    copy = shutil.copytree(tmp_path, tmp_path.parent / "copy")
    assert version(copy / "m.toml") == first  # no path enters it: another folder, same version


def test_comments_and_the_order_of_fields_leave_the_version_alone(tmp_path: Path) -> None:
    write_checkpoint(tmp_path / "a.pt", seed=1)
    manifest = write_manifest(tmp_path, "m", "a.pt")
    before = version(manifest)
    lines = manifest.read_text().splitlines()
    write_whole(manifest, "# a comment\n" + "\n".join(reversed(lines)) + "\n")
    assert version(manifest) == before


def test_a_field_the_checkpoint_and_the_labels_file_each_change_it(tmp_path: Path) -> None:
    write_checkpoint(tmp_path / "a.pt", seed=1)
    write_checkpoint(tmp_path / "b.pt", seed=2)
    manifest = write_manifest(tmp_path, "m", "a.pt")
    seen = [version(manifest)]
    write_manifest(tmp_path, "m", "a.pt", input_size=48)
    seen.append(version(manifest))
    write_manifest(tmp_path, "m", "b.pt")
    seen.append(version(manifest))
    (tmp_path / "labels.txt").write_text("one\ntwo\nthree\nfour\nfive\n")
    text = manifest_text("m", "b.pt").replace("labels = [", 'labels = "labels.txt"\n# [')
    write_whole(manifest, text)
    seen.append(version(manifest))
    (tmp_path / "labels.txt").write_text("uno\ndos\ntres\ncuatro\ncinco\n")
    seen.append(version(manifest))
    assert len(set(seen)) == len(seen), seen


def test_a_checkpoint_rewritten_in_place_is_read_again(tmp_path: Path) -> None:
    """The digest cache keys on size, mtime and inode: a rewrite is seen, an unchanged file is
    not read twice."""
    versions = ModelVersions()
    checkpoint = write_checkpoint(tmp_path / "a.pt", seed=1)
    manifest = write_manifest(tmp_path, "m", "a.pt")
    first = version(manifest, versions)
    write_checkpoint(checkpoint, seed=2)
    second = version(manifest, versions)
    assert second != first
    write_checkpoint(checkpoint, seed=1)
    assert version(manifest, versions) == first


def test_a_missing_checkpoint_still_has_a_version_that_changes_when_it_appears(
    tmp_path: Path,
) -> None:
    manifest = write_manifest(tmp_path, "m", "later.pt")
    missing = version(manifest)
    write_checkpoint(tmp_path / "later.pt", seed=1)
    assert version(manifest) != missing
    os.remove(tmp_path / "later.pt")
    assert version(manifest) == missing


def test_random_weights_are_named_by_the_manifest_alone(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, "m", "random")
    other = write_manifest(tmp_path, "n", "random")
    assert version(manifest) != version(other)  # seeded from the name, which differs
