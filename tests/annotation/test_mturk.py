"""MTurk mode against a fake MTurk API on 127.0.0.1: publishing as ExternalQuestion HITs,
the framed page (preview, accept, submit, post back to turkSubmitTo) and sending reviews."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from botocore.exceptions import ClientError
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.files.base import ContentFile
from django.core.management import CommandError, call_command
from django.test import Client

from annotation import rules
from annotation.models import Assignment, Batch, Caption, Hit
from annotation.mturk import (
    PREVIEW,
    batch_mturk_publish,
    mturk_returns_sync,
    mturk_reviews_send,
)
from annotation.services import caption_limits, hit_claim
from core.models import Job, Membership, Role
from crowd.models import RejectReason
from crowd.services import (
    batch_requirements_set,
    qualification_create,
    review_approve,
    review_reject,
)
from tests.annotation.conftest import CAPTION, MakeBatch, make_clips, make_subset
from tests.annotation.mturk_fake import FakeMTurk, fake_mturk
from tests.conftest import streamed

SITE = "https://earmark.example.org"
SANDBOX = "https://workersandbox.mturk.com"


@pytest.fixture
def mturk(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMTurk]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with fake_mturk() as fake:
        settings.MTURK_ENDPOINT_URL = fake.url
        settings.MTURK_EXTERNAL_URL = SITE
        yield fake


@pytest.fixture
def on_mturk(make_batch: MakeBatch, mturk: FakeMTurk, alice: Any) -> Batch:
    """Two clips in one HIT wanting two captions, published on the fake MTurk."""
    batch = make_batch(clips=2, clips_per_hit=2, captions_per_clip=2)
    batch_mturk_publish(batch=batch, by=alice)
    batch.refresh_from_db()
    return batch


def _hit(batch: Batch) -> Hit:
    return batch.hits.get()


def _page_url(hit: Hit, assignment_id: str = "ASSIGN0001", worker_id: str = "AWORKER1") -> str:
    query = urlencode(
        {
            "assignmentId": assignment_id,
            "hitId": hit.mturk_hit_id,
            "workerId": worker_id,
            "turkSubmitTo": SANDBOX,
        }
    )
    return f"/mturk/hits/{hit.pk}/?{query}"


def _token(html: str) -> str:
    match = re.search(r'name="token" value="([^"]+)"', html)
    assert match, html
    return match.group(1)


def _accept(hit: Hit, **ids: str) -> tuple[Client, str]:
    client = Client(enforce_csrf_checks=True)
    response = client.get(_page_url(hit, **ids))
    assert response.status_code == 200, response.content
    return client, _token(response.content.decode())


def _captions(hit: Hit, text: str = CAPTION) -> dict[str, str]:
    return {f"caption-{c}": text for c in hit.hit_clips.values_list("clip_id", flat=True)}


# Publishing ---------------------------------------------------------------------------------


def test_it_publishes_a_hit_type_and_one_external_question_per_hit(
    on_mturk: Batch, mturk: FakeMTurk
) -> None:
    [hit_type] = mturk.of("CreateHITType")
    assert hit_type["Reward"] == "0.10"
    assert hit_type["AssignmentDurationInSeconds"] == 30 * 60
    assert hit_type["AutoApprovalDelayInSeconds"] == 3 * 24 * 3600
    [created] = mturk.of("CreateHITWithHITType")
    hit = _hit(on_mturk)
    assert created["MaxAssignments"] == 2
    assert f"<ExternalURL>{SITE}/mturk/hits/{hit.pk}/</ExternalURL>" in created["Question"]
    assert on_mturk.mturk_hit_type_id == created["HITTypeId"]
    assert hit.mturk_hit_id == mturk.by_token[f"earmark-{on_mturk.pk}-{hit.pk}"]


def test_publishing_again_creates_nothing_more(
    on_mturk: Batch, mturk: FakeMTurk, alice: Any
) -> None:
    assert batch_mturk_publish(batch=on_mturk, by=alice) == {
        "hit_type": on_mturk.mturk_hit_type_id,
        "created": 0,
    }
    assert len(mturk.of("CreateHITType")) == len(mturk.of("CreateHITWithHITType")) == 1


def test_a_refused_hit_stops_publishing_and_a_second_run_goes_on(
    make_batch: MakeBatch, mturk: FakeMTurk, alice: Any
) -> None:
    batch = make_batch(clips=3)
    mturk.refuse_after["CreateHITWithHITType"] = 1
    with pytest.raises(ValidationError, match="after 1 were created"):
        batch_mturk_publish(batch=batch, by=alice)
    assert batch.hits.exclude(mturk_hit_id="").count() == 1
    del mturk.refuse_after["CreateHITWithHITType"]
    assert batch_mturk_publish(batch=batch, by=alice)["created"] == 2
    assert not batch.hits.filter(mturk_hit_id="").exists()
    assert len(mturk.hits) == 3


def test_the_batch_requirements_become_mturk_qualifications(
    make_batch: MakeBatch, mturk: FakeMTurk, alice: Any
) -> None:
    batch = make_batch()
    batch_requirements_set(
        batch=batch, by=alice, qualifications=[], min_approval_percent=95, min_approved=1000
    )
    batch_mturk_publish(batch=batch, by=alice)
    requirements = mturk.of("CreateHITType")[0]["QualificationRequirements"]
    assert [(r["QualificationTypeId"], r["IntegerValues"]) for r in requirements] == [
        ("000000000000000000L0", [95]),
        ("00000000000000000040", [1000]),
    ]


def test_it_refuses_a_batch_requiring_a_local_qualification_test(
    make_batch: MakeBatch, mturk: FakeMTurk, alice: Any
) -> None:
    batch = make_batch()
    clips = make_clips(1)
    make_subset(batch.project, clips)
    ids = str(clips[0].pk)
    test = qualification_create(
        project=batch.project, created_by=alice, name="Listening", clip_ids=ids
    )
    batch_requirements_set(
        batch=batch, by=alice, qualifications=[test], min_approval_percent=0, min_approved=0
    )
    with pytest.raises(ValidationError, match="qualification tests taken here"):
        batch_mturk_publish(batch=batch, by=alice)
    assert not mturk.calls


def test_it_refuses_to_publish_without_a_public_https_address(
    make_batch: MakeBatch, mturk: FakeMTurk, alice: Any, settings: Any
) -> None:
    settings.MTURK_EXTERNAL_URL = ""
    with pytest.raises(ValidationError, match="MTURK_EXTERNAL_URL"):
        batch_mturk_publish(batch=make_batch(), by=alice)
    assert not mturk.calls


def test_only_researchers_publish_on_mturk(
    make_batch: MakeBatch, mturk: FakeMTurk, rey: Any
) -> None:
    with pytest.raises(PermissionDenied):
        batch_mturk_publish(batch=make_batch(), by=rey)
    assert not mturk.calls


def test_the_command_publishes_through_a_job(make_batch: MakeBatch, mturk: FakeMTurk) -> None:
    batch = make_batch(clips=2)
    call_command("mturk_publish", batch.pk)
    job = Job.objects.get(kind="mturk_publish")
    assert (job.state, job.result["created"]) == (Job.State.SUCCEEDED, 2)
    assert len(mturk.of("CreateHITWithHITType")) == 2


def test_local_workers_are_not_offered_a_batch_on_mturk(on_mturk: Batch, ann: Any) -> None:
    assert hit_claim(worker=ann) is None


# The framed page ---------------------------------------------------------------------------


def test_the_preview_shows_the_task_without_taking_a_slot(on_mturk: Batch) -> None:
    hit = _hit(on_mturk)
    response = Client().get(_page_url(hit, assignment_id=PREVIEW))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-testid="preview"' in html
    assert "<textarea" not in html
    assert not Assignment.objects.exists()
    assert Hit.objects.get(pk=hit.pk).taken == 0


def test_the_page_may_be_framed_by_mturk_only(on_mturk: Batch) -> None:
    response = Client().get(_page_url(_hit(on_mturk), assignment_id=PREVIEW))
    assert "X-Frame-Options" not in response
    assert response["Content-Security-Policy"] == (
        "frame-ancestors https://*.mturk.com https://mturk.com"
    )


def test_accepting_makes_a_local_worker_and_assignment(on_mturk: Batch) -> None:
    hit = _hit(on_mturk)
    client = Client()
    html = client.get(_page_url(hit)).content.decode()
    assignment = Assignment.objects.get(mturk_assignment_id="ASSIGN0001")
    assert assignment.worker.get_username() == "mturk-AWORKER1"
    assert not assignment.worker.has_usable_password()
    role = Membership.objects.get(user=assignment.worker, project=on_mturk.project).role
    assert role == Role.ANNOTATOR
    assert html.count("<textarea") == 2
    client.get(_page_url(hit))  # a reload is the same assignment
    assert Assignment.objects.count() == 1
    assert Hit.objects.get(pk=hit.pk).taken == 1


def test_a_wrong_hit_id_is_404(on_mturk: Batch) -> None:
    hit = _hit(on_mturk)
    url = _page_url(hit).replace(hit.mturk_hit_id, "HITNOTOURS")
    assert Client().get(url).status_code == 404
    assert not Assignment.objects.exists()


def test_a_foreign_turk_submit_to_is_refused(on_mturk: Batch) -> None:
    url = _page_url(_hit(on_mturk)).replace("workersandbox.mturk.com", "evil.example.com")
    response = Client().get(url)
    assert response.status_code == 409
    assert "is not an MTurk address" in response.content.decode()
    assert not Assignment.objects.exists()


def test_a_worker_submits_and_the_browser_posts_back_to_mturk(on_mturk: Batch) -> None:
    hit = _hit(on_mturk)
    client, token = _accept(hit)
    response = client.post(f"/mturk/hits/{hit.pk}/", {"token": token, **_captions(hit)})
    assert response.status_code == 200, response.content
    html = response.content.decode()
    assert f'action="{SANDBOX}/mturk/externalSubmit"' in html
    assert 'name="assignmentId" value="ASSIGN0001"' in html
    assignment = Assignment.objects.get(mturk_assignment_id="ASSIGN0001")
    assert assignment.state == Assignment.State.SUBMITTED
    assert list(assignment.captions.values_list("text", flat=True)) == [CAPTION, CAPTION]


def test_a_caption_breaking_the_rules_is_shown_its_message(on_mturk: Batch) -> None:
    hit = _hit(on_mturk)
    client, token = _accept(hit)
    bad = "there is a dog barking"
    response = client.post(f"/mturk/hits/{hit.pk}/", {"token": token, **_captions(hit, bad)})
    assert response.status_code == 400
    [problem] = rules.errors(bad, caption_limits(on_mturk))
    assert f"The caption for clip 1 {problem.message}." in response.content.decode()
    assert not Caption.objects.exists()
    assert Assignment.objects.get().state == Assignment.State.ACCEPTED


def test_an_altered_token_stores_nothing(on_mturk: Batch) -> None:
    hit = _hit(on_mturk)
    client, token = _accept(hit)
    response = client.post(f"/mturk/hits/{hit.pk}/", {"token": token + "x", **_captions(hit)})
    assert response.status_code == 400
    assert "expired or was altered" in response.content.decode()
    assert not Caption.objects.exists()


def test_another_worker_cannot_take_over_an_assignment(on_mturk: Batch) -> None:
    hit = _hit(on_mturk)
    _accept(hit, assignment_id="ASSIGN0001", worker_id="AWORKER1")
    response = Client().get(_page_url(hit, assignment_id="ASSIGN0001", worker_id="AWORKER2"))
    assert response.status_code == 409
    assert "belongs to another HIT or worker" in response.content.decode()
    assert 'name="token"' not in response.content.decode()
    assert Assignment.objects.get().worker.get_username() == "mturk-AWORKER1"


def test_a_token_of_one_hit_submits_nothing_to_another(
    make_batch: MakeBatch, mturk: FakeMTurk, alice: Any
) -> None:
    batch = make_batch(clips=2)
    batch_mturk_publish(batch=batch, by=alice)
    first, second = batch.hits.order_by("pk")
    client, token = _accept(first)
    response = client.post(f"/mturk/hits/{second.pk}/", {"token": token, **_captions(second)})
    assert response.status_code == 400
    assert "belongs to another HIT" in response.content.decode()
    assert not Caption.objects.exists()


def test_a_second_hit_waits_until_the_first_is_done(
    make_batch: MakeBatch, mturk: FakeMTurk, alice: Any
) -> None:
    batch = make_batch(clips=2)
    batch_mturk_publish(batch=batch, by=alice)
    first, second = batch.hits.order_by("pk")
    _accept(first, assignment_id="ASSIGN0001")
    response = Client().get(_page_url(second, assignment_id="ASSIGN0002"))
    assert response.status_code == 409
    assert "submit or return the other first" in response.content.decode()
    assert Hit.objects.get(pk=second.pk).taken == 0


def test_the_page_plays_its_clips_to_the_token_holder_only(
    on_mturk: Batch, settings: Any, tmp_path: Path
) -> None:
    settings.MEDIA_ROOT = tmp_path
    hit = _hit(on_mturk)
    hit_clip = hit.hit_clips.order_by("position").first()
    assert hit_clip is not None
    hit_clip.clip.audio.save("clip.wav", ContentFile(b"RIFF-fake-wave"))
    client, token = _accept(hit)
    url = f"/mturk/hits/{hit.pk}/{hit_clip.clip_id}/audio"
    response = client.get(url, {"t": token})
    assert response.status_code == 200
    assert streamed(response) == b"RIFF-fake-wave"
    assert client.get(url).status_code == 404
    assert client.get(url, {"t": token[:-2]}).status_code == 404


# Reviews -------------------------------------------------------------------------------------


def _submitted(hit: Hit, assignment_id: str, worker_id: str) -> Assignment:
    client, token = _accept(hit, assignment_id=assignment_id, worker_id=worker_id)
    client.post(f"/mturk/hits/{hit.pk}/", {"token": token, **_captions(hit)})
    return Assignment.objects.get(mturk_assignment_id=assignment_id)


def test_reviews_are_sent_to_mturk_once(on_mturk: Batch, mturk: FakeMTurk, rey: Any) -> None:
    hit = _hit(on_mturk)
    good = _submitted(hit, "ASSIGN0001", "AWORKER1")
    bad = _submitted(hit, "ASSIGN0002", "AWORKER2")
    review_approve(assignment=good, reviewer=rey)
    review_reject(assignment=bad, reviewer=rey, reason=RejectReason.TRANSCRIBES_SPEECH)
    assert mturk_reviews_send() == {"sent": 2, "refused": 0}
    assert mturk.reviews == {"ASSIGN0001": "approved", "ASSIGN0002": "rejected"}
    [rejection] = mturk.of("RejectAssignment")
    assert rejection["RequesterFeedback"].startswith("Please describe that someone speaks")
    assert mturk_reviews_send() == {"sent": 0, "refused": 0}
    assert len(mturk.of("ApproveAssignment")) == 1


def test_a_review_mturk_refuses_is_sent_again_later(
    on_mturk: Batch, mturk: FakeMTurk, rey: Any
) -> None:
    assignment = _submitted(_hit(on_mturk), "ASSIGN0001", "AWORKER1")
    review_approve(assignment=assignment, reviewer=rey)
    mturk.refuse_after["ApproveAssignment"] = 0
    assert mturk_reviews_send() == {"sent": 0, "refused": 1}
    assignment.refresh_from_db()
    assert assignment.mturk_review_sent_at is None
    del mturk.refuse_after["ApproveAssignment"]
    assert mturk_reviews_send() == {"sent": 1, "refused": 0}


def test_a_decision_mturk_already_took_is_not_sent_again(
    on_mturk: Batch, mturk: FakeMTurk, rey: Any
) -> None:
    assignment = _submitted(_hit(on_mturk), "ASSIGN0001", "AWORKER1")
    review_approve(assignment=assignment, reviewer=rey)
    mturk.statuses["ASSIGN0001"] = "Approved"  # MTurk's own auto-approval came first
    assert mturk_reviews_send() == {"sent": 1, "refused": 0}
    assert mturk_reviews_send() == {"sent": 0, "refused": 0}
    assert len(mturk.of("ApproveAssignment")) == 1


def test_a_status_mturk_will_not_give_leaves_the_review_for_later(
    on_mturk: Batch, mturk: FakeMTurk, rey: Any, caplog: pytest.LogCaptureFixture
) -> None:
    assignment = _submitted(_hit(on_mturk), "ASSIGN0001", "AWORKER1")
    review_approve(assignment=assignment, reviewer=rey)
    mturk.refuse_after["ApproveAssignment"] = 0
    mturk.refuse_after["GetAssignment"] = 0
    assert mturk_reviews_send() == {"sent": 0, "refused": 1}
    assert f"assignment #{assignment.pk} (ASSIGN0001) stands" in caplog.text
    assert "GetAssignment refused" in caplog.text


class _BrokenClient:
    """MTurk refuses the decision, and asking how the assignment stands hits a bug."""

    def approve_assignment(self, **_: Any) -> None:
        raise ClientError(
            {"Error": {"Code": "RequestError", "Message": "refused"}}, "ApproveAssignment"
        )

    def get_assignment(self, **_: Any) -> None:
        raise TypeError("a bug, not MTurk's answer")


def test_an_unexpected_error_asking_mturk_is_raised_not_counted_as_undecided(
    on_mturk: Batch, mturk: FakeMTurk, rey: Any
) -> None:
    assignment = _submitted(_hit(on_mturk), "ASSIGN0001", "AWORKER1")
    review_approve(assignment=assignment, reviewer=rey)
    with pytest.raises(TypeError, match="a bug"):
        mturk_reviews_send(client=_BrokenClient())
    assignment.refresh_from_db()
    assert assignment.mturk_review_sent_at is None


# Returns on MTurk ---------------------------------------------------------------------------


def _state(assignment_id: str) -> str:
    return Assignment.objects.get(mturk_assignment_id=assignment_id).state


def test_a_hit_returned_on_mturk_gives_its_slot_back(on_mturk: Batch, mturk: FakeMTurk) -> None:
    hit = _hit(on_mturk)
    _accept(hit, assignment_id="ASSIGN0001", worker_id="AWORKER1")
    _submitted(hit, "ASSIGN0002", "AWORKER2")
    # AWORKER1 returned the HIT on MTurk: nothing in progress there, one submitted
    mturk.listed[hit.mturk_hit_id] = ["ASSIGN0002"]
    assert mturk_returns_sync() == {"released": 1, "unsettled": 0, "failed": 0}
    assert _state("ASSIGN0001") == Assignment.State.RETURNED
    assert _state("ASSIGN0002") == Assignment.State.SUBMITTED
    assert Hit.objects.get(pk=hit.pk).taken == 1
    # the slot MTurk gave to a third worker is there for them here too
    _accept(hit, assignment_id="ASSIGN0003", worker_id="AWORKER3")
    assert Hit.objects.get(pk=hit.pk).taken == 2
    mturk.pending[hit.mturk_hit_id] = 1  # AWORKER3 at work there
    assert mturk_returns_sync() == {"released": 0, "unsettled": 0, "failed": 0}
    assert _state("ASSIGN0003") == Assignment.State.ACCEPTED


def test_an_assignment_whose_time_ran_out_there_is_abandoned(
    on_mturk: Batch, mturk: FakeMTurk
) -> None:
    hit = _hit(on_mturk)
    _accept(hit, assignment_id="ASSIGN0001", worker_id="AWORKER1")
    later = Assignment.objects.get().deadline + timedelta(seconds=1)
    assert mturk_returns_sync(now=later)["released"] == 1
    assert _state("ASSIGN0001") == Assignment.State.ABANDONED
    assert Hit.objects.get(pk=hit.pk).taken == 0


def test_it_leaves_a_hit_alone_while_it_cannot_tell_who_returned(
    on_mturk: Batch, mturk: FakeMTurk
) -> None:
    hit = _hit(on_mturk)
    _accept(hit, assignment_id="ASSIGN0001", worker_id="AWORKER1")
    _accept(hit, assignment_id="ASSIGN0002", worker_id="AWORKER2")
    mturk.pending[hit.mturk_hit_id] = 1  # one of the two returned; which, MTurk won't say
    assert mturk_returns_sync() == {"released": 0, "unsettled": 1, "failed": 0}
    mturk.pending[hit.mturk_hit_id] = 2  # both still at work there
    assert mturk_returns_sync() == {"released": 0, "unsettled": 0, "failed": 0}
    assert {_state("ASSIGN0001"), _state("ASSIGN0002")} == {Assignment.State.ACCEPTED}
    assert Hit.objects.get(pk=hit.pk).taken == 2


def test_it_follows_mturks_pages_of_assignments(on_mturk: Batch, mturk: FakeMTurk) -> None:
    hit = _hit(on_mturk)
    _accept(hit, assignment_id="ASSIGN0001", worker_id="AWORKER1")
    # submitted there, on the last of MTurk's pages, though not yet here
    mturk.listed[hit.mturk_hit_id] = ["OTHER0001", "OTHER0002", "ASSIGN0001"]
    assert mturk_returns_sync() == {"released": 0, "unsettled": 0, "failed": 0}
    assert len(mturk.of("ListAssignmentsForHIT")) == 2
    assert _state("ASSIGN0001") == Assignment.State.ACCEPTED


def test_a_worker_back_on_the_same_hit_leaves_the_old_assignment(on_mturk: Batch) -> None:
    hit = _hit(on_mturk)
    _accept(hit, assignment_id="ASSIGN0001", worker_id="AWORKER1")
    # returned on MTurk, then accepted again: MTurk gives a new assignmentId
    client, token = _accept(hit, assignment_id="ASSIGN0009", worker_id="AWORKER1")
    assert _state("ASSIGN0001") == Assignment.State.RETURNED
    assert _state("ASSIGN0009") == Assignment.State.ACCEPTED
    assert Hit.objects.get(pk=hit.pk).taken == 1
    response = client.post(f"/mturk/hits/{hit.pk}/", {"token": token, **_captions(hit)})
    assert response.status_code == 200
    assert _state("ASSIGN0009") == Assignment.State.SUBMITTED


def test_returns_are_synced_again_when_mturk_does_not_answer(
    on_mturk: Batch, mturk: FakeMTurk
) -> None:
    hit = _hit(on_mturk)
    _accept(hit, assignment_id="ASSIGN0001", worker_id="AWORKER1")
    mturk.refuse_after["GetHIT"] = 0
    with pytest.raises(CommandError, match="did not answer"):
        call_command("mturk_sync_returns")
    assert _state("ASSIGN0001") == Assignment.State.ACCEPTED
    del mturk.refuse_after["GetHIT"]
    call_command("mturk_sync_returns", batch=on_mturk.pk)
    assert _state("ASSIGN0001") == Assignment.State.RETURNED


def test_returns_sync_every_five_minutes(settings: Any) -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["mturk-returns-sync"]
    assert (entry["task"], entry["schedule"]) == ("annotation.tasks.mturk_returns_sync", 300.0)


def test_a_new_worker_on_a_full_hit_takes_the_slot_returned_there(
    on_mturk: Batch, mturk: FakeMTurk
) -> None:
    hit = _hit(on_mturk)
    _accept(hit, assignment_id="ASSIGN0001", worker_id="AWORKER1")
    _submitted(hit, "ASSIGN0002", "AWORKER2")
    # AWORKER1 returned it there and MTurk gave the slot to AWORKER3, whose page opens
    mturk.listed[hit.mturk_hit_id] = ["ASSIGN0002"]
    mturk.pending[hit.mturk_hit_id] = 1
    _accept(hit, assignment_id="ASSIGN0003", worker_id="AWORKER3")
    assert _state("ASSIGN0001") == Assignment.State.RETURNED
    assert _state("ASSIGN0003") == Assignment.State.ACCEPTED
    assert Hit.objects.get(pk=hit.pk).taken == 2


def test_a_new_worker_on_a_full_hit_is_refused_while_mturk_leaves_a_doubt(
    on_mturk: Batch, mturk: FakeMTurk
) -> None:
    hit = _hit(on_mturk)
    _accept(hit, assignment_id="ASSIGN0001", worker_id="AWORKER1")
    _accept(hit, assignment_id="ASSIGN0002", worker_id="AWORKER2")
    mturk.pending[hit.mturk_hit_id] = 2  # one of them and AWORKER3: which one left?
    response = Client().get(_page_url(hit, assignment_id="ASSIGN0003", worker_id="AWORKER3"))
    assert response.status_code == 409
    assert "all the captions it wants" in response.content.decode()
    assert {_state("ASSIGN0001"), _state("ASSIGN0002")} == {Assignment.State.ACCEPTED}
