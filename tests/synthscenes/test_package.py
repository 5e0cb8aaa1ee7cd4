"""The synthscenes package: a data generator that runs without Django or PyTorch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_it_imports_neither_django_nor_torch() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, synthscenes; print(*sorted(sys.modules))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert not [m for m in loaded if m.split(".")[0] in ("django", "torch")]
