"""Who may open what on every URL of crowd.urls, and what the pages do.

Project pages follow the project rule: 404 outside the project (outsiders, reviewers of
another project), 403 for annotators, reviewers review, researchers also configure and
see the money. Workers' own pages show only their own things.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, reverse

from annotation.models import Assignment, Batch, Caption, Hit, VideoHintView
from annotation.services import assignment_review, hit_claim
from core.models import Project, Role
from core.services import membership_add, profile_country_set
from crowd import urls as crowd_urls
from crowd.models import (
    BatchRequirements,
    Block,
    LedgerEntry,
    Qualification,
    QualificationAttempt,
    Review,
)
from crowd.services import (
    bonus_pay,
    qualification_create,
    qualification_set_gold,
    qualification_submit,
    worker_block,
)
from tests.annotation.factories import make_clips, make_subset
from tests.conftest import login, streamed
from tests.crowd.conftest import MakeBatch, Submit


@dataclass
class World:
    project: Project
    batch: Batch
    assignment: Assignment  # Ann's, submitted
    caption: Caption
    qualification: Qualification
    attempt: QualificationAttempt  # Abe's, waiting for grading
    worker: Any  # Ann
    imported: Caption  # written in Label Studio, waiting for a reviewer


@pytest.fixture
def world(
    make_batch: MakeBatch,
    submit: Submit,
    qualification: Qualification,
    ann: Any,
    abe: Any,
    alice: Any,
) -> World:
    batch = make_batch(clips=2, captions_per_clip=2)
    assignment = submit(ann)
    clip_ids = list(qualification.items.values_list("clip_id", flat=True))
    qualification_set_gold(
        qualification=qualification, by=alice, golds={clip_ids[0]: "GOLD: a kettle whistles"}
    )
    attempt = qualification_submit(
        qualification=qualification,
        worker=abe,
        answers=dict.fromkeys(clip_ids, "a kettle whistles on a stove"),
    )
    caption = assignment.captions.get()
    imported = Caption.objects.create(
        provenance=Caption.Provenance.IMPORTED,
        imported_into=batch.project,
        clip_id=caption.clip_id,
        text="a kettle whistles loudly",
        external_id="label-studio/3/1#1",
        pending_review=True,
    )
    return World(
        project=batch.project,
        batch=batch,
        assignment=assignment,
        caption=caption,
        qualification=qualification,
        attempt=attempt,
        worker=ann,
        imported=imported,
    )


URL = Callable[[World], str]


def _p(name: str, *extra: Callable[[World], Any]) -> URL:
    return lambda w: reverse(name, args=[w.project.slug, *(f(w) for f in extra)])


def _qclip(w: World) -> int:
    first = w.qualification.items.first()
    assert first is not None
    return first.clip_id


URLS: dict[str, URL] = {
    "review_queue": _p("review_queue"),
    "review_approve": _p("review_approve", lambda w: w.assignment.pk),
    "review_reject": _p("review_reject", lambda w: w.assignment.pk),
    "review_fix": _p("review_fix", lambda w: w.assignment.pk),
    "review_imported": _p("review_imported", lambda w: w.imported.pk, lambda w: "approve"),
    "worker_list": _p("worker_list"),
    "worker_detail": _p("worker_detail", lambda w: w.worker.pk),
    "worker_approve_all": _p("worker_approve_all", lambda w: w.worker.pk),
    "worker_block": _p("worker_block", lambda w: w.worker.pk),
    "worker_unblock": _p("worker_unblock", lambda w: w.worker.pk),
    "worker_bonus": _p("worker_bonus", lambda w: w.worker.pk),
    "ledger": _p("ledger"),
    "ledger_csv": _p("ledger_csv"),
    "qualification_list": _p("qualification_list"),
    "qualification_detail": _p("qualification_detail", lambda w: w.qualification.pk),
    "attempt_detail": _p("attempt_detail", lambda w: w.attempt.pk),
    "attempt_grade": _p("attempt_grade", lambda w: w.attempt.pk),
    "batch_requirements": _p("batch_requirements", lambda w: w.batch.pk),
    "my_qualifications": lambda w: reverse("my_qualifications"),
    "qualification_take": lambda w: reverse("qualification_take", args=[w.qualification.pk]),
    "qualification_clip_audio": lambda w: reverse(
        "qualification_clip_audio", args=[w.qualification.pk, _qclip(w)]
    ),
    "my_earnings": lambda w: reverse("my_earnings"),
    "work_blocked": lambda w: reverse("work_blocked"),
}
POST_ONLY = [
    "review_imported",
    "review_approve",
    "review_reject",
    "review_fix",
    "worker_approve_all",
    "worker_block",
    "worker_unblock",
    "worker_bonus",
    "attempt_grade",
]
GET_ONLY = [
    "review_queue",
    "worker_list",
    "worker_detail",
    "ledger",
    "ledger_csv",
    "attempt_detail",
    "my_qualifications",
    "qualification_clip_audio",
    "my_earnings",
    "work_blocked",
]
# (method, name) of every project page reviewers may use
REVIEWER_PAGES = [
    ("get", "review_queue"),
    ("post", "review_approve"),
    ("post", "review_reject"),
    ("post", "review_fix"),
    ("post", "review_imported"),
    ("get", "worker_list"),
    ("get", "worker_detail"),
    ("post", "worker_approve_all"),
    ("post", "worker_block"),
    ("post", "worker_unblock"),
    ("post", "worker_bonus"),
    ("get", "qualification_list"),
    ("get", "qualification_detail"),
    ("get", "attempt_detail"),
    ("post", "attempt_grade"),
    ("get", "batch_requirements"),
]
RESEARCHER_PAGES = [
    ("get", "ledger"),
    ("get", "ledger_csv"),
    ("post", "qualification_list"),
    ("post", "qualification_detail"),
    ("post", "batch_requirements"),
]
PROJECT_PAGES = REVIEWER_PAGES + RESEARCHER_PAGES


def _post_data(w: World) -> dict[str, str]:
    """Everything a hostile POST to any of the URLs could send."""
    clip_id = _qclip(w)
    return {
        "reason": "off_topic",
        "feedback": "sneaky",
        f"fix-{w.caption.pk}": "a sneaky fix of the caption",
        "amount_cents": "500",
        "idempotency_key": "sneaky-key",
        "decision": "approve",
        "name": "Sneaky test",
        "clip_ids": str(clip_id),
        "min_words": "1",
        "max_words": "5",
        "min_approval_percent": "100",
        "min_approved": "1000",
        f"gold-{clip_id}": "sneaky gold",
        f"caption-{clip_id}": "a sneaky caption of the clip",
    }


def _request(client: Client, method: str, w: World, name: str) -> Any:
    url = URLS[name](w)
    return client.post(url, _post_data(w)) if method == "post" else client.get(url)


def _unchanged(w: World) -> bool:
    w.assignment.refresh_from_db()
    w.caption.refresh_from_db()
    w.attempt.refresh_from_db()
    return (
        Caption.objects.filter(pk=w.imported.pk, pending_review=True).exists()
        and w.assignment.state == Assignment.State.SUBMITTED
        and w.caption.fixed_text == ""
        and w.attempt.state == QualificationAttempt.State.SUBMITTED
        and not Review.objects.exists()
        and not Block.objects.exists()
        and not LedgerEntry.objects.exists()
        and not BatchRequirements.objects.exists()
        and Qualification.objects.count() == 1
        and "sneaky" not in "".join(w.qualification.items.values_list("gold_caption", flat=True))
    )


# Coverage, anonymous visitors, methods -------------------------------------------------


def test_it_covers_every_url_in_crowd_urls() -> None:
    names = {p.name for p in crowd_urls.urlpatterns if isinstance(p, URLPattern)}
    assert names == set(URLS)


@pytest.mark.parametrize("name", list(URLS))
def test_it_redirects_anonymous_visitors_to_login(world: World, name: str) -> None:
    url = URLS[name](world)
    response = Client().get(url)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"


@pytest.mark.parametrize("name", [n for n in URLS if n not in GET_ONLY])
def test_it_redirects_anonymous_posts_without_acting(world: World, name: str) -> None:
    response = _request(Client(), "post", world, name)
    assert response.status_code == 302
    assert response["Location"].startswith(f"{reverse('login')}?next=")
    assert _unchanged(world)


@pytest.mark.parametrize("name", POST_ONLY)
def test_it_refuses_get_on_post_only_urls(world: World, name: str, rey: Any) -> None:
    assert login(rey).get(URLS[name](world)).status_code == 405


@pytest.mark.parametrize("name", GET_ONLY)
def test_it_refuses_post_on_read_only_urls(world: World, name: str, alice: Any) -> None:
    assert _request(login(alice), "post", world, name).status_code == 405
    assert _unchanged(world)


# Project pages -------------------------------------------------------------------------


@pytest.mark.parametrize("persona", ["olive", "rex"])
@pytest.mark.parametrize(("method", "name"), PROJECT_PAGES)
def test_it_hides_project_pages_outside_the_project(
    world: World, request: pytest.FixtureRequest, persona: str, method: str, name: str
) -> None:
    client = login(request.getfixturevalue(persona))
    assert _request(client, method, world, name).status_code == 404
    assert _unchanged(world)


@pytest.mark.parametrize("persona", ["ann", "abe"])
@pytest.mark.parametrize(("method", "name"), PROJECT_PAGES)
def test_it_forbids_project_pages_to_annotators(
    world: World, request: pytest.FixtureRequest, persona: str, method: str, name: str
) -> None:
    client = login(request.getfixturevalue(persona))
    assert _request(client, method, world, name).status_code == 403
    assert _unchanged(world)


@pytest.mark.parametrize(("method", "name"), RESEARCHER_PAGES)
def test_it_forbids_researcher_pages_to_reviewers(
    world: World, rey: Any, method: str, name: str
) -> None:
    assert _request(login(rey), method, world, name).status_code == 403
    assert _unchanged(world)


@pytest.mark.parametrize("persona", ["rey", "alice"])
@pytest.mark.parametrize("name", [n for m, n in REVIEWER_PAGES if m == "get"])
def test_it_shows_review_pages_to_reviewers_and_researchers(
    world: World, request: pytest.FixtureRequest, persona: str, name: str
) -> None:
    assert login(request.getfixturevalue(persona)).get(URLS[name](world)).status_code == 200


@pytest.mark.parametrize("name", [n for m, n in RESEARCHER_PAGES if m == "get"])
def test_it_shows_money_pages_to_researchers(world: World, alice: Any, name: str) -> None:
    assert login(alice).get(URLS[name](world)).status_code == 200


def _foreign_world(world: World, olive: Any, make_batch: MakeBatch, submit: Submit) -> None:
    """Swaps the world's objects for ones of Olive's project, keeping the sounds slug."""
    birds = Project.objects.get(slug="birds")
    membership_add(project=birds, user=world.worker, role=Role.ANNOTATOR)
    foreign_batch = make_batch(clips=1, project=birds, created_by=olive)
    world.batch = foreign_batch
    world.assignment = submit(world.worker, batch=foreign_batch)
    world.caption = world.assignment.captions.get()


@pytest.mark.parametrize(
    "name",
    ["review_approve", "review_reject", "review_fix", "batch_requirements"],
)
def test_it_404s_objects_of_another_project_under_this_projects_address(
    world: World, olive: Any, make_batch: MakeBatch, submit: Submit, alice: Any, name: str
) -> None:
    _foreign_world(world, olive, make_batch, submit)
    assert _request(login(alice), "post", world, name).status_code == 404
    world.assignment.refresh_from_db()
    assert world.assignment.state == Assignment.State.SUBMITTED
    assert not BatchRequirements.objects.exists()


@pytest.mark.parametrize("name", ["worker_detail", "worker_block", "worker_bonus"])
def test_it_404s_people_who_are_not_workers_of_the_project(
    world: World, olive: Any, alice: Any, name: str
) -> None:
    world.worker = olive
    method = "get" if name == "worker_detail" else "post"
    assert _request(login(alice), method, world, name).status_code == 404
    assert not Block.objects.exists()
    assert not LedgerEntry.objects.exists()


def test_it_404s_an_attempt_of_another_project(world: World, olive: Any, alice: Any) -> None:
    birds = Project.objects.get(slug="birds")
    subset = make_subset(birds, make_clips(1))
    foreign = qualification_create(
        project=birds, created_by=olive, name="Birds", clip_ids=str(subset.clips.get().pk)
    )
    url = reverse("qualification_detail", args=["sounds", foreign.pk])
    assert login(alice).get(url).status_code == 404


# Workers' own pages --------------------------------------------------------------------


@pytest.mark.parametrize("persona", ["olive", "rey", "alice", "rex"])
@pytest.mark.parametrize(
    ("method", "name"),
    [
        ("get", "qualification_take"),
        ("post", "qualification_take"),
        ("get", "qualification_clip_audio"),
    ],
)
def test_it_shows_a_qualification_only_to_annotators_of_its_project(
    world: World, request: pytest.FixtureRequest, persona: str, method: str, name: str
) -> None:
    client = login(request.getfixturevalue(persona))
    assert _request(client, method, world, name).status_code == 404
    assert QualificationAttempt.objects.count() == 1


def test_it_plays_no_clip_outside_the_qualification(world: World, ann: Any) -> None:
    url = reverse(
        "qualification_clip_audio",
        args=[world.qualification.pk, world.caption.clip_id],  # a HIT clip, not a test clip
    )
    assert login(ann).get(url).status_code == 404


def test_it_never_shows_gold_captions_to_the_worker(world: World, ann: Any) -> None:
    response = login(ann).get(URLS["qualification_take"](world))
    assert response.status_code == 200
    assert b"GOLD:" not in response.content
    assert f'name="caption-{_qclip(world)}"'.encode() in response.content


def test_it_shows_gold_captions_to_the_grader(world: World, rey: Any) -> None:
    response = login(rey).get(URLS["attempt_detail"](world))
    assert b"GOLD: a kettle whistles" in response.content
    assert b"a kettle whistles on a stove" in response.content


def test_it_takes_a_qualification_through_the_page(world: World, ann: Any) -> None:
    clip_ids = world.qualification.items.values_list("clip_id", flat=True)
    data = {f"caption-{c}": "a kettle whistles on a stove" for c in clip_ids}
    response = login(ann).post(URLS["qualification_take"](world), data)
    assert response.status_code == 302
    assert response["Location"] == reverse("my_qualifications")
    assert QualificationAttempt.objects.filter(worker=ann, state="submitted").exists()


def test_it_shows_the_rule_a_qualification_answer_breaks(world: World, ann: Any) -> None:
    clip_ids = list(world.qualification.items.values_list("clip_id", flat=True))
    data = {f"caption-{c}": "a kettle whistles on a stove" for c in clip_ids}
    data[f"caption-{clip_ids[1]}"] = "kettle"
    response = login(ann).post(URLS["qualification_take"](world), data)
    assert response.status_code == 200
    assert b"The caption for clip 2 has 1 word" in response.content
    assert b"a kettle whistles on a stove" in response.content  # the answers are kept
    assert not QualificationAttempt.objects.filter(worker=ann).exists()


def test_it_lists_the_qualifications_a_worker_can_take(world: World, ann: Any) -> None:
    response = login(ann).get(URLS["my_qualifications"](world))
    assert b"Listening test" in response.content
    assert b"Take the test" in response.content


def test_it_shows_a_worker_only_their_own_earnings(
    world: World, submit: Submit, ann: Any, abe: Any, rey: Any
) -> None:
    bonus_pay(
        project=world.project,
        worker=ann,
        by=rey,
        amount_cents=77,
        reason="Ann's secret bonus",
        idempotency_key="k",
        batch=world.batch,
    )
    response = login(abe).get(URLS["my_earnings"](world))
    assert response.status_code == 200
    assert b"secret" not in response.content
    assert b"$0.00" in response.content
    mine = login(ann).get(URLS["my_earnings"](world))
    assert b"Ann&#x27;s secret bonus" in mine.content
    assert b"$0.77" in mine.content
    assert b"rey" not in mine.content  # who paid is not shown to workers


def _figures(html: str) -> tuple[str, str]:
    earned = html.split('data-testid="earned">', 1)[1].split("</dd>", 1)[0]
    pending = html.split('data-testid="pending">', 1)[1].split("</dd>", 1)[0]
    return earned, pending


def test_the_earnings_page_and_the_hit_page_show_the_same_figures(
    world: World, make_batch: MakeBatch, ann: Any, rey: Any
) -> None:
    """Ann's first HIT waits for review (pending, not earned); after a bonus, both pages
    say earned $0.77 and pending the HIT's reward."""
    bonus_pay(project=world.project, worker=ann, by=rey, amount_cents=77, reason="r",
              idempotency_key="k", batch=world.batch)  # fmt: skip
    client = login(ann)
    hit_page = client.post(reverse("work_claim"), follow=True).content.decode()
    earnings = client.get(reverse("my_earnings")).content.decode()

    pending = f"${world.batch.reward_cents / 100:.2f} <small>not earned yet</small>"
    assert _figures(hit_page) == _figures(earnings)
    assert _figures(earnings) == ('<a href="/work/earnings/">$0.77</a> <small>incl. $0.77 '
                                  "bonus</small>", pending)  # fmt: skip


def test_it_sends_a_blocked_worker_to_the_block_page(world: World, abe: Any, rey: Any) -> None:
    worker_block(project=world.project, worker=abe, by=rey, reason="Copies <the> hints.")
    client = login(abe)
    response = client.post(reverse("work_claim"))
    assert response.status_code == 302
    assert response["Location"] == reverse("work_blocked")
    page = client.get(reverse("work_blocked"))
    assert b"Copies &lt;the&gt; hints." in page.content
    assert not Assignment.objects.filter(worker=abe).exists()


def test_it_shows_the_block_on_the_work_page(world: World, abe: Any, rey: Any) -> None:
    worker_block(project=world.project, worker=abe, by=rey, reason="Copies the hints.")
    response = login(abe).get(reverse("work"))
    assert b"You are blocked from the HITs of Everyday sounds: Copies the hints." in (
        response.content
    )


def test_it_tells_an_unblocked_worker_so(world: World, abe: Any) -> None:
    assert b"You are not blocked" in login(abe).get(URLS["work_blocked"](world)).content


# Review through the pages --------------------------------------------------------------


def test_it_shows_each_submitted_caption_escaped_with_its_hints(world: World, rey: Any) -> None:
    Caption.objects.filter(pk=world.caption.pk).update(text='<script>alert("x")</script> dog')
    response = login(rey).get(URLS["review_queue"](world))
    assert response.status_code == 200
    assert b"<script>alert" not in response.content
    assert b"&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; dog" in response.content
    assert reverse("clip_audio", args=["sounds", world.caption.clip_id]).encode() in (
        response.content
    )
    assert b"crowd_review.js" in response.content


def test_it_shows_whether_the_video_hint_was_used(world: World, rey: Any) -> None:
    queue = URLS["review_queue"](world)
    assert b"video hint not used" in login(rey).get(queue).content
    submitted_at = world.assignment.submitted_at
    assert submitted_at is not None
    VideoHintView.objects.create(
        assignment=world.assignment,
        clip_id=world.caption.clip_id,
        opened_at=submitted_at - timedelta(minutes=2),
    )
    assert "video hint opened 2\xa0minutes before submitting" in (
        login(rey).get(queue).content.decode()
    )


def test_it_rejects_through_the_queue_and_reopens_the_slot(world: World, rey: Any) -> None:
    queue = URLS["review_queue"](world) + "?worker=" + str(world.worker.pk)
    response = login(rey).post(
        URLS["review_reject"](world), {"reason": "visual", "feedback": "", "next": queue}
    )
    assert response.status_code == 302
    assert response["Location"] == queue
    world.assignment.refresh_from_db()
    assert world.assignment.state == Assignment.State.REJECTED
    assert Review.objects.get().reason == "visual"
    assert Hit.objects.get(pk=world.assignment.hit_id).taken == 0


def test_it_rejects_nothing_without_a_reason(world: World, rey: Any) -> None:
    login(rey).post(URLS["review_reject"](world), {"reason": ""})
    assert _unchanged(world)


def test_it_never_redirects_off_the_site(world: World, rey: Any) -> None:
    response = login(rey).post(URLS["review_approve"](world), {"next": "https://evil.example/"})
    assert response["Location"] == URLS["review_queue"](world)


def test_it_fixes_and_approves_through_the_queue(world: World, rey: Any) -> None:
    data = {f"fix-{world.caption.pk}": "a dog barks as cars pass by"}
    login(rey).post(URLS["review_fix"](world), data)
    world.caption.refresh_from_db()
    assert world.caption.fixed_text == "a dog barks as cars pass by"
    assert world.caption.text != world.caption.fixed_text
    world.assignment.refresh_from_db()
    assert world.assignment.state == Assignment.State.APPROVED


def test_it_bulk_approves_from_the_worker_page(world: World, rey: Any) -> None:
    response = login(rey).post(URLS["worker_approve_all"](world))
    assert response["Location"] == URLS["worker_detail"](world)
    world.assignment.refresh_from_db()
    assert world.assignment.state == Assignment.State.APPROVED


def test_it_pays_a_bonus_once_when_the_form_is_sent_twice(world: World, rey: Any) -> None:
    client = login(rey)
    data = {
        "amount_cents": "40",
        "batch": str(world.batch.pk),
        "reason": "Thorough",
        "idempotency_key": "form-1",
    }
    client.post(URLS["worker_bonus"](world), data)
    client.post(URLS["worker_bonus"](world), data)
    assert LedgerEntry.objects.get().amount_cents == 40


def test_the_worker_page_refuses_a_bonus_past_the_batchs_cap(world: World, rey: Any) -> None:
    Batch.objects.filter(pk=world.batch.pk).update(bonus_cap_cents=30)
    client = login(rey)
    data = {
        "amount_cents": "40",
        "batch": str(world.batch.pk),
        "reason": "Thorough",
        "idempotency_key": "form-1",
    }
    response = client.post(URLS["worker_bonus"](world), data, follow=True)
    assert "caps bonuses at $0.30 in all" in response.content.decode()
    assert not LedgerEntry.objects.exists()


def test_the_worker_page_offers_the_batches_the_worker_worked_in(world: World, rey: Any) -> None:
    page = login(rey).get(URLS["worker_detail"](world)).content.decode()
    assert f'<option value="{world.batch.pk}">{world.batch}</option>' in page


def test_it_shows_the_worker_page_with_history_and_earnings(
    world: World, rey: Any, alice: Any
) -> None:
    bonus_pay(
        project=world.project,
        worker=world.worker,
        by=alice,
        amount_cents=250,
        reason="r",
        idempotency_key="k",
        batch=world.batch,
    )
    response = login(rey).get(URLS["worker_detail"](world))
    assert response.status_code == 200
    content = response.content.decode()
    assert world.caption.text in content
    assert "$2.50" in content
    assert 'name="idempotency_key"' in content
    assert "Block from this project" in content
    assert "Unblock" not in content


def test_it_offers_to_unblock_a_blocked_worker(world: World, rey: Any) -> None:
    worker_block(project=world.project, worker=world.worker, by=rey, reason="Lists the hints.")
    content = login(rey).get(URLS["worker_detail"](world)).content.decode()
    assert "by rey: Lists the hints." in content
    assert "Block from this project" not in content
    login(rey).post(URLS["worker_unblock"](world), {"reason": "Better now."})
    assert not Block.objects.active().exists()


def test_it_blocks_from_the_worker_page(world: World, rey: Any) -> None:
    login(rey).post(URLS["worker_block"](world), {"reason": "Lists the hints."})
    assert Block.objects.active().get().reason == "Lists the hints."


def test_it_grades_through_the_page(world: World, rey: Any) -> None:
    response = login(rey).post(
        URLS["attempt_grade"](world), {"decision": "reject", "feedback": "More detail."}
    )
    assert response["Location"] == world.qualification.get_absolute_url()
    world.attempt.refresh_from_db()
    assert world.attempt.state == QualificationAttempt.State.REJECTED


def test_it_saves_batch_requirements_through_the_page(world: World, alice: Any) -> None:
    login(alice).post(
        URLS["batch_requirements"](world),
        {
            "qualifications": [str(world.qualification.pk)],
            "min_approval_percent": "95",
            "min_approved": "1000",
        },
    )
    requirements = BatchRequirements.objects.get(batch=world.batch)
    assert (requirements.min_approval_percent, requirements.min_approved) == (95, 1000)
    assert list(requirements.qualifications.all()) == [world.qualification]
    assert hit_claim(worker=world.worker) is None  # Ann has neither


def test_it_creates_a_qualification_through_the_page(world: World, alice: Any) -> None:
    response = login(alice).post(
        URLS["qualification_list"](world),
        {"name": "Second", "clip_ids": "abc", "min_words": "3", "max_words": "40"},
    )
    assert response.status_code == 200
    assert b"&#x27;abc&#x27; is not a clip id" in response.content
    assert Qualification.objects.count() == 1


def test_it_downloads_the_ledger_as_csv(world: World, alice: Any) -> None:
    response = login(alice).get(URLS["ledger_csv"](world))
    assert response["Content-Type"] == "text/csv"
    assert response["Content-Disposition"] == 'attachment; filename="sounds-ledger.csv"'
    assert streamed(response).startswith(b"date,kind,worker")


def test_it_saves_the_site_wide_record_option_through_the_page(world: World, alice: Any) -> None:
    page = login(alice).get(URLS["batch_requirements"](world)).content.decode()
    assert 'name="site_wide_record"' in page

    login(alice).post(
        URLS["batch_requirements"](world),
        {"min_approval_percent": "95", "min_approved": "0", "site_wide_record": "on"},
    )

    assert BatchRequirements.objects.get(batch=world.batch).site_wide_record


def test_it_saves_worker_countries_through_the_page(world: World, alice: Any) -> None:
    data = {"min_approval_percent": "0", "min_approved": "0", "locales": "gb, us"}
    login(alice).post(URLS["batch_requirements"](world), data)
    requirements = BatchRequirements.objects.get(batch=world.batch)
    assert sorted(requirements.locales.values_list("country", flat=True)) == ["GB", "US"]
    page = login(alice).get(URLS["batch_requirements"](world)).content.decode()
    assert 'value="GB US"' in page


def test_the_page_names_a_bad_country_code(world: World, alice: Any) -> None:
    data = {"min_approval_percent": "0", "min_approved": "0", "locales": "GB EN"}
    response = login(alice).post(URLS["batch_requirements"](world), data)
    assert "EN: not ISO 3166 country codes" in response.content.decode()
    assert not BatchRequirements.objects.exists()


def test_reviewers_see_the_country_a_worker_declared(world: World, rey: Any) -> None:
    profile_country_set(user=world.worker, country="CA")
    detail = login(rey).get(URLS["worker_detail"](world)).content.decode()
    assert "Canada (CA), declared" in detail
    listing = login(rey).get(URLS["worker_list"](world)).content.decode()
    assert '<td data-testid="country">Canada</td>' in listing


def test_a_reviewer_sees_only_this_projects_record_of_a_worker(
    world: World, rey: Any, olive: Any, rex: Any
) -> None:
    assignment_review(assignment=world.assignment, reviewer=rey, approve=True)
    birds = Project.objects.get(slug="birds")
    membership_add(project=birds, user=world.worker, role=Role.ANNOTATOR)

    page = login(rex).get(reverse("worker_detail", args=["birds", world.worker.pk])).content

    assert b"0 approved of 0 reviewed" in page
