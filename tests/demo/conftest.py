"""Seeding the demo quickly in tests: the six demo sounds generated once per session and
copied in, and a few SynthScenes instead of the demo's 36."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps

from core.models import Job, Project
from core.services import job_run
from curation import synth
from demo import services as demo

SYNTHSCENES = {"train": 3, "val": 1, "test": 1}  # the demo makes 24/6/6
DemoSounds = tuple[Path, dict[str, list[str]]]


def demo_sounds_make(tmp_path_factory: pytest.TempPathFactory) -> DemoSounds:
    """The synthetic WAVs and videos (ffmpeg is slow: a fixture makes them once)."""
    folder = tmp_path_factory.mktemp("demo-sounds")
    return folder, synth.generate_demo_sounds(folder)


@pytest.fixture(scope="session")
def demo_sounds(tmp_path_factory: pytest.TempPathFactory) -> DemoSounds:
    return demo_sounds_make(tmp_path_factory)


def quick_demo_seed(*, monkeypatch: pytest.MonkeyPatch, sounds: DemoSounds) -> Project:
    """demo_seed() with the pre-made demo sounds and SYNTHSCENES; calling
    demo.services.demo_seed() again afterwards reuses both. The caller points VAR_DIR and
    MEDIA_ROOT at a temporary folder first."""
    generated, labels = sounds

    def copy_demo_sounds(folder: Path, **_: Any) -> dict[str, list[str]]:
        shutil.copytree(generated, folder, dirs_exist_ok=True)
        return labels

    monkeypatch.setattr(synth, "generate_demo_sounds", copy_demo_sounds)
    monkeypatch.setattr(demo, "DEMO_SYNTHSCENES", SYNTHSCENES)
    return demo.demo_seed()


def run_queued_training() -> list[Job]:
    """Runs what the demo queued for the gpu queue, as the worker `bin/earmark up` starts
    would: the retrain through core.services.job_run, then the suggestions job it queues
    after promoting its run. Returns the jobs run, in order."""
    done: list[Job] = []
    for kind in ("active_retrain", "active_suggest"):
        for job in Job.objects.filter(kind=kind, state=Job.State.QUEUED).order_by("pk"):
            done.append(job_run(job_id=job.pk))
    return done


def database_state() -> dict[str, tuple[int, str]]:
    """Every model's row count and a digest of all its rows' values, by model label."""
    state = {}
    for model in apps.get_models(include_auto_created=True):
        rows = list(model._base_manager.order_by("pk").values_list())
        state[model._meta.label] = (len(rows), hashlib.sha256(repr(rows).encode()).hexdigest())
    return state
