"""The annotation API: batches for researchers, the worker's own assignments.

Access is the pages': an assignment exists only for the worker holding it (404 for anyone
else); project endpoints are 404 outside the project, 403 for annotators; reviewers read,
researchers also create and move batches. Review is tests/crowd/test_api.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.test import Client
from django.utils import timezone

from annotation import rules
from annotation.models import Assignment, Batch, Caption, Hit
from annotation.services import assignment_submit, caption_limits, hit_claim
from core.models import Project, Role
from core.services import api_token_create, membership_add
from crowd.models import LedgerEntry
from crowd.services import worker_block
from curation.models import Clip, Label, SuperCategory, WordLabel
from tests.annotation.factories import (
    CAPTION,
    MakeBatch,
    captions_for,
    listened,
    make_clips,
    make_subset,
    publish,
)
from tests.conftest import login, make_user, wav_bytes

JSON = "application/json"


@dataclass
class World:
    project: Project
    batch: Batch  # two clips, one per HIT, two captions each
    assignment: Assignment  # Ann's, accepted
    submitted: Assignment  # Abe's, submitted


@pytest.fixture
def rex(olive: Any) -> Any:
    """A reviewer of Olive's "birds" project: a reviewer, but of another project."""
    user = make_user("rex")
    membership_add(project=Project.objects.get(slug="birds"), user=user, role=Role.REVIEWER)
    return user


@pytest.fixture
def world(project: Project, make_batch: MakeBatch, ann: Any, abe: Any) -> World:
    batch = make_batch(clips=2, captions_per_clip=2)
    submitted = hit_claim(worker=abe)
    assert submitted is not None
    assignment_submit(
        assignment=listened(submitted),
        worker=abe,
        captions=captions_for(submitted, "abe hears a dog bark"),
    )
    assignment = hit_claim(worker=ann)
    assert assignment is not None
    listened(assignment)  # Ann has heard her clip: her submits pass that check
    return World(project=project, batch=batch, assignment=assignment, submitted=submitted)


def _post(client: Client, url: str, body: dict[str, Any] | None = None) -> Any:
    return client.post(url, json.dumps(body or {}), content_type=JSON)


def _clip_id(assignment: Assignment) -> int:
    return assignment.hit.hit_clips.get().clip_id


def _clip_outside(assignment: Assignment) -> int:
    return Hit.objects.exclude(pk=assignment.hit_id).get().hit_clips.get().clip_id


def _state() -> tuple[Any, ...]:
    return (
        sorted(Assignment.objects.values_list("pk", "state")),
        sorted(Caption.objects.values_list("pk", "text", "fixed_text")),
        sorted(Batch.objects.values_list("pk", "state")),
        sorted(Hit.objects.values_list("pk", "taken")),
        LedgerEntry.objects.count(),
    )


URL = Callable[[World], str]
P = "/api/projects/sounds"

# the worker's own assignment: (method, URL, body)
WORK: dict[str, tuple[str, URL, dict[str, Any] | None]] = {
    "assignment": ("get", lambda w: f"/api/work/assignments/{w.assignment.pk}", None),
    "audio": (
        "get",
        lambda w: f"/api/work/assignments/{w.assignment.pk}/clips/{_clip_id(w.assignment)}/audio",
        None,
    ),
    "submit": (
        "post",
        lambda w: f"/api/work/assignments/{w.assignment.pk}/submit",
        {"captions": {}},  # filled in by _work with the HIT's clips
    ),
    "return": ("post", lambda w: f"/api/work/assignments/{w.assignment.pk}/return", None),
}
# reads for researchers and reviewers
READS: dict[str, URL] = {
    "batches": lambda w: f"{P}/batches",
    "batch": lambda w: f"{P}/batches/{w.batch.pk}",
    "captions": lambda w: f"{P}/batches/{w.batch.pk}/captions",
}
# researchers only
BATCH_WRITES: dict[str, tuple[URL, Callable[[World], dict[str, Any]]]] = {
    "create": (lambda w: f"{P}/batches", lambda w: {"name": "More", "subset": w.batch.subset.slug}),
    "pause": (lambda w: f"{P}/batches/{w.batch.pk}/pause", lambda w: {}),
    "close": (lambda w: f"{P}/batches/{w.batch.pk}/close", lambda w: {}),
    "publish": (lambda w: f"{P}/batches/{w.batch.pk}/publish", lambda w: {}),
}


def _work(client: Client, name: str, w: World) -> Any:
    method, url, body = WORK[name]
    if name == "submit":
        body = {"captions": captions_for(w.assignment)}
    if method == "get":
        return client.get(url(w))
    return _post(client, url(w), body)


def _batch_write(client: Client, name: str, w: World) -> Any:
    url, body = BATCH_WRITES[name]
    return _post(client, url(w), body(w))


# Access ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(WORK))
def test_it_answers_anonymous_work_requests_with_401(world: World, name: str) -> None:
    before = _state()
    assert _work(Client(), name, world).status_code == 401
    assert _state() == before


@pytest.mark.parametrize("name", list(READS))
def test_it_answers_anonymous_reads_with_401(world: World, name: str) -> None:
    assert Client().get(READS[name](world)).status_code == 401


def test_it_answers_an_anonymous_claim_with_401(world: World) -> None:
    before = _state()
    assert _post(Client(), "/api/work/claim").status_code == 401
    assert _state() == before


@pytest.mark.parametrize("persona", ["abe", "olive", "alice", "rey", "rex"])
@pytest.mark.parametrize("name", list(WORK))
def test_it_hides_an_assignment_from_everyone_but_its_worker(
    world: World, request: pytest.FixtureRequest, persona: str, name: str
) -> None:
    before = _state()
    response = _work(login(request.getfixturevalue(persona)), name, world)
    assert response.status_code == 404
    assert response.json() == {"detail": f"No assignment #{world.assignment.pk} of yours."}
    assert _state() == before


@pytest.mark.parametrize("persona", ["olive", "rex"])
@pytest.mark.parametrize("name", list(READS))
def test_it_hides_the_project_from_outsiders_and_other_reviewers(
    world: World, request: pytest.FixtureRequest, persona: str, name: str
) -> None:
    response = login(request.getfixturevalue(persona)).get(READS[name](world))
    assert response.status_code == 404
    assert response.json() == {"detail": "No project 'sounds' (or you are not in it)."}


@pytest.mark.parametrize("persona", ["olive", "rex"])
@pytest.mark.parametrize("name", list(BATCH_WRITES))
def test_it_refuses_outsiders_batch_changes_with_404(
    world: World, request: pytest.FixtureRequest, persona: str, name: str
) -> None:
    before = _state()
    assert _batch_write(login(request.getfixturevalue(persona)), name, world).status_code == 404
    assert _state() == before


@pytest.mark.parametrize("name", list(READS))
def test_it_forbids_project_reads_to_annotators(world: World, ann: Any, name: str) -> None:
    response = login(ann).get(READS[name](world))
    assert response.status_code == 403
    assert response.json() == {
        "detail": "Only the project's researchers and reviewers may do this."
    }


@pytest.mark.parametrize("name", list(BATCH_WRITES))
def test_it_forbids_batch_changes_to_annotators(world: World, ann: Any, name: str) -> None:
    before = _state()
    assert _batch_write(login(ann), name, world).status_code == 403
    assert _state() == before


@pytest.mark.parametrize("name", list(BATCH_WRITES))
def test_it_forbids_batch_changes_to_reviewers(world: World, rey: Any, name: str) -> None:
    before = _state()
    response = _batch_write(login(rey), name, world)
    assert response.status_code == 403
    assert response.json() == {"detail": "Only the project's researchers may do this."}
    assert _state() == before


@pytest.mark.parametrize("name", list(READS))
def test_it_lets_reviewers_read(world: World, rey: Any, name: str) -> None:
    assert login(rey).get(READS[name](world)).status_code == 200


def test_it_hides_a_batch_of_another_project(world: World, alice: Any, olive: Any) -> None:
    birds = Project.objects.get(slug="birds")
    theirs = make_subset(birds, make_clips(1))
    batch = publish(theirs, created_by=olive)
    response = login(alice).get(f"{P}/batches/{batch.pk}")
    assert response.status_code == 404
    assert response.json() == {"detail": f"No batch #{batch.pk} in project 'sounds'."}


def test_it_accepts_a_bearer_token(world: World, ann: Any) -> None:
    _, raw = api_token_create(user=ann, name="script")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    response = client.get(f"/api/work/assignments/{world.assignment.pk}")
    assert response.status_code == 200
    assert response.json()["id"] == world.assignment.pk


def test_it_refuses_a_wrong_token_with_401(world: World) -> None:
    client = Client(HTTP_AUTHORIZATION="Bearer emk_nope")
    assert client.get(f"/api/work/assignments/{world.assignment.pk}").status_code == 401


# Batches --------------------------------------------------------------------------------


def test_a_researcher_creates_and_publishes_a_batch(project: Project, alice: Any) -> None:
    subset = make_subset(project, make_clips(5))
    body = {"name": "Val", "subset": subset.slug, "split": "val", "clips_per_hit": 2}
    response = _post(login(alice), f"{P}/batches", body)
    assert response.status_code == 201, response.content
    out = response.json()
    assert (out["state"], out["hits"], out["captions_per_clip"]) == ("published", 3, 5)
    assert out["progress"] == {
        "clips": 5,
        "wanted": 25,
        "submitted": 0,
        "approved": 0,
        "rejected": 0,
        "in_progress": 0,
    }
    batch = Batch.objects.get(pk=out["id"])
    assert batch.time_allotted == timedelta(minutes=30)
    assert batch.created_by == alice


def test_a_batch_is_created_with_its_bonus_cap(project: Project, alice: Any) -> None:
    subset = make_subset(project, make_clips(1))
    body = {"name": "Val", "subset": subset.slug, "split": "val", "bonus_cap_cents": 2500}
    response = _post(login(alice), f"{P}/batches", body)
    assert response.status_code == 201, response.content
    assert response.json()["bonus_cap_cents"] == 2500
    assert Batch.objects.get(pk=response.json()["id"]).bonus_cap_cents == 2500


def test_a_draft_batch_is_published_then_paused_then_closed(project: Project, alice: Any) -> None:
    subset = make_subset(project, make_clips(2))
    client = login(alice)
    body = {"name": "Later", "subset": subset.slug, "publish": False}
    created = _post(client, f"{P}/batches", body).json()
    assert created["state"] == "draft"
    url = f"{P}/batches/{created['id']}"
    assert _post(client, f"{url}/publish").json()["state"] == "published"
    assert _post(client, f"{url}/pause").json()["state"] == "paused"
    assert _post(client, f"{url}/close").json()["state"] == "finished"
    assert Batch.objects.get(pk=created["id"]).state == Batch.State.FINISHED


def test_it_refuses_to_reopen_a_closed_batch_with_409(world: World, alice: Any) -> None:
    client = login(alice)
    _post(client, f"{P}/batches/{world.batch.pk}/close")
    response = _post(client, f"{P}/batches/{world.batch.pk}/publish")
    assert response.status_code == 409
    assert response.json() == {"detail": "A finished batch cannot become published."}


def test_it_names_an_unknown_subset(project: Project, alice: Any) -> None:
    response = _post(login(alice), f"{P}/batches", {"name": "X", "subset": "nope"})
    assert response.status_code == 400
    assert response.json()["errors"] == {"subset": ["No subset 'nope' in project 'sounds'."]}
    assert not Batch.objects.exists()


def test_it_names_the_bad_batch_numbers(project: Project, alice: Any) -> None:
    subset = make_subset(project, make_clips(2))
    body = {"name": "X", "subset": subset.slug, "clips_per_hit": 0, "split": "dev"}
    response = _post(login(alice), f"{P}/batches", body)
    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"split"}
    body["split"] = "val"
    response = _post(login(alice), f"{P}/batches", body)
    assert response.json()["errors"] == {"clips_per_hit": ["Put 1 to 50 clips in a HIT."]}
    assert not Batch.objects.exists()


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ("lifetime_hours", "A batch is offered for at most 8,760 hours (365 days)."),
        ("time_allotted_minutes", "A worker may hold a HIT for at most 1,440 minutes (1 day)."),
        ("auto_approve_days", "Submitted work is approved after at most 30 days."),
        ("reward_cents", "Pay 0 to 100,000 cents per HIT."),
        ("min_words", "Ask for 1 to 200 words."),
        ("max_words", "Ask for 1 to 200 words."),
    ],
)
def test_it_refuses_huge_batch_numbers_naming_the_field(
    project: Project, alice: Any, field: str, message: str
) -> None:
    subset = make_subset(project, make_clips(2))
    body = {"name": "X", "subset": subset.slug, field: 10**12}

    response = _post(login(alice), f"{P}/batches", body)

    assert response.status_code == 400
    assert response.json()["errors"] == {field: [message]}
    assert not Batch.objects.exists()


def test_it_refuses_a_batch_without_fetched_clips(project: Project, alice: Any) -> None:
    clips = make_clips(2)
    Clip.objects.filter(pk__in=[c.pk for c in clips]).update(status=Clip.Status.PENDING)
    subset = make_subset(project, clips)
    response = _post(login(alice), f"{P}/batches", {"name": "X", "subset": subset.slug})
    assert response.status_code == 400
    assert "2 not fetched yet" in response.json()["errors"]["split"][0]


def test_it_reports_a_batchs_progress(world: World, rey: Any) -> None:
    progress = login(rey).get(f"{P}/batches/{world.batch.pk}").json()["progress"]
    assert progress == {
        "clips": 2,
        "wanted": 4,
        "submitted": 1,
        "approved": 0,
        "rejected": 0,
        "in_progress": 1,
    }


def test_it_lists_a_batchs_captions_with_their_workers(world: World, rey: Any) -> None:
    response = login(rey).get(f"{P}/batches/{world.batch.pk}/captions?state=submitted")
    assert response.status_code == 200
    [caption] = response.json()["items"]
    assert (caption["worker"], caption["text"]) == ("abe", "abe hears a dog bark")


# Claim ------------------------------------------------------------------------------------


def test_a_claim_gives_a_new_assignment_then_the_same_one(batch: Batch, ann: Any) -> None:
    client = login(ann)
    first = _post(client, "/api/work/claim")
    assert first.status_code == 201
    again = _post(client, "/api/work/claim")
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert Assignment.objects.get(pk=first.json()["id"]).worker == ann


def test_a_claim_with_nothing_open_answers_204(batch: Batch, ann: Any) -> None:
    Batch.objects.update(state=Batch.State.PAUSED)
    response = _post(login(ann), "/api/work/claim")
    assert response.status_code == 204
    assert not Assignment.objects.exists()


def test_a_blocked_worker_is_told_why(batch: Batch, ann: Any, rey: Any) -> None:
    worker_block(project=batch.project, worker=ann, by=rey, reason="Copies the hints.")
    response = _post(login(ann), "/api/work/claim")
    assert response.status_code == 403
    assert response.json() == {
        "detail": "You are blocked from all your projects.",
        "reasons": ["Everyday sounds: Copies the hints."],
    }


def test_a_claim_on_a_batch_of_another_project_is_404(world: World, olive: Any, abe: Any) -> None:
    theirs = publish(
        make_subset(Project.objects.get(slug="birds"), make_clips(1)), created_by=olive
    )
    response = _post(login(abe), f"/api/work/claim?batch={theirs.pk}")
    assert response.status_code == 404
    assert response.json() == {"detail": f"No batch #{theirs.pk} for you."}


def test_a_claim_stays_in_the_batch_asked_for(make_batch: MakeBatch, ann: Any) -> None:
    make_batch(clips=2)
    second = make_batch(clips=2)
    response = _post(login(ann), f"/api/work/claim?batch={second.pk}")
    assert response.status_code == 201
    assert response.json()["batch"]["id"] == second.pk


# The worker's assignment ------------------------------------------------------------------


def test_it_shows_the_worker_clips_and_word_hints(world: World, ann: Any) -> None:
    dog = WordLabel.objects.create(name="dog", super_category=SuperCategory.ANIMAL)
    bark = Label.objects.create(
        mid="/m/05tny_", name="Bark", description="Principally the sound of a dog.", word_label=dog
    )
    Clip.objects.get(pk=_clip_id(world.assignment)).labels.set([bark])
    body = login(ann).get(f"/api/work/assignments/{world.assignment.pk}").json()
    [clip] = body["clips"]
    assert clip["id"] == _clip_id(world.assignment)
    assert clip["hints"] == [
        {
            "word": "dog",
            "labels": [{"name": "Bark", "description": "Principally the sound of a dog."}],
        }
    ]
    assert (
        clip["audio_url"] == f"/api/work/assignments/{world.assignment.pk}/clips/{clip['id']}/audio"
    )
    assert body["batch"]["reward_cents"] == 10
    assert body["guidance"] == rules.guidance(caption_limits(world.batch))


def test_it_never_shows_a_worker_another_workers_caption_or_name(world: World, abe: Any) -> None:
    # Ann and Abe share the HIT; Abe's caption is his alone
    assert world.assignment.hit_id == world.submitted.hit_id
    mine = login(world.assignment.worker).get(f"/api/work/assignments/{world.assignment.pk}")
    text = mine.content.decode()
    assert "abe" not in text
    assert all(c["caption"] is None for c in mine.json()["clips"])
    theirs = login(abe).get(f"/api/work/assignments/{world.submitted.pk}").json()
    assert [c["caption"] for c in theirs["clips"]] == ["abe hears a dog bark"]


def test_it_plays_the_hits_audio_to_its_worker(
    world: World, ann: Any, settings: Any, tmp_path: Path
) -> None:
    settings.MEDIA_ROOT = tmp_path
    clip = Clip.objects.get(pk=_clip_id(world.assignment))
    clip.audio.save("clip.wav", ContentFile(wav_bytes()))
    response = _work(login(ann), "audio", world)
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == wav_bytes()


def test_it_plays_no_clip_outside_the_hit(world: World, ann: Any) -> None:
    other = _clip_outside(world.assignment)
    url = f"/api/work/assignments/{world.assignment.pk}/clips/{other}/audio"
    response = login(ann).get(url)
    assert response.status_code == 404
    assert response.json() == {
        "detail": f"Clip {other} is not part of assignment #{world.assignment.pk}."
    }


def test_it_says_why_a_clips_audio_cannot_be_played(
    world: World, ann: Any, settings: Any, tmp_path: Path
) -> None:
    settings.MEDIA_ROOT = tmp_path  # the clip's file, clips/audio/fetched.wav, is not there
    clip_id = _clip_id(world.assignment)
    response = _work(login(ann), "audio", world)
    assert response.status_code == 404
    assert response.json() == {
        "detail": f"The audio of clip {clip_id} cannot be played: its audio file "
        "clips/audio/fetched.wav is missing from storage. The clip is marked failed and is "
        "no longer offered for captioning."
    }
    assert Clip.objects.get(pk=clip_id).status == Clip.Status.FAILED


def test_it_says_when_a_clip_has_no_audio_yet(world: World, ann: Any) -> None:
    Clip.objects.filter(pk=_clip_id(world.assignment)).update(status=Clip.Status.PENDING, audio="")
    response = _work(login(ann), "audio", world)
    assert response.status_code == 404
    assert response.json() == {"detail": "This clip has no audio yet."}


def test_it_lists_the_workers_own_assignments_and_summary(world: World, abe: Any) -> None:
    client = login(abe)
    mine = client.get("/api/work/assignments").json()
    assert [(a["id"], a["state"]) for a in mine] == [(world.submitted.pk, "submitted")]
    summary = client.get("/api/work/summary").json()
    assert (summary["submitted"], summary["pending_cents"], summary["total_cents"]) == (1, 10, 0)


# Submit and return ------------------------------------------------------------------------


def test_a_worker_submits_captions(world: World, ann: Any) -> None:
    client = login(ann)
    response = _work(client, "submit", world)
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "submitted"
    mine = client.get(f"/api/work/assignments/{world.assignment.pk}").json()
    assert [c["caption"] for c in mine["clips"]] == [CAPTION]
    world.assignment.refresh_from_db()
    assert world.assignment.state == Assignment.State.SUBMITTED
    assert world.assignment.captions.get().text == CAPTION


@pytest.mark.parametrize(
    "text",
    [
        "this is a dog barking loudly",
        "<script>alert(1)</script> a dog barks",
        "a dog barks \u202e loudly outside",
        "a dog\x07 barks loudly",
        '=HYPERLINK("http://x.example/", "a dog barks loudly")',
        "dog " * 25_000,
        "",
    ],
)
def test_it_refuses_a_caption_with_the_hit_pages_message(world: World, ann: Any, text: str) -> None:
    clip_id = _clip_id(world.assignment)
    url = f"/api/work/assignments/{world.assignment.pk}/submit"
    response = _post(login(ann), url, {"captions": {str(clip_id): text}})
    problems = rules.errors(rules.trim(text), caption_limits(world.batch))
    if not problems:
        # stored raw: the pages escape it
        assert response.status_code == 200
        assert world.assignment.captions.get().text == rules.trim(text)
        return
    assert response.status_code == 400
    expected = [f"The caption for clip 1 {p.message}." for p in problems]
    assert response.json()["errors"] == {f"caption-{clip_id}": expected}
    assert not world.assignment.captions.exists()
    world.assignment.refresh_from_db()
    assert world.assignment.state == Assignment.State.ACCEPTED


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a dog barks\nloudly outside", "contains a line break; write the caption on one line"),
        ("a dog barks\r\nloudly outside", "contains a line break; write the caption on one line"),
        ("a dog\x00 barks loudly", "contains a control character (U+0000); please remove it"),
    ],
    ids=["lf", "crlf", "nul"],
)
def test_it_refuses_a_caption_with_a_line_break_or_a_nul(
    world: World, ann: Any, text: str, problem: str
) -> None:
    clip_id = _clip_id(world.assignment)
    url = f"/api/work/assignments/{world.assignment.pk}/submit"
    response = _post(login(ann), url, {"captions": {str(clip_id): text}})
    assert response.status_code == 400
    assert response.json()["errors"] == {
        f"caption-{clip_id}": [f"The caption for clip 1 {problem}."]
    }
    assert not world.assignment.captions.exists()


def test_it_refuses_a_caption_for_a_clip_outside_the_hit(world: World, ann: Any) -> None:
    url = f"/api/work/assignments/{world.assignment.pk}/submit"
    outside = _clip_outside(world.assignment)
    body = {"captions": {**captions_for(world.assignment), outside: CAPTION}}
    response = _post(login(ann), url, body)
    assert response.status_code == 400
    assert response.json()["errors"]["__all__"] == [f"Clips [{outside}] are not part of this HIT."]
    assert not world.assignment.captions.exists()


def test_it_names_a_caption_key_that_is_not_a_clip_id(world: World, ann: Any) -> None:
    url = f"/api/work/assignments/{world.assignment.pk}/submit"
    response = _post(login(ann), url, {"captions": {"first": CAPTION}})
    assert response.status_code == 422
    assert "captions" in json.dumps(response.json()["detail"])


def test_a_retried_submit_answers_as_the_first_and_stores_nothing_twice(
    world: World, ann: Any
) -> None:
    client = login(ann)
    first = _work(client, "submit", world)
    # the first answer was lost (a dropped connection, a killed web worker): the script
    # sends the same captions again
    again = _work(client, "submit", world)
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json()
    assert list(world.assignment.captions.values_list("text", flat=True)) == [CAPTION]


def test_a_second_submit_with_other_captions_is_409(world: World, ann: Any) -> None:
    client = login(ann)
    _work(client, "submit", world)
    url = f"/api/work/assignments/{world.assignment.pk}/submit"
    other = {"captions": captions_for(world.assignment, "a cat meows at the door")}
    response = _post(client, url, other)
    assert response.status_code == 409
    assert response.json() == {"detail": "This assignment is already submitted."}
    assert list(world.assignment.captions.values_list("text", flat=True)) == [CAPTION]


def test_a_late_submit_is_409_and_frees_the_slot(world: World, ann: Any) -> None:
    Assignment.objects.filter(pk=world.assignment.pk).update(
        accepted_at=timezone.now() - timedelta(hours=2),
        deadline=timezone.now() - timedelta(minutes=1),
    )
    response = _work(login(ann), "submit", world)
    assert response.status_code == 409
    assert "ran out" in response.json()["detail"]
    world.assignment.refresh_from_db()
    assert world.assignment.state == Assignment.State.EXPIRED
    assert Hit.objects.get(pk=world.assignment.hit_id).taken == 1  # Abe's submitted work


def test_a_blocked_worker_cannot_submit_the_hit_already_held(
    world: World, ann: Any, rey: Any
) -> None:
    worker_block(project=world.project, worker=ann, by=rey, reason="Copies the hints.")
    response = _work(login(ann), "submit", world)
    assert response.status_code == 409
    detail = response.json()["detail"]
    assert "You are blocked from this project's HITs" in detail
    assert "Copies the hints." in detail
    assert not world.assignment.captions.exists()
    world.assignment.refresh_from_db()
    assert world.assignment.state == Assignment.State.RETURNED
    assert Hit.objects.get(pk=world.assignment.hit_id).taken == 1  # Abe's submitted work


def test_a_worker_returns_a_hit(world: World, ann: Any) -> None:
    response = _work(login(ann), "return", world)
    assert response.status_code == 200
    assert response.json()["state"] == "returned"
    assert Hit.objects.get(pk=world.assignment.hit_id).taken == 1  # Abe's submitted work


def test_a_submitted_hit_cannot_be_returned(world: World, ann: Any) -> None:
    client = login(ann)
    _work(client, "submit", world)
    response = _work(client, "return", world)
    assert response.status_code == 409
    assert response.json() == {"detail": "This assignment is submitted; it cannot become returned."}


# Schema -----------------------------------------------------------------------------------


def test_the_openapi_schema_documents_the_annotation_api(db: None) -> None:
    schema = Client().get("/api/openapi.json").json()
    paths = set(schema["paths"])
    assert {
        "/api/projects/{slug}/batches",
        "/api/projects/{slug}/batches/{batch_id}",
        "/api/projects/{slug}/batches/{batch_id}/publish",
        "/api/projects/{slug}/batches/{batch_id}/pause",
        "/api/projects/{slug}/batches/{batch_id}/close",
        "/api/projects/{slug}/batches/{batch_id}/captions",
        "/api/work/claim",
        "/api/work/summary",
        "/api/work/assignments",
        "/api/work/assignments/{assignment_id}",
        "/api/work/assignments/{assignment_id}/clips/{clip_id}/audio",
        "/api/work/assignments/{assignment_id}/submit",
        "/api/work/assignments/{assignment_id}/return",
    } <= paths
    submit = schema["paths"]["/api/work/assignments/{assignment_id}/submit"]["post"]
    assert {"200", "400", "404", "409"} <= set(submit["responses"])
    assert "WorkAssignmentOut" in schema["components"]["schemas"]
