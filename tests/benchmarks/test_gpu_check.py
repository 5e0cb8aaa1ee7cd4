"""benchmarks/gpu_check.sh --dry-run: the GPU check's own code path on CPU at tiny sizes, as
the lent machine would run it: through the shell script, with the packages that machine
lacks (Django, soundfile, the metrics and NLP toolkits) made unimportable, so a dependency
creeping into the check fails here rather than in a session's few minutes of GPU time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Not on the lent machine (a bare image with torch, numpy, scipy and torchaudio).
ABSENT = ("django", "soundfile", "pycocoevalcap", "spacy", "celery", "ninja", "nltk")
BLOCKER = f"""
import importlib.abc
import sys

ABSENT = {ABSENT!r}


class _Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ABSENT:
            raise ModuleNotFoundError(f"{{name}} is not on the GPU machine", name=name)
        return None


sys.meta_path.insert(0, _Absent())
"""


def _dry_run(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    site.mkdir()
    # every interpreter the check starts (its spawned corpus workers too) loads it
    (site / "sitecustomize.py").write_text(BLOCKER)
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "PYTHONPATH": str(site),
        "OMP_NUM_THREADS": "1",
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--dry-run", "--out", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_dry_run_trains_decodes_and_writes_the_table_without_django(tmp_path: Path) -> None:
    done = _dry_run(tmp_path)

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    table = (tmp_path / "gpu_check.md").read_text()
    assert table in done.stdout  # the same table on stdout
    assert table.startswith("dry run on CPU (tiny sizes; not GPU figures)")
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    assert rows[0] == "| what | figure | target | |"
    assert any(r.startswith("| ACT (tiny") and "< 60 s (H100)" in r for r in rows)
    assert any(r.startswith("| beam-3 decoding, 8 clips") and ">= 200 clips/s" in r for r in rows)
    assert any(r.startswith("| GPU utilisation while training") and ">= 80 %" in r for r in rows)
    figures = json.loads((tmp_path / "gpu_check.json").read_text())
    assert figures["corpus_clips"] == 24 + 8
    assert figures["caption_items"] == 2 * 24  # two captions per training clip
    assert figures["steps"] >= 1
    assert figures["decode_clips"] == 8
    assert figures["epoch_seconds"] > 0
    assert figures["gpu_util_train"] is None  # no GPU, no samples


def test_without_a_gpu_the_full_check_refuses_and_points_to_the_dry_run(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--out", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 2
    assert "no CUDA device here; --dry-run runs the same path on CPU" in done.stdout
    assert not (tmp_path / "gpu_check.md").exists()
