"""Approved and imported captions, a fake LanguageTool on 127.0.0.1, and no real one."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from annotation.models import Assignment, Caption, Hit
from core.models import Project
from curation.models import Split, Subset, SubsetClip
from postprocessing import languagetool
from tests.annotation.factories import make_clips, make_subset, publish
from tests.postprocessing.lt_server import FakeLanguageTool, fake_languagetool

JAVA_SOURCE = Path(__file__).parent / "java"


@pytest.fixture(autouse=True)
def no_languagetool(
    settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Nothing reachable unless a test sets one up: no URL, no install, an empty cache."""
    settings.LANGUAGETOOL_URL = ""
    settings.LTP_JAR_DIR_PATH = ""
    settings.LANGUAGETOOL_DOWNLOAD = False
    cache = tmp_path / "ltp-cache"
    cache.mkdir()
    monkeypatch.setenv("LTP_PATH", str(cache))
    monkeypatch.setenv("LTP_JAR_DIR_PATH", "")  # restored after: the client may set it
    yield
    languagetool.stop_local_servers()


@pytest.fixture
def lt_server(settings: Any) -> Iterator[FakeLanguageTool]:
    """A fake LanguageTool server; settings point at it."""
    with fake_languagetool() as server:
        settings.LANGUAGETOOL_URL = server.url
        yield server


@pytest.fixture(scope="session")
def lt_jar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder LanguageTool-6.8 holding languagetool-server.jar, built from the Java
    stand-in in tests/postprocessing/java (skips without a JDK)."""
    if not (shutil.which("javac") and shutil.which("jar")):
        pytest.skip("javac/jar not found: the local-server tests need a JDK")
    root = tmp_path_factory.mktemp("lt")
    classes = root / "classes"
    source = JAVA_SOURCE / "org" / "languagetool" / "server" / "HTTPServer.java"
    subprocess.run(["javac", "-d", str(classes), str(source)], check=True, timeout=120)
    install = root / "LanguageTool-6.8"
    install.mkdir()
    jar = install / "languagetool-server.jar"
    subprocess.run(["jar", "cf", str(jar), "-C", str(classes), "."], check=True, timeout=60)
    return install


MakeCaption = Callable[..., Caption]


@pytest.fixture
def approved(project: Project, ann: Any) -> MakeCaption:
    """approved("text", state="approved"): a crowd caption of the project by Ann, its
    assignment in `state` (one clip per HIT)."""

    def make(text: str, *, state: str = Assignment.State.APPROVED, worker: Any = ann) -> Caption:
        subset = make_subset(project, make_clips(1))
        batch = publish(subset, captions_per_clip=1)
        hit = Hit.objects.get(batch=batch)
        now = timezone.now()
        assignment = Assignment.objects.create(
            hit=hit,
            worker=worker,
            state=state,
            accepted_at=now - timedelta(minutes=5),
            deadline=now + timedelta(minutes=25),
            submitted_at=None if state == Assignment.State.ACCEPTED else now,
        )
        Hit.objects.filter(pk=hit.pk).update(taken=1)
        return Caption.objects.create(
            assignment=assignment, clip=hit.clips.get(), text=text, created_at=now
        )

    return make


@pytest.fixture
def imported(project: Project) -> MakeCaption:
    """imported("text", project=…): an imported caption of a clip in the project's corpus subset."""

    def make(text: str, *, into: Project = project) -> Caption:
        subset, _ = Subset.objects.get_or_create(
            project=into, slug="corpus", defaults={"name": "Corpus"}
        )
        clip = make_clips(1)[0]
        SubsetClip.objects.create(subset=subset, clip=clip, split=Split.TRAIN)
        return Caption.objects.create(
            provenance=Caption.Provenance.IMPORTED,
            imported_into=into,
            clip=clip,
            text=text,
            external_id=f"ext-{clip.pk}",
        )

    return make
