"""The offline demo: people in each role, a project, the ontology excerpt and six clips."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User

from core.models import Job, Project, Role
from core.services import job_run_inline, membership_add, project_create


class SplitSizes(TypedDict):
    """Scenes per split, passed on as synthscenes_make's keyword arguments."""

    train: int
    val: int
    test: int


DEMO_PASSWORD = "earmark-demo"
DEMO_USERS: dict[str, str] = {
    "researcher": Role.RESEARCHER,
    "reviewer": Role.REVIEWER,
    "annotator": Role.ANNOTATOR,
    "annotator2": Role.ANNOTATOR,
}
ONTOLOGY_EXCERPT = settings.BASE_DIR / "curation" / "fixtures" / "audioset_ontology_excerpt.json"
WORD_LABELS = settings.BASE_DIR / "curation" / "fixtures" / "word_labels_demo.csv"
# SynthScenes per split for the demo's training data (tests make it smaller)
DEMO_SYNTHSCENES: SplitSizes = {"train": 24, "val": 6, "test": 6}


def demo_seed(*, echo: Any = None) -> Project:
    """Idempotent: users and project are created once; data jobs rerun only if missing."""
    from curation.models import Clip, Label, WordLabel
    from curation.services import word_labels_import
    from curation.synth import generate_demo_sounds

    User = get_user_model()
    admin, created = User.objects.get_or_create(
        username="admin", defaults={"is_staff": True, "is_superuser": True}
    )
    if created:
        admin.set_password(DEMO_PASSWORD)
        admin.save()
    users = {}
    for username in DEMO_USERS:
        users[username], created = User.objects.get_or_create(username=username)
        if created:
            users[username].set_password(DEMO_PASSWORD)
            users[username].save()

    project = Project.objects.filter(slug="demo").first() or project_create(
        name="Demo: everyday sounds",
        slug="demo",
        created_by=users["researcher"],
        description="Six synthetic clips tied to real AudioSet labels, to try every screen.",
    )
    for username, role in DEMO_USERS.items():
        membership_add(project=project, user=users[username], role=role)

    if not Label.objects.filter(mid="/m/0bt9lr").exists():
        _run(
            job_run_inline(
                kind="ontology_import",
                params={"path": str(ONTOLOGY_EXCERPT)},
                label="Import ontology excerpt (demo)",
                created_by=users["researcher"],
                echo=echo,
            )
        )
    if not WordLabel.objects.exists():
        word_labels_import(path=WORD_LABELS)
    if not Clip.objects.filter(project=project, source=Clip.Source.LOCAL).exists():
        folder = Path(settings.VAR_DIR) / "demo-src"
        labels = generate_demo_sounds(folder)
        _run(
            job_run_inline(
                kind="clips_import_local",
                params={
                    "paths": [str(folder / name) for name in labels],
                    "labels": labels,
                    "videos": {n: str(folder / f"{Path(n).stem}.mp4") for n in labels},
                },
                label="Import demo clips",
                project=project,
                created_by=users["researcher"],
                echo=echo,
            )
        )
    _demo_curation(project, users["researcher"])
    _demo_batch(project, users["researcher"])
    _demo_training_data(project, users["researcher"], echo=echo)
    return project


def _demo_training_data(project: Project, researcher: User, *, echo: Any = None) -> None:
    """SynthScenes with reference captions and a JSON-lines snapshot of them, so a
    researcher can queue a training run (Training runs → Train a captioner) at once."""
    from corpus.models import Snapshot
    from corpus.services import snapshot_build, snapshot_create
    from modeling.services_synth import synthscenes_make, synthscenes_slug

    sizes = DEMO_SYNTHSCENES
    if not project.subsets.filter(slug=synthscenes_slug(seed=0, **sizes)).exists():
        if echo:
            echo("Making SynthScenes for the demo's training data…")
        synthscenes_make(project=project, seed=0, **sizes)
    if not Snapshot.objects.filter(project=project, format=Snapshot.Format.JSONL).exists():
        snapshot_build(
            snapshot=snapshot_create(
                project=project,
                fmt=Snapshot.Format.JSONL,
                text=Snapshot.Text.RAW,
                splits=["train", "val", "test"],
                created_by=researcher,
            )
        )


def _demo_batch(project: Project, researcher: User) -> None:
    """A published caption batch over the demo's train split, so "Work" has HITs at once."""
    from datetime import timedelta

    from annotation.models import Batch
    from annotation.services import batch_publish
    from curation.models import Subset

    if Batch.objects.filter(project=project).exists():
        return
    batch_publish(
        subset=Subset.objects.get(project=project, slug="demo-clips"),
        split="train",
        name="Demo: caption the train clips",
        captions_per_clip=2,
        clips_per_hit=1,
        reward_cents=5,
        time_allotted=timedelta(minutes=10),
        lifetime=timedelta(days=365),
        created_by=researcher,
    )


def _demo_curation(project: Project, researcher: User) -> None:
    """A hand-picked subset of the local clips, so the subset, clip and audio pages have
    something to show (a project plays only clips in its subsets), and a starter recipe."""
    from curation.models import Clip, Subset
    from curation.recipes import PRESETS
    from curation.services import recipe_save, subset_from_clips

    if not Subset.objects.filter(project=project, slug="demo-clips").exists():
        subset_from_clips(
            project=project,
            name="Demo clips",
            slug="demo-clips",
            clip_ids=Clip.objects.filter(project=project, source=Clip.Source.LOCAL).values_list(
                "pk", flat=True
            ),
            val_size=1,
            test_size=1,
        )
    if not project.recipes.exists():
        recipe_save(
            project=project, name="AudioCaps-like", spec=PRESETS["audiocaps"], created_by=researcher
        )


def _run(job: Job) -> None:
    if job.state != Job.State.SUCCEEDED:
        raise RuntimeError(f"demo job #{job.pk} {job.state}: {job.error}")
