"""Packaging: the wheel `pip install .` builds holds everything an installed Earmark runs on.

Every first-party package (each own INSTALLED_APPS app, synthscenes), the root templates/ and
static/ (carried inside earmark/, see setup.py) and the data files apps read at run time; and
an installed copy, outside the checkout, passes `manage.py check` and finds its templates,
static files and demo data.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[1]
# Never packaged: test and benchmark code, and what a checkout accumulates while in use.
NOT_SHIPPED = {"tests", "benchmarks", "var", "build", "dist", "node_modules", "__pycache__"}


def _source_ignore(folder: str, names: list[str]) -> set[str]:
    at_root = Path(folder) == ROOT
    return {
        name
        for name in names
        if (at_root and name in NOT_SHIPPED)
        or name in {"__pycache__", "build"}
        or name.startswith(".")
        or name.endswith(".egg-info")
    }


def _package_files(package: Path) -> Iterator[str]:
    """The files under a package folder, as wheel paths (bytecode and dot-files aside)."""
    for path in sorted(package.rglob("*")):
        relative = path.relative_to(ROOT)
        hidden = any(part == "__pycache__" or part.startswith(".") for part in relative.parts)
        if path.is_file() and not hidden and path.suffix not in {".pyc", ".pyo"}:
            yield relative.as_posix()


def _first_party_packages() -> list[str]:
    """Own INSTALLED_APPS packages plus every other importable package at the root."""
    apps = {app.split(".")[0] for app in settings.INSTALLED_APPS}
    own_apps = {app for app in apps if (ROOT / app / "__init__.py").is_file()}
    at_root = {
        path.parent.name
        for path in ROOT.glob("*/__init__.py")
        if path.parent.name not in NOT_SHIPPED
    }
    return sorted(own_apps | at_root)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Build from a copy so setuptools' build/ and egg-info never land in the checkout.
    source = tmp_path_factory.mktemp("source")
    shutil.copytree(ROOT, source, ignore=_source_ignore, dirs_exist_ok=True)
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
         "--no-index", "--disable-pip-version-check", "-q", "-w", str(out)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert build.returncode == 0, build.stdout + build.stderr
    (built,) = out.glob("earmark-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel_names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def test_it_ships_every_first_party_package(wheel_names: set[str]) -> None:
    packages = _first_party_packages()
    assert {"earmark", "core", "curation", "active"} <= set(packages)
    missing = [
        name
        for package in packages
        for name in _package_files(ROOT / package)
        if name not in wheel_names
    ]
    assert missing == []


def test_it_ships_the_runtime_data_files(wheel_names: set[str]) -> None:
    fixtures = [
        name
        for package in _first_party_packages()
        for name in _package_files(ROOT / package)
        if "/fixtures/" in name
    ]
    assert "curation/fixtures/audioset_ontology_excerpt.json" in fixtures
    assert "curation/fixtures/word_labels_demo.csv" in fixtures
    assert set(fixtures) <= wheel_names


@pytest.mark.parametrize("folder", ["templates", "static"])
def test_it_ships_the_site_folders_inside_earmark(wheel_names: set[str], folder: str) -> None:
    files = [
        f"earmark/{path.relative_to(ROOT).as_posix()}"
        for path in (ROOT / folder).rglob("*")
        if path.is_file()
    ]
    assert f"earmark/{folder}/" + ("base.html" if folder == "templates" else "earmark.css") in files
    assert set(files) <= wheel_names


def test_it_leaves_tests_and_benchmarks_out(wheel_names: set[str]) -> None:
    assert not {name for name in wheel_names if name.split("/")[0] in NOT_SHIPPED}


INSTALLED_PROBE = """
import django
from django.conf import settings
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.template.loader import get_template

django.setup()
call_command("check")
import earmark
print(earmark.__file__)
print(get_template("base.html").origin.name)
print(get_template("core/home.html").origin.name)
print(finders.find("earmark.css"))
print((settings.BASE_DIR / "curation" / "fixtures" / "audioset_ontology_excerpt.json").is_file())
"""


def test_it_runs_installed_outside_the_checkout(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
         "--disable-pip-version-check", "--target", str(site), str(wheel)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    # The wheel's copy comes first on the path; the test environment's packages (Django,
    # torch, …) after it. The checkout is not on the path: the probe runs elsewhere.
    run_dir = tmp_path / "elsewhere"
    run_dir.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(site),
        "DJANGO_SETTINGS_MODULE": "earmark.settings_test",
        "EARMARK_VAR_DIR": str(tmp_path / "var"),
    }
    probe = subprocess.run(
        [sys.executable, "-c", INSTALLED_PROBE],
        cwd=run_dir, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stdout + probe.stderr
    package, base, home, css, demo_data = probe.stdout.strip().splitlines()[-5:]
    assert Path(package).is_relative_to(site)
    assert Path(base) == site / "earmark" / "templates" / "base.html"
    assert Path(home) == site / "earmark" / "templates" / "core" / "home.html"
    assert Path(css) == site / "earmark" / "static" / "earmark.css"
    assert demo_data == "True"


def test_an_installed_copy_keeps_its_state_under_the_working_folder(
    wheel: Path, tmp_path: Path
) -> None:
    """Without EARMARK_VAR_DIR an installed copy writes var/ where it runs, never into
    site-packages (a checkout keeps var/ beside manage.py)."""
    site = tmp_path / "site-packages"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
         "--disable-pip-version-check", "--target", str(site), str(wheel)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    run_dir = tmp_path / "elsewhere"
    run_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("EARMARK_VAR_DIR", "MEDIA_ROOT")}
    env |= {"PYTHONPATH": str(site), "DJANGO_SETTINGS_MODULE": "earmark.settings_test"}
    probe = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; print(settings.VAR_DIR)"],
        cwd=run_dir, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stdout + probe.stderr
    assert Path(probe.stdout.strip().splitlines()[-1]) == (run_dir / "var").resolve()
