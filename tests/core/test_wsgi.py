"""The WSGI entry point gunicorn loads: ready before its first request."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_it_loads_every_view_before_the_first_request(tmp_path: Path) -> None:
    # a fresh process, as a gunicorn worker booting: the URLconf and the views it names
    # are imported by loading the application, not left to the first request
    code = (
        "import sys, earmark.wsgi; "
        "print('earmark.urls' in sys.modules, 'annotation.views' in sys.modules)"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "earmark.settings_test",
        "EARMARK_VAR_DIR": str(tmp_path / "var"),
    }
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]
