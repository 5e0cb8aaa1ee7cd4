"""The offline demo: people in each role, a project, the ontology excerpt and six clips,
and the project lived in: captions waiting for review (one flagged, one hostile-looking),
approved ones exported as snapshots with their statistics, a qualification attempt to
grade, and a first captioner queued to train once the workers start.

Everything goes through the apps' services, as people and jobs would, and every step is
skipped when what it makes is there already, so seeding twice changes nothing.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any, TypedDict

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from annotation.models import Assignment, Batch
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
# Crowdworkers of the demo who are not logins: their work fills the review queue.
DEMO_WORKERS = ("worker_ana", "worker_ben", "worker_cho")
ONTOLOGY_EXCERPT = settings.BASE_DIR / "curation" / "fixtures" / "audioset_ontology_excerpt.json"
WORD_LABELS = settings.BASE_DIR / "curation" / "fixtures" / "word_labels_demo.csv"
# SynthScenes per split for the demo's training data (tests make it smaller)
DEMO_SYNTHSCENES: SplitSizes = {"train": 24, "val": 6, "test": 6}
DEMO_BATCH = "Demo: caption the train clips"
# Captions per clip of the demo batch: the demo workers take some slots, and every train
# clip keeps one or more for `annotator`.
DEMO_CAPTIONS_PER_CLIP = 5
# The captioner the demo's loop trains: TempAtt (small) with a short, fast recipe, so the
# first run finishes on a 2-core CPU in well under a minute (benchmarks/RESULTS.md) and
# still says something sensible: log-mels every 0.1 s (SynthScenes events last seconds;
# the default 0.02 s hop makes the encoder 5x dearer), small batches and a high rate. The
# paper's recipe (lr 1e-4, batch 32) learns nothing from a few dozen captions that fast.
DEMO_MODEL = "tempatt"
DEMO_TRAINING = (
    "features.hop_length=3200",
    "train.epochs=30",
    "train.batch_size=8",
    "train.lr=3e-3",
)

# What the demo's workers write for each clip: worker_ana, worker_ben, annotator2,
# worker_cho in that order (each worker takes the HITs the engine hands out).
CAPTIONS: dict[str, tuple[str, str, str, str]] = {
    "dog_barking.wav": (
        "a dog barks loudly several times nearby",
        "a dog barked loudly several times",
        "a small dog barks repeatedly nearby",
        "a dog barks several times in the distance",
    ),
    "siren_approaching.wav": (
        "a siren wails loudly as an emergency vehicle approaches",
        "a loud siren approaches and passes by quickly",
        "an emergency siren wails louder as it approaches",
        "a siren wails in the distance and approaches quickly",
    ),
    "rain_on_roof.wav": (
        "rain falls steadily on a metal roof",
        "heavy rain patters steadily on a roof",
        "rain falls on a roof with a steady patter",
        "steady rain falls on a tin roof",
    ),
    "engine_idling.wav": (
        "an engine idles steadily with a low rumble",
        "a car engine idles with a low constant rumble",
        "a vehicle engine idles steadily nearby",
        "an engine idles with a deep steady rumble",
    ),
    "birds_chirping.wav": (
        "birds chirp and tweet repeatedly nearby",
        "several birds chirp quickly in a high pitch",
        "small birds chirp and tweet continuously",
        "birds chirp repeatedly in the background",
    ),
    "telephone_ringing.wav": (
        "a telephone rings loudly several times",
        "a telephone bell rings repeatedly and shrilly",
        "an old telephone bell rings loudly and repeatedly",
        "a telephone rings several times nearby",
    ),
}
# The reviewer's fix of worker_ben's past tense before approving it.
REVIEWER_FIXES = {"a dog barked loudly several times": "a dog barks loudly several times"}
# worker_cho's first caption describes another recording: the flag checks catch it.
OFF_TOPIC = "a man whistles a cheerful tune while walking slowly"
# annotator2's first caption carries an encoded script tag (the caption rules refuse < and
# >, so this is the hostile text that gets through): every page must show it as text.
HOSTILE_SUFFIX = "&lt;script&gt;alert(1)&lt;/script&gt;"
QUALIFICATION = "Demo: caption two clips"
QUALIFICATION_CLIPS = {
    "birds_chirping.wav": "birds chirp and tweet repeatedly nearby",
    "telephone_ringing.wav": "a telephone rings loudly several times",
}


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
    batch = _demo_batch(project, users["researcher"])
    _demo_training_data(project, echo=echo)
    workers = _demo_workers(project)
    if _demo_crowd_work(batch, {**users, **workers}):
        _run(
            job_run_inline(
                kind="batch_flag",
                params={"batch_id": batch.pk},
                label=f"Check the captions of {batch.name} for disagreement",
                project=project,
                created_by=users["reviewer"],
                echo=echo,
            )
        )
    _demo_snapshots(project, users["researcher"], echo=echo)
    _demo_qualification(project, users["researcher"], users["annotator2"])
    _demo_model(project, users["researcher"], echo=echo)
    return project


def _demo_training_data(project: Project, *, echo: Any = None) -> None:
    """SynthScenes with reference captions: the corpus the demo's captioner trains on."""
    from modeling.services_synth import synthscenes_make, synthscenes_slug

    sizes = DEMO_SYNTHSCENES
    if not project.subsets.filter(slug=synthscenes_slug(seed=0, **sizes)).exists():
        if echo:
            echo("Making SynthScenes for the demo's training data…")
        synthscenes_make(project=project, seed=0, **sizes)


def _demo_batch(project: Project, researcher: User) -> Batch:
    """A published caption batch over the demo's train split, so "Work" has HITs at once."""
    from datetime import timedelta

    from annotation.services import batch_publish
    from curation.models import Subset

    existing = Batch.objects.filter(project=project, name=DEMO_BATCH).first()
    if existing is not None:
        return existing
    return batch_publish(
        subset=Subset.objects.get(project=project, slug="demo-clips"),
        split="train",
        name=DEMO_BATCH,
        captions_per_clip=DEMO_CAPTIONS_PER_CLIP,
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


def _demo_workers(project: Project) -> dict[str, User]:
    """The demo's crowdworkers: annotators of the project without a password (nobody logs
    in as them; their work is what the reviewer sees)."""
    User = get_user_model()
    workers = {}
    for username in DEMO_WORKERS:
        workers[username] = User.objects.filter(username=username).first() or (
            User.objects.create_user(username=username)  # no password: an unusable one
        )
        membership_add(project=project, user=workers[username], role=Role.ANNOTATOR)
    return workers


def _demo_crowd_work(batch: Batch, people: dict[str, User]) -> bool:
    """Work on the demo batch through the assignment engine: worker_ana and worker_ben
    caption every train clip and the reviewer approves it (fixing one tense); annotator2
    and worker_cho caption two clips each, left for review, among them an off-topic caption
    and a hostile-looking one. A worker who has any assignment in the batch is skipped.
    Returns whether anyone submitted anything."""
    plan = [
        # (worker, index into CAPTIONS, HITs to do, approve?)
        ("worker_ana", 0, None, True),
        ("worker_ben", 1, None, True),
        ("annotator2", 2, 2, False),
        ("worker_cho", 3, 2, False),
    ]
    worked = False
    for username, column, hits, approve in plan:
        worker = people[username]
        if Assignment.objects.filter(hit__batch=batch, worker=worker).exists():
            continue
        with transaction.atomic():
            done = _captions_submit(batch, worker, column=column, hits=hits)
            for assignment in done if approve else []:
                _approve(assignment, people["reviewer"])
        worked = worked or bool(done)
    return worked


def _captions_submit(
    batch: Batch, worker: User, *, column: int, hits: int | None
) -> list[Assignment]:
    """Claims and submits up to `hits` HITs of the batch (all it may take with None), one
    caption per clip from CAPTIONS[clip][column]: the first one off topic for worker_cho
    and hostile-looking for annotator2. The worker hears each clip to the end first, as
    the HIT page records it, except the off-topic one."""
    from annotation.services import assignment_submit, clip_audio_served, clip_heard, hit_claim

    # the player loaded each clip's audio a while ago (the server refuses a submit for audio
    # that was never served, or served too recently to have played through)
    loaded_at = timezone.now() - timedelta(hours=1)

    done: list[Assignment] = []
    while hits is None or len(done) < hits:
        assignment = hit_claim(worker=worker, batch=batch)
        if assignment is None:
            break
        texts = {}
        for hit_clip in assignment.hit.hit_clips.select_related("clip").order_by("position"):
            clip = hit_clip.clip
            clip_audio_served(assignment=assignment, clip=clip, now=loaded_at)
            text = CAPTIONS[clip.original_name][column]
            if not done and worker.username == "worker_cho":
                text = OFF_TOPIC
            else:
                clip_heard(assignment=assignment, worker=worker, clip_id=clip.pk)
            if not done and worker.username == "annotator2":
                text = f"{text} {HOSTILE_SUFFIX}"
            texts[clip.pk] = text
        done.append(assignment_submit(assignment=assignment, worker=worker, captions=texts))
    return done


def _approve(assignment: Assignment, reviewer: User) -> None:
    from annotation.models import Caption
    from crowd.services import review_approve

    fixes = {
        caption.pk: REVIEWER_FIXES[caption.text]
        for caption in Caption.objects.filter(assignment=assignment)
        if caption.text in REVIEWER_FIXES
    }
    review_approve(
        assignment=assignment,
        reviewer=reviewer,
        fixes=fixes,
        feedback="Thanks, clear and in the present tense." if not fixes else "",
    )


def _demo_snapshots(project: Project, researcher: User, *, echo: Any = None) -> None:
    """The approved captions (the SynthScenes references and the crowd's approved work)
    exported as v1, JSON lines (what training reads), and v2, Clotho CSV, each with its
    statistics; and the statistics of the live corpus. An AudioCaps CSV cannot name local
    clips (it identifies a clip by YouTube id), and every demo clip is local."""
    from corpus.models import CorpusStatistics, Snapshot
    from corpus.services import snapshot_create, statistics_compute

    for fmt in (Snapshot.Format.JSONL, Snapshot.Format.CLOTHO):
        if Snapshot.objects.filter(project=project, format=fmt).exists():
            continue
        snapshot = snapshot_create(
            project=project,
            fmt=fmt,
            text=Snapshot.Text.RAW,
            splits=["train", "val", "test"],
            created_by=researcher,
        )
        _run(
            job_run_inline(
                kind="snapshot_build",
                params={"snapshot_id": snapshot.pk},
                label=f"Export {project.slug} v{snapshot.version} ({fmt}, raw)",
                project=project,
                created_by=researcher,
                echo=echo,
            )
        )
    if not CorpusStatistics.objects.filter(project=project, snapshot=None).exists():
        # without parts of speech: loading spaCy would cost seconds of every first start;
        # the statistics page offers to add them as a job
        statistics_compute(project=project, with_pos=False)


def _demo_qualification(project: Project, researcher: User, annotator: User) -> None:
    """A qualification test on two demo clips with reference captions, and annotator2's
    attempt at it, waiting for a reviewer to grade."""
    from crowd.models import Qualification
    from crowd.services import qualification_create, qualification_set_gold, qualification_submit
    from curation.models import Clip

    if Qualification.objects.filter(project=project, name=QUALIFICATION).exists():
        return
    clips = dict(
        Clip.objects.filter(
            source=Clip.Source.LOCAL, original_name__in=QUALIFICATION_CLIPS
        ).values_list("original_name", "pk")
    )
    with transaction.atomic():
        qualification = qualification_create(
            project=project,
            created_by=researcher,
            name=QUALIFICATION,
            clip_ids=" ".join(str(clips[name]) for name in QUALIFICATION_CLIPS),
            instructions="Caption each clip as you would in a HIT: what you hear, in one "
            "present-tense sentence.",
        )
        qualification_set_gold(
            qualification=qualification,
            by=researcher,
            golds={clips[name]: text for name, text in QUALIFICATION_CLIPS.items()},
        )
        qualification_submit(
            qualification=qualification,
            worker=annotator,
            answers={
                clips["birds_chirping.wav"]: "small birds chirp and tweet nearby",
                clips["telephone_ringing.wav"]: "a phone rings twice with a loud bell",
            },
        )


def _demo_model(project: Project, researcher: User, *, echo: Any = None) -> None:
    """Queues the first retrain of the loop (snapshot the approved captions, train the
    demo's captioner, promote it, suggest captions for every clip) on the gpu queue: the
    workers that `bin/earmark up` starts run it, so the server is not held up. Queued once;
    again only when every earlier one failed or was cancelled."""
    from active.models import Retrain
    from active.services import project_configure, retrain_start

    retrains = Retrain.objects.filter(project=project)
    if retrains.exclude(job__state__in=[Job.State.FAILED, Job.State.CANCELLED]).exists():
        return
    if not retrains.exists():
        project_configure(
            project=project,
            user=researcher,
            model_name=DEMO_MODEL,
            preset="small",
            overrides=DEMO_TRAINING,
        )
    retrain = retrain_start(
        project=project,
        trigger=Retrain.Trigger.MANUAL,
        reason="the demo's first captioner, queued by seed_demo",
        user=researcher,
        debounce=False,
    )
    if echo:
        echo(f"Queued the demo's first training run (job #{retrain.job_id}); see /jobs/.")


def _run(job: Job) -> None:
    if job.state != Job.State.SUCCEEDED:
        raise RuntimeError(f"demo job #{job.pk} {job.state}: {job.error}")
