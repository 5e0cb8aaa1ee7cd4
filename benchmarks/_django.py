"""Set up Django on a throwaway var dir (fresh SQLite unless DATABASE_URL is set)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"


def setup() -> Path:
    sys.path.insert(0, str(ROOT))
    var = Path(tempfile.mkdtemp(prefix="earmark-bench-"))
    os.environ.setdefault("EARMARK_VAR_DIR", str(var))
    os.environ.setdefault("DEBUG", "1")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "earmark.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    return var
