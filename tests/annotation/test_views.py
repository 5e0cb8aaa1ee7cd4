"""Who may open what on every URL of annotation.urls, and the worker and researcher pages.

An assignment exists only for the worker holding it: another worker, the project's
researcher or reviewer and outsiders all get 404. Batch pages follow the project rule:
404 outside the project, 403 for annotators, reviewers read, researchers act.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.db.models import F
from django.test import Client
from django.urls import URLPattern, reverse
from django.utils import timezone

from annotation import urls as annotation_urls
from annotation.models import (
    Assignment,
    Batch,
    Caption,
    ClipListen,
    ClipReport,
    Hit,
    VideoHintView,
)
from annotation.services import assignment_submit, hit_claim
from core.models import Project, Role
from core.services import membership_add
from crowd.services import worker_block
from curation.models import Subset
from tests.annotation.factories import (
    CAPTION,
    MakeBatch,
    captions_for,
    listened,
    make_clips,
    make_subset,
)
from tests.conftest import login, make_user, streamed, wav_bytes


@dataclass
class World:
    project: Project
    batch: Batch
    assignment: Assignment  # Ann's, accepted
    subset: Subset  # unpublished, for the publish form


@pytest.fixture
def world(project: Project, make_batch: MakeBatch, ann: Any) -> World:
    batch = make_batch(clips=2, captions_per_clip=2)
    assignment = hit_claim(worker=ann)
    assert assignment is not None
    subset = make_subset(project, make_clips(4))
    return World(project=project, batch=batch, assignment=assignment, subset=subset)


URL = Callable[[World], str]


def _clip_id(w: World) -> int:
    return w.assignment.hit.hit_clips.get().clip_id


URLS: dict[str, URL] = {
    "work": lambda w: reverse("work"),
    "work_claim": lambda w: reverse("work_claim"),
    "assignment_detail": lambda w: reverse("assignment_detail", args=[w.assignment.pk]),
    "assignment_submit": lambda w: reverse("assignment_submit", args=[w.assignment.pk]),
    "assignment_return": lambda w: reverse("assignment_return", args=[w.assignment.pk]),
    "assignment_clip_audio": lambda w: reverse(
        "assignment_clip_audio", args=[w.assignment.pk, _clip_id(w)]
    ),
    "assignment_clip_heard": lambda w: reverse(
        "assignment_clip_heard", args=[w.assignment.pk, _clip_id(w)]
    ),
    "assignment_video_hint": lambda w: reverse(
        "assignment_video_hint", args=[w.assignment.pk, _clip_id(w)]
    ),
    "assignment_clip_video": lambda w: reverse(
        "assignment_clip_video", args=[w.assignment.pk, _clip_id(w)]
    ),
    "assignment_report": lambda w: reverse("assignment_report", args=[w.assignment.pk]),
    "work_done": lambda w: reverse("work_done"),
    "batch_list": lambda w: reverse("batch_list", args=[w.project.slug]),
    "batch_detail": lambda w: reverse("batch_detail", args=[w.project.slug, w.batch.pk]),
    "batch_state": lambda w: reverse("batch_state", args=[w.project.slug, w.batch.pk]),
    "batch_platform_publish": lambda w: reverse(
        "batch_platform_publish", args=[w.project.slug, w.batch.pk, "prolific"]
    ),
}
POST_ONLY = [
    "work_claim",
    "assignment_submit",
    "assignment_return",
    "assignment_clip_heard",
    "assignment_video_hint",
    "assignment_report",
    "batch_state",
    "batch_platform_publish",
]
ASSIGNMENT_PAGES = [
    ("get", "assignment_detail"),
    ("post", "assignment_submit"),
    ("post", "assignment_return"),
    ("get", "assignment_clip_audio"),
    ("post", "assignment_clip_heard"),
    ("post", "assignment_video_hint"),
    ("get", "assignment_clip_video"),
    ("post", "assignment_report"),
]
BATCH_PAGES = [
    ("get", "batch_list"),
    ("post", "batch_list"),
    ("get", "batch_detail"),
    ("post", "batch_state"),
    ("post", "batch_platform_publish"),
]


def _post_data(world: World) -> dict[str, str]:
    """What a hostile POST to any of the URLs would send: captions, a batch, a state."""
    return {
        f"caption-{_clip_id(world)}": CAPTION,
        "name": "Sneaky batch",
        "subset": world.subset.slug,
        "split": "val",
        "clips_per_hit": "1",
        "reward_cents": "1",
        "time_allotted_minutes": "5",
        "lifetime_hours": "1",
        "auto_approve_days": "0",
        "min_words": "1",
        "max_words": "5",
        "state": "finished",
        "clip": str(_clip_id(world)),
        "problem": "audio_broken",
    }


def _request(client: Client, method: str, world: World, name: str) -> Any:
    url = URLS[name](world)
    if method == "post":
        return client.post(url, _post_data(world))
    return client.get(url)


def _unchanged(world: World) -> bool:
    world.assignment.refresh_from_db()
    world.batch.refresh_from_db()
    return (
        world.assignment.state == Assignment.State.ACCEPTED
        and not Caption.objects.exists()
        and not ClipReport.objects.exists()
        and not ClipListen.objects.exists()
        and not VideoHintView.objects.exists()
        and Batch.objects.count() == 1
        and world.batch.state == Batch.State.PUBLISHED
    )


def _form_data(world: World, **changes: str) -> dict[str, str]:
    data = _post_data(world)
    data.update(name="Val captions", min_words="3", max_words="40", **changes)
    return data


# Coverage and anonymous visitors -------------------------------------------------------


def test_it_covers_every_url_in_annotation_urls() -> None:
    names = {p.name for p in annotation_urls.urlpatterns if isinstance(p, URLPattern)}
    assert names == set(URLS)


@pytest.mark.parametrize("name", list(URLS))
def test_it_redirects_anonymous_visitors_to_login(world: World, name: str) -> None:
    url = URLS[name](world)
    response = Client().get(url)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"


@pytest.mark.parametrize("name", [*POST_ONLY, "batch_list"])
def test_it_redirects_anonymous_posts_to_login_without_acting(world: World, name: str) -> None:
    response = _request(Client(), "post", world, name)
    assert response.status_code == 302
    assert response["Location"].startswith(f"{reverse('login')}?next=")
    assert _unchanged(world)


@pytest.mark.parametrize("name", POST_ONLY)
def test_it_refuses_get_on_post_only_urls(world: World, name: str, ann: Any) -> None:
    assert login(ann).get(URLS[name](world)).status_code == 405


# Assignments: only their worker --------------------------------------------------------


@pytest.mark.parametrize("persona", ["abe", "alice", "rey", "olive", "rita"])
@pytest.mark.parametrize(("method", "name"), ASSIGNMENT_PAGES)
def test_it_hides_an_assignment_from_everyone_but_its_worker(
    world: World, request: pytest.FixtureRequest, persona: str, method: str, name: str
) -> None:
    client = login(request.getfixturevalue(persona))
    assert _request(client, method, world, name).status_code == 404
    assert _unchanged(world)


def test_it_shows_the_worker_a_caption_box_per_clip(make_batch: MakeBatch, ann: Any) -> None:
    make_batch(clips=3, clips_per_hit=3)
    assignment = hit_claim(worker=ann)
    assert assignment is not None
    response = login(ann).get(reverse("assignment_detail", args=[assignment.pk]))
    assert response.status_code == 200
    for clip_id in assignment.hit.hit_clips.values_list("clip_id", flat=True):
        assert f'name="caption-{clip_id}"'.encode() in response.content


def test_it_plays_the_hits_audio_to_its_worker(
    world: World, ann: Any, settings: Any, tmp_path: Path
) -> None:
    settings.MEDIA_ROOT = tmp_path
    clip = world.assignment.hit.hit_clips.get().clip
    clip.audio.save("clip.wav", ContentFile(wav_bytes()))
    response = login(ann).get(URLS["assignment_clip_audio"](world))
    assert response.status_code == 200
    assert streamed(response) == wav_bytes()
    assert response["Cache-Control"] == "private, max-age=3600"


def test_it_plays_no_clip_outside_the_hit(world: World, ann: Any) -> None:
    other = Hit.objects.exclude(pk=world.assignment.hit_id).get().hit_clips.get().clip_id
    url = reverse("assignment_clip_audio", args=[world.assignment.pk, other])
    assert login(ann).get(url).status_code == 404


# Work ----------------------------------------------------------------------------------


def test_it_offers_work_to_annotators(batch: Batch, ann: Any) -> None:
    response = login(ann).get(reverse("work"))
    assert response.status_code == 200
    assert b"Start working" in response.content


def test_it_tells_non_annotators_they_have_no_work(olive: Any) -> None:
    response = login(olive).get(reverse("work"))
    assert response.status_code == 200
    assert b"You are not an annotator in any project" in response.content
    assert b"Start working" not in response.content


def test_it_opens_the_claimed_hit(batch: Batch, ann: Any) -> None:
    response = login(ann).post(reverse("work_claim"))
    assignment = Assignment.objects.get(worker=ann)
    assert response.status_code == 302
    assert response["Location"] == assignment.get_absolute_url()


def test_it_says_when_there_is_no_work_left(project: Project, ann: Any) -> None:
    response = login(ann).post(reverse("work_claim"), follow=True)
    assert response.redirect_chain == [(reverse("work"), 302)]
    assert b"No HITs are available for you right now" in response.content
    assert not Assignment.objects.exists()


def test_it_claims_nothing_for_an_outsider(batch: Batch, olive: Any) -> None:
    response = login(olive).post(reverse("work_claim"))
    assert response["Location"] == reverse("work")
    assert not Assignment.objects.exists()


def test_it_moves_on_to_the_next_hit_after_submitting(world: World, ann: Any) -> None:
    listened(world.assignment)
    response = login(ann).post(URLS["assignment_submit"](world), _post_data(world))
    world.assignment.refresh_from_db()
    assert world.assignment.state == Assignment.State.SUBMITTED
    following = Assignment.objects.get(worker=ann, state=Assignment.State.ACCEPTED)
    assert response["Location"] == following.get_absolute_url()
    assert list(Caption.objects.values_list("text", flat=True)) == [CAPTION]


def test_a_resent_submit_moves_on_as_the_first_and_stores_nothing_twice(
    world: World, ann: Any
) -> None:
    listened(world.assignment)
    client = login(ann)
    first = client.post(URLS["assignment_submit"](world), _post_data(world))
    # the browser sends the form again (its first answer was lost): same captions
    again = client.post(URLS["assignment_submit"](world), _post_data(world), follow=True)
    following = Assignment.objects.get(worker=ann, state=Assignment.State.ACCEPTED)
    assert first["Location"] == following.get_absolute_url()
    assert again.redirect_chain == [(following.get_absolute_url(), 302)]
    assert again.status_code == 200
    assert "Submitted. Thank you!" in again.content.decode()
    assert list(Caption.objects.values_list("text", flat=True)) == [CAPTION]


def test_it_refuses_the_submit_of_a_worker_blocked_since_claiming(
    world: World, ann: Any, rey: Any
) -> None:
    worker_block(project=world.project, worker=ann, by=rey, reason="Copies the hints.")
    client = login(ann)
    response = client.post(URLS["assignment_submit"](world), _post_data(world), follow=True)
    html = response.content.decode()
    assert "You are blocked from this project&#x27;s HITs" in html
    assert "Copies the hints." in html
    assert not Caption.objects.exists()
    world.assignment.refresh_from_db()
    assert world.assignment.state == Assignment.State.RETURNED


def test_it_goes_back_to_work_after_the_last_hit(make_batch: MakeBatch, ann: Any) -> None:
    make_batch(clips=1)
    assignment = hit_claim(worker=ann)
    assert assignment is not None
    data = {f"caption-{k}": v for k, v in captions_for(listened(assignment)).items()}
    response = login(ann).post(reverse("assignment_submit", args=[assignment.pk]), data)
    assert response["Location"] == reverse("work_done")


def test_it_shows_caption_problems_next_to_the_clip_and_keeps_the_text(
    world: World, ann: Any
) -> None:
    data = {f"caption-{_clip_id(world)}": "dog <b>barks</b>"}
    response = login(ann).post(URLS["assignment_submit"](world), data)
    assert response.status_code == 200
    assert b"The caption for clip 1 has 2 words; write at least 3." in response.content
    assert b"dog &lt;b&gt;barks&lt;/b&gt;</textarea>" in response.content
    assert not Caption.objects.exists()


def test_it_refuses_a_100_kb_caption_on_the_page(world: World, ann: Any) -> None:
    data = {f"caption-{_clip_id(world)}": "x" * 102_400}
    response = login(ann).post(URLS["assignment_submit"](world), data)
    assert b"is 102,400 characters long; the limit is 500." in response.content
    assert not Caption.objects.exists()


def test_it_refuses_an_rtl_override_on_the_page(world: World, ann: Any) -> None:
    data = {f"caption-{_clip_id(world)}": "a dog \u202eskrab loudly"}
    response = login(ann).post(URLS["assignment_submit"](world), data)
    assert b"text-direction control character (U+202E)" in response.content
    assert not Caption.objects.exists()


def test_it_sends_a_late_worker_back_to_work(world: World, ann: Any) -> None:
    Assignment.objects.filter(pk=world.assignment.pk).update(
        accepted_at=F("accepted_at") - timedelta(hours=1), deadline=timezone.now()
    )
    response = login(ann).post(URLS["assignment_submit"](world), _post_data(world), follow=True)
    assert b"The time allotted for this HIT ran out" in response.content
    world.assignment.refresh_from_db()
    assert world.assignment.state == Assignment.State.EXPIRED


def test_it_returns_a_hit_to_the_pool(world: World, ann: Any) -> None:
    response = login(ann).post(URLS["assignment_return"](world))
    assert response["Location"] == reverse("work")
    world.assignment.refresh_from_db()
    assert world.assignment.state == Assignment.State.RETURNED
    world.assignment.hit.refresh_from_db()
    assert world.assignment.hit.taken == 0


# Hostile captions ----------------------------------------------------------------------

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)> a dog barks'


def test_it_shows_a_stored_script_caption_escaped(world: World, ann: Any, alice: Any) -> None:
    # Submitting refuses < and >, but captions imported from a corpus or older data may
    # hold them: pages must escape whatever is stored.
    assignment_submit(
        assignment=listened(world.assignment), worker=ann, captions=captions_for(world.assignment)
    )
    Caption.objects.update(text=HOSTILE)
    response = login(alice).get(URLS["batch_detail"](world))
    assert b"&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img src=x" in response.content
    assert b"<script>alert" not in response.content
    assert b"<img src=x" not in response.content


def test_it_shows_a_script_caption_escaped_to_its_worker(world: World, ann: Any) -> None:
    data = {f"caption-{_clip_id(world)}": f"{HOSTILE} {'word ' * 50}"}  # too long: re-shown
    response = login(ann).post(URLS["assignment_submit"](world), data)
    assert b"&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in response.content
    assert b"<script>alert" not in response.content


# Batches -------------------------------------------------------------------------------


@pytest.fixture
def rita(olive: Any) -> Any:
    """A reviewer, but of Olive's project, not Alice's."""
    user = make_user("rita")
    membership_add(project=Project.objects.get(slug="birds"), user=user, role=Role.REVIEWER)
    return user


@pytest.mark.parametrize("persona", ["olive", "rita"])
@pytest.mark.parametrize(("method", "name"), BATCH_PAGES)
def test_it_hides_batches_from_other_projects_members(
    world: World, request: pytest.FixtureRequest, persona: str, method: str, name: str
) -> None:
    client = login(request.getfixturevalue(persona))
    assert _request(client, method, world, name).status_code == 404
    assert _unchanged(world)


@pytest.mark.parametrize(("method", "name"), BATCH_PAGES)
def test_it_forbids_batches_to_annotators(world: World, ann: Any, method: str, name: str) -> None:
    assert _request(login(ann), method, world, name).status_code == 403
    assert _unchanged(world)


@pytest.mark.parametrize("name", ["batch_list", "batch_detail"])
def test_it_shows_batches_to_reviewers(world: World, rey: Any, name: str) -> None:
    response = login(rey).get(URLS[name](world))
    assert response.status_code == 200
    assert b"Publish a batch" not in response.content


@pytest.mark.parametrize("name", ["batch_list", "batch_state"])
def test_it_forbids_reviewers_to_change_batches(world: World, rey: Any, name: str) -> None:
    assert _request(login(rey), "post", world, name).status_code == 403
    assert _unchanged(world)


def test_it_publishes_a_batch_from_the_form(world: World, alice: Any) -> None:
    response = login(alice).post(URLS["batch_list"](world), _form_data(world, clips_per_hit="2"))
    batch = Batch.objects.get(name="Val captions")
    assert response["Location"] == batch.get_absolute_url()
    assert (batch.subset, batch.captions_per_clip, batch.hits.count()) == (world.subset, 5, 2)
    assert batch.created_by == alice


def test_it_shows_why_a_batch_was_not_published(world: World, alice: Any) -> None:
    response = login(alice).post(URLS["batch_list"](world), _form_data(world, split="test"))
    assert response.status_code == 200
    assert b"has no fetched clips in its" in response.content
    assert Batch.objects.count() == 1


@pytest.mark.parametrize("field", ["lifetime_hours", "time_allotted_minutes", "reward_cents"])
def test_it_names_a_huge_batch_number_on_the_form(world: World, alice: Any, field: str) -> None:
    response = login(alice).post(URLS["batch_list"](world), _form_data(world, **{field: "9" * 30}))

    assert response.status_code == 200
    assert field in response.context["form"].errors
    assert b"Ensure this value is less than or equal to" in response.content
    assert Batch.objects.count() == 1


def test_it_offers_only_this_projects_subsets(world: World, olive: Any, alice: Any) -> None:
    theirs = make_subset(Project.objects.get(slug="birds"), make_clips(1))
    data = _form_data(world, subset=theirs.slug)
    response = login(alice).post(URLS["batch_list"](world), data)
    assert response.status_code == 200
    assert b"Select a valid choice" in response.content
    assert Batch.objects.count() == 1


def test_it_pauses_a_batch(world: World, alice: Any) -> None:
    response = login(alice).post(URLS["batch_state"](world), {"state": "paused"})
    assert response["Location"] == world.batch.get_absolute_url()
    world.batch.refresh_from_db()
    assert world.batch.state == Batch.State.PAUSED


def test_it_reports_an_impossible_batch_state(world: World, alice: Any) -> None:
    response = login(alice).post(URLS["batch_state"](world), {"state": "draft"}, follow=True)
    assert b"A published batch cannot become draft." in response.content
    world.batch.refresh_from_db()
    assert world.batch.state == Batch.State.PUBLISHED


def test_it_shows_batch_progress(world: World, ann: Any, alice: Any) -> None:
    assignment_submit(
        assignment=listened(world.assignment), worker=ann, captions=captions_for(world.assignment)
    )
    response = login(alice).get(URLS["batch_detail"](world))
    assert response.context["progress"] == {
        "clips": 2,
        "wanted": 4,
        "submitted": 1,
        "approved": 0,
        "rejected": 0,
        "in_progress": 0,
    }
