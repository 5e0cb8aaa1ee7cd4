"""Personas and shared fixtures.

Alice researches the "sounds" project; Rey reviews it; Ann and Abe annotate it.
Olive is an outsider: a researcher on another project, who must see nothing of Alice's.
"""

from __future__ import annotations

import io
import json
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection
from django.http import HttpResponseBase, StreamingHttpResponse
from django.test import Client

from core.models import Project, Role
from core.services import membership_add, project_create

PASSWORD = "correct-horse-battery"
FIXTURES = Path(__file__).parent / "fixtures"
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
ONTOLOGY_EXCERPT = (
    Path(__file__).resolve().parents[1] / "curation" / "fixtures" / "audioset_ontology_excerpt.json"
)


@pytest.fixture(autouse=True)
def _empty_cache() -> None:
    """Each test starts with an empty cache: API rate-limit counts and cached health probes
    live there, and a per-process cache (locmem) would carry them from test to test."""
    cache.clear()


def make_user(username: str, **extra: Any) -> User:
    return get_user_model().objects.create_user(username=username, password=PASSWORD, **extra)


@pytest.fixture
def alice(db: None) -> User:
    return make_user("alice")


@pytest.fixture
def rey(db: None) -> User:
    return make_user("rey")


@pytest.fixture
def ann(db: None) -> User:
    return make_user("ann")


@pytest.fixture
def abe(db: None) -> User:
    return make_user("abe")


@pytest.fixture
def olive(db: None) -> User:
    user = make_user("olive")
    project_create(name="Olive's birds", slug="birds", created_by=user)
    return user


@pytest.fixture
def staff(db: None) -> User:
    return make_user("stella", is_staff=True, is_superuser=True)


@pytest.fixture
def project(alice: User, rey: User, ann: User, abe: User) -> Project:
    project = project_create(name="Everyday sounds", slug="sounds", created_by=alice)
    membership_add(project=project, user=rey, role=Role.REVIEWER)
    membership_add(project=project, user=ann, role=Role.ANNOTATOR)
    membership_add(project=project, user=abe, role=Role.ANNOTATOR)
    return project


def wav_bytes(seconds: float = 0.1, rate: int = 8000) -> bytes:
    """A small mono 16-bit WAV, as clips are stored: a file the audio check accepts."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"\x00\x01" * int(seconds * rate))
    return buffer.getvalue()


def login(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def streamed(response: HttpResponseBase) -> bytes:
    """The whole body of a streamed response (a file, an export); fails on one not streamed."""
    assert isinstance(response, StreamingHttpResponse), type(response)
    return response.getvalue()


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA} (CI keeps ../shared beside the clone)")
    return SHARED_DATA


def worker_database_url() -> str:
    """DATABASE_URL of the test database, for a Celery worker process the tests start."""
    db = connection.settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        name = str(db["NAME"])
        if name == ":memory:" or "mode=memory" in name:
            pytest.skip("the SQLite test database is in memory; a worker process cannot share it")
        return f"sqlite:///{name}"
    if "postgresql" not in db["ENGINE"]:
        pytest.fail(f"no worker DATABASE_URL for engine {db['ENGINE']}")
    user = quote(db["USER"] or "", safe="")
    password = f":{quote(db['PASSWORD'], safe='')}" if db["PASSWORD"] else ""
    port = f":{db['PORT']}" if db["PORT"] else ""
    return f"postgres://{user}{password}@{db['HOST'] or 'localhost'}{port}/{db['NAME']}"


FLAG_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "flags"


@pytest.fixture(scope="session")
def flag_model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A flag model (active.flagmodel) learned once per test session from the caption
    slices in tests/fixtures/flags and the bundled ontology (about half a minute)."""
    from active import flagmodel

    clips = flagmodel.read_caption_csv(FLAG_FIXTURES / "clotho_development_head.csv")
    clips += flagmodel.read_caption_csv(FLAG_FIXTURES / "audiocaps_train_head.csv")
    ontology = json.loads((FIXTURES / "audioset_ontology.json").read_text(encoding="utf-8"))
    model = flagmodel.flag_model_learn(captions=clips, ontology=ontology)
    path = tmp_path_factory.mktemp("flag-model") / f"flag-model-v{flagmodel.VERSION}.npz"
    model.save(path)
    return path


@pytest.fixture
def flag_model_installed(flag_model_file: Path, settings: Any) -> Iterator[Path]:
    """The fixture flag model where the flag job looks for it, for one test (the others
    get the CIDEr-D fallback)."""
    import shutil

    target = Path(settings.ACTIVE_FLAG_MODEL_DIR) / flag_model_file.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(flag_model_file, target)
    yield target
    target.unlink(missing_ok=True)
