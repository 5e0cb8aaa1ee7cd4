"""MTurk mode against a fake MTurk API on 127.0.0.1: publishing as ExternalQuestion HITs,
the framed page (preview, accept, submit, post back to turkSubmitTo) and sending reviews."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from botocore.exceptions import ClientError
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.files.base import ContentFile
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from annotation import rules
from annotation.models import (
    Assignment,
    Batch,
    Caption,
    ClipAudioServed,
    Hit,
    MTurkWorker,
    PlatformRef,
)
from annotation.platforms import platform_get
from annotation.platforms.mturk import (
    PREVIEW,
    batch_mturk_publish,
    hit_mturk_id,
    hit_type_id,
    mturk_returns_sync,
    mturk_reviews_send,
)
from annotation.platforms.mturk.blocks import mturk_blocks_sync
from annotation.platforms.mturk.client import assignment_by_mturk_id, mturk_hits
from annotation.platforms.mturk.confirm import mturk_submissions_confirm
from annotation.platforms.mturk.qualifications import mturk_qualifications_sync
from annotation.presets import BATCH_PRESETS
from annotation.services import caption_limits, hit_claim
from core.models import Job, Membership, Role
from crowd.models import (
    Block,
    LedgerEntry,
    QualificationAttempt,
    RejectReason,
)
from crowd.services import (
    batch_requirements_set,
    qualification_create,
    qualification_grade,
    review_approve,
    review_reject,
    worker_block,
    worker_unblock,
)
from crowd.services.review import assignments_auto_approve
from tests.annotation.conftest import SITE
from tests.annotation.factories import (
    CAPTION,
    MakeBatch,
    audio_get_served_writes,
    listened,
    make_clips,
    make_subset,
)
from tests.annotation.mturk_fake import FakeMTurk, FakeWorker, NotQualified
from tests.conftest import make_user, streamed, wav_bytes

SANDBOX = "https://workersandbox.mturk.com"


@pytest.fixture
def two_hits(make_batch: MakeBatch, mturk: FakeMTurk, alice: Any) -> tuple[Hit, Hit]:
    """A batch of two one-clip HITs, published on the fake MTurk."""
    batch = make_batch(clips=2)
    batch_mturk_publish(batch=batch, by=alice)
    first, second = batch.hits.order_by("pk")
    return first, second


def _hit(batch: Batch) -> Hit:
    return batch.hits.get()


def _page_url(hit: Hit, assignment_id: str = "ASSIGN0001", worker_id: str = "AWORKER1") -> str:
    query = urlencode(
        {
            "assignmentId": assignment_id,
            "hitId": hit_mturk_id(hit),
            "workerId": worker_id,
            "turkSubmitTo": SANDBOX,
        }
    )
    return f"/mturk/hits/{hit.pk}/?{query}"


def _assignment(assignment_id: str) -> Assignment:
    found = assignment_by_mturk_id(assignment_id)
    assert found is not None, assignment_id
    return found


def _type_id(test: Any) -> str:
    return PlatformRef.objects.get(kind="qualification", local_id=test.pk).external_id


def _reported_at(assignment: Assignment) -> Any:
    return PlatformRef.objects.get(kind="assignment", local_id=assignment.pk).reported_at


def _token(html: str) -> str:
    match = re.search(r'name="token" value="([^"]+)"', html)
    assert match, html
    return match.group(1)


def _accept(
    mturk: FakeMTurk, hit: Hit, assignment_id: str = "ASSIGN0001", worker_id: str = "AWORKER1"
) -> tuple[Client, str]:
    """The worker accepts the HIT on MTurk, whose frame then opens our page."""
    if assignment_id not in mturk.assignments:  # not a reload
        mturk.accept(hit_mturk_id(hit), assignment_id, worker_id)
    client = Client(enforce_csrf_checks=True)
    response = client.get(_page_url(hit, assignment_id, worker_id))
    assert response.status_code == 200, response.content
    # the worker then plays the clips through (their audio served long enough ago)
    listened(Assignment.objects.order_by("-pk")[0])
    return client, _token(response.content.decode())


def _send(client: Client, hit: Hit, token: str, text: str = CAPTION) -> Any:
    """The worker sends the page's form: the token, and `text` as the caption of each clip."""
    captions = {f"caption-{c}": text for c in hit.hit_clips.values_list("clip_id", flat=True)}
    return client.post(f"/mturk/hits/{hit.pk}/", {"token": token, **captions})


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
    assert hit_type_id(on_mturk) == created["HITTypeId"]
    assert hit_mturk_id(hit) == mturk.by_token[f"earmark-{on_mturk.pk}-{hit.pk}"]


def test_publishing_again_creates_nothing_more(
    on_mturk: Batch, mturk: FakeMTurk, alice: Any
) -> None:
    assert batch_mturk_publish(batch=on_mturk, by=alice) == {
        "hit_type": hit_type_id(on_mturk),
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
    assert mturk_hits().filter(batch=batch).count() == 1
    del mturk.refuse_after["CreateHITWithHITType"]
    assert batch_mturk_publish(batch=batch, by=alice)["created"] == 2
    assert not batch.hits.exclude(pk__in=mturk_hits()).exists()
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


# The crowd's requirements there: locale, approval figures, the project's qualification test ---


AUDIOCAPS_LOCALES = [{"Country": c} for c in ("AU", "CA", "GB", "NZ", "US")]


@pytest.fixture
def audiocaps_crowd(make_batch: MakeBatch, mturk: FakeMTurk, alice: Any) -> Batch:
    """A batch with the AudioCaps crowd preset's requirements, published on the fake MTurk."""
    preset = BATCH_PRESETS["audiocaps-crowd"]
    batch = make_batch(clips=1)
    batch_requirements_set(
        batch=batch,
        by=alice,
        qualifications=[],
        min_approval_percent=preset.min_approval_percent,
        min_approved=preset.min_approved,
        site_wide_record=preset.site_wide_record,
        locales=preset.locales,
    )
    batch_mturk_publish(batch=batch, by=alice)
    batch.refresh_from_db()
    return batch


def test_the_crowd_preset_sends_the_locale_and_approval_qualifications(
    audiocaps_crowd: Batch, mturk: FakeMTurk
) -> None:
    [hit_type] = mturk.of("CreateHITType")
    assert hit_type["QualificationRequirements"] == [
        {
            "QualificationTypeId": "000000000000000000L0",
            "Comparator": "GreaterThanOrEqualTo",
            "IntegerValues": [95],
            "ActionsGuarded": "DiscoverPreviewAndAccept",
        },
        {
            "QualificationTypeId": "00000000000000000040",
            "Comparator": "GreaterThanOrEqualTo",
            "IntegerValues": [1001],  # more than 1,000
            "ActionsGuarded": "DiscoverPreviewAndAccept",
        },
        {
            "QualificationTypeId": "00000000000000000071",
            "Comparator": "In",
            "LocaleValues": AUDIOCAPS_LOCALES,
            "ActionsGuarded": "DiscoverPreviewAndAccept",
        },
    ]


@pytest.mark.parametrize(
    "worker",
    [
        FakeWorker(country="DE"),  # outside the locales
        FakeWorker(country="GB", percent_approved=94),
        FakeWorker(country="GB", hits_approved=1000),  # not more than 1,000
    ],
)
def test_mturk_refuses_a_worker_outside_the_crowd(
    audiocaps_crowd: Batch, mturk: FakeMTurk, worker: FakeWorker
) -> None:
    mturk.workers["AOUTSIDER"] = worker
    with pytest.raises(NotQualified):
        mturk.accept(hit_mturk_id(_hit(audiocaps_crowd)), "ASSIGN0001", "AOUTSIDER")


def test_mturk_lets_a_worker_of_the_crowd_work(audiocaps_crowd: Batch, mturk: FakeMTurk) -> None:
    mturk.workers["AWORKER1"] = FakeWorker(country="NZ", percent_approved=95, hits_approved=1001)
    _accept(mturk, _hit(audiocaps_crowd))
    assert assignment_by_mturk_id("ASSIGN0001") is not None


@pytest.fixture
def gated_on_mturk(make_batch: MakeBatch, mturk: FakeMTurk, alice: Any) -> tuple[Batch, Any]:
    """A batch requiring the project's two-clip qualification test, published on MTurk."""
    batch = make_batch(clips=1)
    clips = make_clips(2)
    make_subset(batch.project, clips)
    test = qualification_create(
        project=batch.project,
        created_by=alice,
        name="Listening",
        clip_ids=" ".join(str(c.pk) for c in clips),
    )
    batch_requirements_set(
        batch=batch, by=alice, qualifications=[test], min_approval_percent=0, min_approved=0
    )
    batch_mturk_publish(batch=batch, by=alice)
    batch.refresh_from_db()
    test.refresh_from_db()
    return batch, test


def _answers(test: Any, text: str = CAPTION) -> dict[str, str]:
    return {f"clip-{c}": text for c in test.items.values_list("clip_id", flat=True)}


def test_a_required_qualification_test_becomes_an_mturk_qualification_type(
    gated_on_mturk: tuple[Batch, Any], mturk: FakeMTurk
) -> None:
    _, test = gated_on_mturk
    [created] = mturk.of("CreateQualificationType")
    assert _type_id(test) in mturk.qualification_types
    assert created["QualificationTypeStatus"] == "Active"
    assert "AnswerKey" not in created  # free-text captions: a reviewer grades them here
    for clip_id in test.items.values_list("clip_id", flat=True):
        assert f"<QuestionIdentifier>clip-{clip_id}</QuestionIdentifier>" in created["Test"]
        assert f"{SITE}/mturk/qualifications/{test.pk}/{clip_id}/audio?s=" in created["Test"]
    [hit_type] = mturk.of("CreateHITType")
    assert hit_type["QualificationRequirements"] == [
        {
            "QualificationTypeId": _type_id(test),
            "Comparator": "Exists",
            "ActionsGuarded": "Accept",
        }
    ]


def test_the_qualification_type_is_made_once(
    gated_on_mturk: tuple[Batch, Any], make_batch: MakeBatch, mturk: FakeMTurk, alice: Any
) -> None:
    _, test = gated_on_mturk
    second = make_batch(clips=1)
    batch_requirements_set(
        batch=second, by=alice, qualifications=[test], min_approval_percent=0, min_approved=0
    )
    batch_mturk_publish(batch=second, by=alice)
    assert len(mturk.of("CreateQualificationType")) == 1
    requirements = mturk.of("CreateHITType")[1]["QualificationRequirements"]
    assert requirements[0]["QualificationTypeId"] == _type_id(test)


def test_a_test_taken_on_mturk_is_graded_here_and_granted_there(
    gated_on_mturk: tuple[Batch, Any], mturk: FakeMTurk, rey: Any
) -> None:
    batch, test = gated_on_mturk
    hit = _hit(batch)
    with pytest.raises(NotQualified):  # no qualification yet
        mturk.accept(hit_mturk_id(hit), "ASSIGN0001", "AWORKER1")
    mturk.take_test(_type_id(test), "AWORKER1", _answers(test, "a cat meows"))

    assert mturk_qualifications_sync()["imported"] == 1
    attempt = QualificationAttempt.objects.get()
    assert attempt.worker.mturk_worker.worker_id == "AWORKER1"
    assert attempt.state == QualificationAttempt.State.SUBMITTED
    assert set(attempt.answers.values_list("text", flat=True)) == {"a cat meows"}
    assert mturk_qualifications_sync()["imported"] == 0  # brought once

    qualification_grade(attempt=attempt, reviewer=rey, approve=True)
    assert mturk_qualifications_sync()["sent"] == 1
    assert mturk.granted == {(_type_id(test), "AWORKER1"): 1}
    _accept(mturk, hit)  # MTurk now lets the worker take the HIT
    assert mturk_qualifications_sync()["sent"] == 0  # sent once


def test_a_failed_test_is_refused_there_with_the_reviewers_feedback(
    gated_on_mturk: tuple[Batch, Any], mturk: FakeMTurk, rey: Any
) -> None:
    _, test = gated_on_mturk
    request_id = mturk.take_test(_type_id(test), "AWORKER1", _answers(test))
    mturk_qualifications_sync()
    attempt = QualificationAttempt.objects.get()
    qualification_grade(attempt=attempt, reviewer=rey, approve=False, feedback="Describe sounds.")
    mturk_qualifications_sync()
    assert mturk.of("RejectQualificationRequest") == [
        {"QualificationRequestId": request_id, "Reason": "Describe sounds."}
    ]
    assert mturk.qualification_requests[request_id]["Status"] == "Rejected"
    assert not mturk.granted


def test_a_test_answer_the_text_gate_refuses_arrives_not_passed_and_unstored(
    gated_on_mturk: tuple[Batch, Any], mturk: FakeMTurk
) -> None:
    _, test = gated_on_mturk
    # an en space before "=": passes a naive formula check, starts a formula once NFKC
    # folds it to a space and post-processing strips it
    request_id = mturk.take_test(
        _type_id(test), "AWORKER1", _answers(test, "\u2002=1+1 a dog barks")
    )

    assert mturk_qualifications_sync()["imported"] == 1
    attempt = QualificationAttempt.objects.get()
    assert attempt.state == QualificationAttempt.State.REJECTED
    assert "The caption for clip 1" in attempt.feedback
    assert set(attempt.answers.values_list("text", flat=True)) == {""}
    mturk_qualifications_sync()
    assert mturk.qualification_requests[request_id]["Status"] == "Rejected"
    assert mturk.of("RejectQualificationRequest")[0]["Reason"] == attempt.feedback


def test_a_grade_mturk_refuses_is_sent_again(
    gated_on_mturk: tuple[Batch, Any], mturk: FakeMTurk, rey: Any
) -> None:
    _, test = gated_on_mturk
    mturk.take_test(_type_id(test), "AWORKER1", _answers(test))
    mturk_qualifications_sync()
    qualification_grade(attempt=QualificationAttempt.objects.get(), reviewer=rey, approve=True)
    mturk.fail_after["AcceptQualificationRequest"] = 0
    with pytest.raises(CommandError, match="retried next run"):
        call_command("mturk_sync_qualifications")
    assert not mturk.granted
    del mturk.fail_after["AcceptQualificationRequest"]
    call_command("mturk_sync_qualifications")
    assert mturk.granted


def test_the_tests_audio_is_served_to_its_signed_link_only(
    gated_on_mturk: tuple[Batch, Any], mturk: FakeMTurk, settings: Any, tmp_path: Path
) -> None:
    settings.MEDIA_ROOT = tmp_path
    _, test = gated_on_mturk
    item = test.items.select_related("clip").first()
    item.clip.audio.save("test.wav", ContentFile(wav_bytes()))
    url = re.search(
        rf"{SITE}(/mturk/qualifications/{test.pk}/{item.clip_id}/audio\?s=[^\"]+)\"",
        mturk.of("CreateQualificationType")[0]["Test"],
    )
    assert url
    response = Client().get(url.group(1))
    assert response.status_code == 200
    assert streamed(response) == wav_bytes()
    path = url.group(1).split("?")[0]
    assert Client().get(path).status_code == 404
    assert Client().get(path, {"s": "forged"}).status_code == 404
    other = test.items.exclude(pk=item.pk).get().clip_id  # one clip's link opens no other
    assert (
        Client()
        .get(path.replace(f"/{item.clip_id}/", f"/{other}/"), {"s": url.group(1).split("s=")[1]})
        .status_code
        == 404
    )


def test_qualifications_sync_every_five_minutes(settings: Any) -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["mturk-qualifications-sync"]
    assert (entry["task"], entry["schedule"]) == (
        "annotation.tasks.mturk_qualifications_sync",
        300.0,
    )


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


def test_accepting_makes_a_local_worker_and_assignment(on_mturk: Batch, mturk: FakeMTurk) -> None:
    hit = _hit(on_mturk)
    mturk.accept(hit_mturk_id(hit), "ASSIGN0001", "AWORKER1")
    client = Client()
    html = client.get(_page_url(hit)).content.decode()
    assignment = _assignment("ASSIGN0001")
    assert assignment.worker.get_username() == "mturk-AWORKER1"
    assert not assignment.worker.has_usable_password()
    role = Membership.objects.get(user=assignment.worker, project=on_mturk.project).role
    assert role == Role.ANNOTATOR
    assert html.count("<textarea") == 2
    client.get(_page_url(hit))  # a reload is the same assignment
    assert Assignment.objects.count() == 1
    assert Hit.objects.get(pk=hit.pk).taken == 1


def test_the_worker_id_is_kept_in_its_own_field(on_mturk: Batch, mturk: FakeMTurk) -> None:
    _accept(mturk, _hit(on_mturk))
    worker = Assignment.objects.get().worker
    assert MTurkWorker.objects.get(worker_id="AWORKER1").user == worker


def test_an_account_named_like_a_worker_is_not_that_worker(
    on_mturk: Batch, mturk: FakeMTurk
) -> None:
    # made through a sign-up form before the prefix was reserved
    squatter = make_user("mturk-AWORKER1")
    _accept(mturk, _hit(on_mturk))
    worker = Assignment.objects.get().worker
    assert worker != squatter
    assert worker.get_username() == "mturk-AWORKER1-2"
    assert MTurkWorker.objects.get(worker_id="AWORKER1").user == worker
    assert not squatter.assignments.exists()


def test_a_renamed_worker_account_keeps_its_assignments(on_mturk: Batch, mturk: FakeMTurk) -> None:
    hit = _hit(on_mturk)
    _accept(mturk, hit)
    worker = Assignment.objects.get().worker
    worker.username = "someone-else"
    worker.save()
    _accept(mturk, hit)  # the reload finds the same assignment: identity is not the name
    assert Assignment.objects.get().worker == worker


def test_the_migration_links_the_accounts_the_mturk_page_made(db: None) -> None:
    made_by_the_page = get_user_model().objects.create_user("mturk-AOLD1", password=None)
    signed_up = make_user("mturk-ASQUAT1")  # a usable password: a person chose this name
    make_user("mturkey")
    migration = importlib.import_module("annotation.migrations.0005_mturk_worker_identity")
    migration.link_existing_mturk_accounts(apps, None)
    assert list(MTurkWorker.objects.values_list("worker_id", "user")) == [
        ("AOLD1", made_by_the_page.pk)
    ]
    assert not MTurkWorker.objects.filter(user=signed_up).exists()


def test_a_wrong_hit_id_is_404(on_mturk: Batch) -> None:
    hit = _hit(on_mturk)
    url = _page_url(hit).replace(hit_mturk_id(hit), "HITNOTOURS")
    assert Client().get(url).status_code == 404
    assert not Assignment.objects.exists()


def test_a_foreign_turk_submit_to_is_refused(on_mturk: Batch) -> None:
    url = _page_url(_hit(on_mturk)).replace("workersandbox.mturk.com", "evil.example.com")
    response = Client().get(url)
    assert response.status_code == 409
    assert "is not an MTurk address" in response.content.decode()
    assert not Assignment.objects.exists()


@pytest.mark.parametrize("sends", [1, 2], ids=["sent-once", "sent-again"])
def test_a_submit_posts_back_to_mturk_and_stores_the_captions_once(
    on_mturk: Batch, mturk: FakeMTurk, sends: int
) -> None:
    hit = _hit(on_mturk)
    client, token = _accept(mturk, hit)
    # sent again: the frame's first answer was lost; same token, same captions
    responses = [_send(client, hit, token) for _ in range(sends)]
    assert [r.status_code for r in responses] == [200] * sends, responses[-1].content
    html = responses[-1].content.decode()
    assert f'action="{SANDBOX}/mturk/externalSubmit"' in html
    assert 'name="assignmentId" value="ASSIGN0001"' in html
    assignment = _assignment("ASSIGN0001")
    assert assignment.state == Assignment.State.SUBMITTED
    assert list(assignment.captions.values_list("text", flat=True)) == [CAPTION, CAPTION]


def test_a_caption_breaking_the_rules_is_shown_its_message(
    on_mturk: Batch, mturk: FakeMTurk
) -> None:
    hit = _hit(on_mturk)
    client, token = _accept(mturk, hit)
    bad = "there is a dog barking"
    response = _send(client, hit, token, bad)
    assert response.status_code == 400
    [problem] = rules.errors(bad, caption_limits(on_mturk))
    assert f"The caption for clip 1 {problem.message}." in response.content.decode()
    assert not Caption.objects.exists()
    assert Assignment.objects.get().state == Assignment.State.ACCEPTED


def test_an_altered_token_stores_nothing(on_mturk: Batch, mturk: FakeMTurk) -> None:
    hit = _hit(on_mturk)
    client, token = _accept(mturk, hit)
    response = _send(client, hit, token + "x")
    assert response.status_code == 400
    assert "expired or was altered" in response.content.decode()
    assert not Caption.objects.exists()


def test_another_worker_cannot_take_over_an_assignment(on_mturk: Batch, mturk: FakeMTurk) -> None:
    hit = _hit(on_mturk)
    _accept(mturk, hit, assignment_id="ASSIGN0001", worker_id="AWORKER1")
    response = Client().get(_page_url(hit, assignment_id="ASSIGN0001", worker_id="AWORKER2"))
    assert response.status_code == 409
    assert "belongs to another HIT or worker" in response.content.decode()
    assert 'name="token"' not in response.content.decode()
    assert Assignment.objects.get().worker.get_username() == "mturk-AWORKER1"


def test_a_token_of_one_hit_submits_nothing_to_another(
    two_hits: tuple[Hit, Hit], mturk: FakeMTurk
) -> None:
    first, second = two_hits
    client, token = _accept(mturk, first)
    response = _send(client, second, token)
    assert response.status_code == 400
    assert "belongs to another HIT" in response.content.decode()
    assert not Caption.objects.exists()


def test_a_second_hit_waits_until_the_first_is_done(
    two_hits: tuple[Hit, Hit], mturk: FakeMTurk
) -> None:
    first, second = two_hits
    _accept(mturk, first, assignment_id="ASSIGN0001")
    mturk.accept(hit_mturk_id(second), "ASSIGN0002", "AWORKER1")
    response = Client().get(_page_url(second, assignment_id="ASSIGN0002"))
    assert response.status_code == 409
    assert "submit or return the other first" in response.content.decode()
    assert Hit.objects.get(pk=second.pk).taken == 0


def test_the_page_plays_its_clips_to_the_token_holder_only(
    on_mturk: Batch, mturk: FakeMTurk, settings: Any, tmp_path: Path
) -> None:
    settings.MEDIA_ROOT = tmp_path
    hit = _hit(on_mturk)
    hit_clip = hit.hit_clips.order_by("position").first()
    assert hit_clip is not None
    hit_clip.clip.audio.save("clip.wav", ContentFile(wav_bytes()))
    client, token = _accept(mturk, hit)
    url = f"/mturk/hits/{hit.pk}/{hit_clip.clip_id}/audio"
    response = client.get(url, {"t": token})
    assert response.status_code == 200
    assert streamed(response) == wav_bytes()
    assert client.get(url).status_code == 404
    assert client.get(url, {"t": token[:-2]}).status_code == 404


@pytest.fixture
def clip_audio(
    on_mturk: Batch, mturk: FakeMTurk, settings: Any, tmp_path: Path
) -> tuple[Client, str]:
    """The worker's page open, with the address of its clip's audio, not played yet."""
    settings.MEDIA_ROOT = tmp_path
    hit = _hit(on_mturk)
    hit_clip = hit.hit_clips.order_by("position").first()
    assert hit_clip is not None
    hit_clip.clip.audio.save("clip.wav", ContentFile(wav_bytes()))
    client, token = _accept(mturk, hit)
    ClipAudioServed.objects.all().delete()  # _accept records every clip as heard
    return client, f"/mturk/hits/{hit.pk}/{hit_clip.clip_id}/audio?{urlencode({'t': token})}"


def test_the_pages_first_get_records_the_clip_served_whole(clip_audio: tuple[Client, str]) -> None:
    assert len(audio_get_served_writes(*clip_audio)) == 1
    assert ClipAudioServed.objects.get().whole_at is not None


def test_a_replay_on_the_page_writes_no_served_record(clip_audio: tuple[Client, str]) -> None:
    audio_get_served_writes(*clip_audio)
    assert audio_get_served_writes(*clip_audio) == []


def test_a_range_inside_one_served_on_the_page_writes_nothing(
    clip_audio: tuple[Client, str],
) -> None:
    assert audio_get_served_writes(*clip_audio, "bytes=0-99")
    assert audio_get_served_writes(*clip_audio, "bytes=10-50") == []
    assert ClipAudioServed.objects.get().ranges == [[0, 99]]


# What MTurk confirms ---------------------------------------------------------------------------


def _nothing_made() -> bool:
    return (
        not Assignment.objects.exists()
        and not MTurkWorker.objects.exists()
        and not get_user_model().objects.filter(username__startswith="mturk-").exists()
    )


def test_a_made_up_assignment_creates_nothing(on_mturk: Batch, mturk: FakeMTurk) -> None:
    hit = _hit(on_mturk)
    response = Client().get(_page_url(hit, assignment_id="MADEUP0001", worker_id="AFAKE1"))
    assert response.status_code == 409
    assert "accept the HIT on MTurk first" in response.content.decode()
    assert _nothing_made()
    assert Hit.objects.get(pk=hit.pk).taken == 0


def test_made_up_ids_cannot_fill_a_hits_slots(on_mturk: Batch, mturk: FakeMTurk) -> None:
    hit = _hit(on_mturk)
    for n in range(3):
        Client().get(_page_url(hit, assignment_id=f"MADEUP000{n}", worker_id=f"AFAKE{n}"))
    assert _nothing_made()
    _accept(mturk, hit)  # a real worker still finds a slot


def test_a_submitted_assignment_is_checked_against_its_worker_and_hit(
    on_mturk: Batch, mturk: FakeMTurk
) -> None:
    hit = _hit(on_mturk)
    mturk.accept(hit_mturk_id(hit), "ASSIGN0005", "AWORKER5")
    mturk.submit("ASSIGN0005")
    response = Client().get(_page_url(hit, assignment_id="ASSIGN0005", worker_id="AWORKER6"))
    assert response.status_code == 409
    assert "belongs to another HIT or worker" in response.content.decode()
    assert _nothing_made()


def test_an_assignment_of_another_hit_takes_no_slot_here(
    two_hits: tuple[Hit, Hit], mturk: FakeMTurk
) -> None:
    first, second = two_hits
    mturk.accept(hit_mturk_id(first), "ASSIGN0001", "AEVIL1")  # real, but on the first HIT
    response = Client().get(_page_url(second, assignment_id="ASSIGN0001", worker_id="AEVIL1"))
    assert response.status_code == 409
    assert "no assignment of this HIT in progress" in response.content.decode()
    assert _nothing_made()
    assert Hit.objects.get(pk=second.pk).taken == 0


def test_one_assignment_in_progress_there_opens_one_here(on_mturk: Batch, mturk: FakeMTurk) -> None:
    hit = _hit(on_mturk)
    _accept(mturk, hit, assignment_id="ASSIGN0001", worker_id="AWORKER1")
    # an assignment in progress on another HIT, passed off as a second one of this HIT
    mturk.accept("HITELSEWHERE", "ASSIGN0002", "AEVIL1")
    response = Client().get(_page_url(hit, assignment_id="ASSIGN0002", worker_id="AEVIL1"))
    assert response.status_code == 409
    assert Assignment.objects.count() == 1
    assert not MTurkWorker.objects.filter(worker_id="AEVIL1").exists()


def test_a_page_under_the_id_of_a_worker_at_work_leaves_their_assignment_alone(
    on_mturk: Batch, mturk: FakeMTurk
) -> None:
    hit = _hit(on_mturk)
    _accept(mturk, hit, assignment_id="ASSIGN0001", worker_id="AWORKER1")
    mturk.accept(hit_mturk_id(hit), "ASSIGN0002", "AEVIL1")  # a real assignment of their own
    response = Client().get(_page_url(hit, assignment_id="ASSIGN0002", worker_id="AWORKER1"))
    assert response.status_code == 409
    assert _state("ASSIGN0001") == Assignment.State.ACCEPTED
    assert Assignment.objects.count() == 1


def test_a_blocked_worker_cannot_submit_the_hit_already_held(
    on_mturk: Batch, mturk: FakeMTurk, rey: Any
) -> None:
    hit = _hit(on_mturk)
    client, token = _accept(mturk, hit)
    worker = Assignment.objects.get().worker
    worker_block(project=on_mturk.project, worker=worker, by=rey, reason="Copies the hints.")
    response = _send(client, hit, token)
    assert response.status_code == 409
    html = response.content.decode()
    assert "You are blocked from this project&#x27;s HITs" in html
    assert "Please return the HIT on MTurk." in html
    assert "externalSubmit" not in html
    assert not Caption.objects.exists()
    assert _state("ASSIGN0001") == Assignment.State.RETURNED


def test_a_blocked_worker_opens_no_new_assignment(
    on_mturk: Batch, mturk: FakeMTurk, rey: Any
) -> None:
    hit = _hit(on_mturk)
    _submitted(mturk, hit, "ASSIGN0001", "AWORKER1")
    worker = Assignment.objects.get().worker
    worker_block(project=on_mturk.project, worker=worker, by=rey, reason="Copies the hints.")
    mturk.accept(hit_mturk_id(hit), "ASSIGN0002", "AWORKER1")
    response = Client().get(_page_url(hit, assignment_id="ASSIGN0002", worker_id="AWORKER1"))
    assert response.status_code == 409
    assert "blocked from this project" in response.content.decode()
    assert Assignment.objects.count() == 1


def test_a_worker_refused_a_full_hit_gets_no_account(on_mturk: Batch, mturk: FakeMTurk) -> None:
    hit = _hit(on_mturk)
    _accept(mturk, hit, assignment_id="ASSIGN0001", worker_id="AWORKER1")
    _accept(mturk, hit, assignment_id="ASSIGN0002", worker_id="AWORKER2")
    mturk.accept(hit_mturk_id(hit), "ASSIGN0003", "AWORKER3")  # MTurk let a third one in
    response = Client().get(_page_url(hit, assignment_id="ASSIGN0003", worker_id="AWORKER3"))
    assert response.status_code == 409
    assert "all the captions it wants" in response.content.decode()
    assert not MTurkWorker.objects.filter(worker_id="AWORKER3").exists()
    assert not get_user_model().objects.filter(username="mturk-AWORKER3").exists()


def test_mturk_out_of_reach_refuses_for_now_and_creates_nothing(
    on_mturk: Batch, mturk: FakeMTurk
) -> None:
    hit = _hit(on_mturk)
    mturk.accept(hit_mturk_id(hit), "ASSIGN0001", "AWORKER1")
    mturk.fail_after["GetAssignment"] = 0
    response = Client().get(_page_url(hit))
    assert response.status_code == 503
    assert "try again in a minute" in response.content.decode()
    assert _nothing_made()


def test_the_submit_is_checked_with_mturk_again(on_mturk: Batch, mturk: FakeMTurk) -> None:
    hit = _hit(on_mturk)
    client, token = _accept(mturk, hit)
    mturk.give_back("ASSIGN0001")  # returned on MTurk, the page still open here
    response = _send(client, hit, token)
    assert response.status_code == 409
    assert "accept the HIT on MTurk first" in response.content.decode()
    assert not Caption.objects.exists()
    assert Assignment.objects.get().state == Assignment.State.ACCEPTED


def test_a_submit_mturk_cannot_confirm_keeps_the_captions_typed(
    on_mturk: Batch, mturk: FakeMTurk
) -> None:
    hit = _hit(on_mturk)
    client, token = _accept(mturk, hit)
    mturk.fail_after["GetAssignment"] = 0
    response = _send(client, hit, token)
    assert response.status_code == 503
    html = response.content.decode()
    assert "try again in a minute" in html
    assert html.count(f">{CAPTION}</textarea>") == 2
    assert not Caption.objects.exists()


def test_a_submission_is_provisional_until_mturk_names_its_worker(
    on_mturk: Batch, mturk: FakeMTurk, rey: Any
) -> None:
    hit = _hit(on_mturk)
    client, token = _accept(mturk, hit)
    _send(client, hit, token)
    assignment = _assignment("ASSIGN0001")
    with pytest.raises(ValidationError, match="not yet confirmed who submitted"):
        review_approve(assignment=assignment, reviewer=rey)
    assert mturk_submissions_confirm() == {
        "confirmed": 0,
        "mismatched": 0,
        "waiting": 1,
        "gone": 0,
    }
    mturk.submit("ASSIGN0001")  # the worker's browser posts on to MTurk
    assert mturk_submissions_confirm() == {
        "confirmed": 1,
        "mismatched": 0,
        "waiting": 0,
        "gone": 0,
    }
    review_approve(assignment=assignment, reviewer=rey)
    assert mturk_reviews_send() == {"sent": 1, "refused": 0, "mismatched": 0}


def test_work_never_posted_to_mturk_is_rejected_and_its_slot_freed(
    on_mturk: Batch, mturk: FakeMTurk
) -> None:
    hit = _hit(on_mturk)
    client, token = _accept(mturk, hit)
    _send(client, hit, token)
    mturk.give_back("ASSIGN0001")  # returned there before the browser posted it
    assert mturk_submissions_confirm()["gone"] == 1
    assignment = _assignment("ASSIGN0001")
    assert assignment.state == Assignment.State.REJECTED
    assert "never submitted on MTurk" in assignment.feedback
    hit.refresh_from_db()
    assert hit.taken == 0
    assert not mturk.of("RejectAssignment")  # nothing there to reject


def test_a_provisional_submission_is_not_auto_approved(on_mturk: Batch, mturk: FakeMTurk) -> None:
    hit = _hit(on_mturk)
    client, token = _accept(mturk, hit)
    _send(client, hit, token)
    later = timezone.now() + on_mturk.auto_approve_delay + timedelta(minutes=1)
    assert assignments_auto_approve(now=later) == 0
    assert _state("ASSIGN0001") == Assignment.State.SUBMITTED


def _impersonated(mturk: FakeMTurk, hit: Hit, victim: str = "AVICTIM1") -> Assignment:
    """AEVIL1 accepts for real, opens the page claiming `victim`'s id, submits, and their
    browser posts on to MTurk, which then names AEVIL1."""
    mturk.accept(hit_mturk_id(hit), "ASSIGN0001", "AEVIL1")
    client, token = _accept(mturk, hit, assignment_id="ASSIGN0001", worker_id=victim)
    assert _send(client, hit, token).status_code == 200
    mturk.submit("ASSIGN0001")
    return _assignment("ASSIGN0001")


def test_work_submitted_under_another_workers_id_is_rejected_on_mturk(
    on_mturk: Batch, mturk: FakeMTurk, caplog: pytest.LogCaptureFixture
) -> None:
    assignment = _impersonated(mturk, _hit(on_mturk))
    assert mturk_submissions_confirm()["mismatched"] == 1
    [rejected] = mturk.of("RejectAssignment")
    assert rejected["AssignmentId"] == "ASSIGN0001"
    assert "under another worker's id (AVICTIM1)" in rejected["RequesterFeedback"]
    assert mturk.reviews == {"ASSIGN0001": "rejected"}  # MTurk's auto-approval pays nothing
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.REJECTED
    assert not LedgerEntry.objects.exists()
    assert "MTurk has it as worker AEVIL1's" in caplog.text
    # sent once: the decision is MTurk's now
    assert mturk_submissions_confirm() == {
        "confirmed": 0,
        "mismatched": 0,
        "waiting": 0,
        "gone": 0,
    }
    assert mturk_reviews_send() == {"sent": 0, "refused": 0, "mismatched": 0}


def test_the_block_moves_to_the_worker_mturk_named(
    on_mturk: Batch, mturk: FakeMTurk, rey: Any
) -> None:
    hit = _hit(on_mturk)
    assignment = _impersonated(mturk, hit)
    victim = assignment.worker
    # a reviewer, reading the work, blocks the account it was filed under
    worker_block(project=on_mturk.project, worker=victim, by=rey, reason="Nonsense captions.")
    mturk_submissions_confirm()
    evil = MTurkWorker.objects.get(worker_id="AEVIL1").user
    assert Block.objects.active().filter(project=on_mturk.project, worker=evil).exists()
    assert not Block.objects.active().filter(worker=victim).exists()
    assert mturk_blocks_sync() == {"blocked": 1, "lifted": 0, "refused": 0}
    assert set(mturk.blocked) == {"AEVIL1"}


def test_a_blocked_worker_under_a_fresh_id_is_caught_and_kept_out(
    on_mturk: Batch, mturk: FakeMTurk, rey: Any
) -> None:
    hit = _hit(on_mturk)
    first = _submitted(mturk, hit, "ASSIGN0000", "AEVIL1")
    worker_block(project=on_mturk.project, worker=first.worker, by=rey, reason="Copies hints.")
    mturk_blocks_sync()  # mirrored: MTurk shows AEVIL1 none of our HITs any more
    with pytest.raises(NotQualified, match="blocked"):
        mturk.accept(hit_mturk_id(hit), "ASSIGN0001", "AEVIL1")
    mturk.blocked.clear()  # say the block came too late: they hold a real assignment
    _impersonated(mturk, hit, victim="AFRESH1")
    assert mturk_submissions_confirm()["mismatched"] == 1
    assert mturk.reviews["ASSIGN0001"] == "rejected"


def test_local_blocks_are_mirrored_on_mturk_and_lifted_there(
    on_mturk: Batch, mturk: FakeMTurk, rey: Any
) -> None:
    worker = _submitted(mturk, _hit(on_mturk), "ASSIGN0001", "AWORKER1").worker
    worker_block(project=on_mturk.project, worker=worker, by=rey, reason="Copies the hints.")
    assert mturk_blocks_sync() == {"blocked": 1, "lifted": 0, "refused": 0}
    [sent] = mturk.of("CreateWorkerBlock")
    assert sent["WorkerId"] == "AWORKER1"
    assert "Copies the hints." in sent["Reason"]
    assert mturk_blocks_sync() == {"blocked": 0, "lifted": 0, "refused": 0}  # once
    worker_unblock(project=on_mturk.project, worker=worker, by=rey)
    assert mturk_blocks_sync() == {"blocked": 0, "lifted": 1, "refused": 0}
    assert [b["WorkerId"] for b in mturk.of("DeleteWorkerBlock")] == ["AWORKER1"]
    assert not mturk.blocked


def test_a_block_mturk_refuses_is_sent_again(on_mturk: Batch, mturk: FakeMTurk, rey: Any) -> None:
    worker = _submitted(mturk, _hit(on_mturk), "ASSIGN0001", "AWORKER1").worker
    worker_block(project=on_mturk.project, worker=worker, by=rey, reason="Copies the hints.")
    mturk.refuse_after["CreateWorkerBlock"] = 0
    assert mturk_blocks_sync() == {"blocked": 0, "lifted": 0, "refused": 1}
    del mturk.refuse_after["CreateWorkerBlock"]
    assert mturk_blocks_sync() == {"blocked": 1, "lifted": 0, "refused": 0}


def test_local_workers_blocks_stay_local(
    on_mturk: Batch, mturk: FakeMTurk, rey: Any, ann: Any
) -> None:
    worker_block(project=on_mturk.project, worker=ann, by=rey, reason="Copies the hints.")
    assert mturk_blocks_sync() == {"blocked": 0, "lifted": 0, "refused": 0}
    assert not mturk.of("CreateWorkerBlock")


# Request limits -----------------------------------------------------------------------------


def test_too_many_requests_from_one_address_are_refused(
    on_mturk: Batch, mturk: FakeMTurk, settings: Any
) -> None:
    settings.MTURK_PAGE_LIMIT_PER_ADDRESS = 2
    hit = _hit(on_mturk)
    for n in range(2):
        Client().get(_page_url(hit, assignment_id=f"MADEUP000{n}"))
    calls = len(mturk.calls)
    mturk.accept(hit_mturk_id(hit), "ASSIGN0001", "AWORKER1")
    response = Client().get(_page_url(hit))
    assert response.status_code == 429
    assert "Too many requests" in response.content.decode()
    assert len(mturk.calls) == calls  # MTurk is not asked
    assert _nothing_made()
    other = Client(REMOTE_ADDR="192.0.2.7").get(_page_url(hit))
    assert other.status_code == 200


def test_too_many_requests_for_one_hit_are_refused(
    on_mturk: Batch, mturk: FakeMTurk, settings: Any
) -> None:
    settings.MTURK_PAGE_LIMIT_PER_HIT = 2
    hit = _hit(on_mturk)
    mturk.accept(hit_mturk_id(hit), "ASSIGN0001", "AWORKER1")
    for n in range(2):  # confirmed requests: an open and a reload
        assert Client(REMOTE_ADDR=f"192.0.2.{n}").get(_page_url(hit)).status_code == 200
    mturk.accept(hit_mturk_id(hit), "ASSIGN0002", "AWORKER2")
    response = Client(REMOTE_ADDR="192.0.2.9").get(_page_url(hit, "ASSIGN0002", "AWORKER2"))
    assert response.status_code == 429
    assert Assignment.objects.count() == 1


def test_made_up_ids_do_not_lock_a_hit_for_its_workers(
    on_mturk: Batch, mturk: FakeMTurk, settings: Any
) -> None:
    settings.MTURK_PAGE_LIMIT_PER_HIT = 2
    hit = _hit(on_mturk)
    for n in range(5):  # forged page requests from many addresses: MTurk refuses each
        forged = Client(REMOTE_ADDR=f"192.0.2.{n}").get(_page_url(hit, f"MADEUP000{n}"))
        assert forged.status_code == 409
    _accept(mturk, hit)


def test_requests_over_the_address_limit_count_nowhere_else(
    on_mturk: Batch, mturk: FakeMTurk, settings: Any
) -> None:
    settings.MTURK_PAGE_LIMIT_PER_ADDRESS = 1
    settings.MTURK_PAGE_LIMIT_PER_HIT = 2
    hit = _hit(on_mturk)
    mturk.accept(hit_mturk_id(hit), "ASSIGN0001", "AWORKER1")
    flooding = Client(REMOTE_ADDR="192.0.2.66")
    assert flooding.get(_page_url(hit)).status_code == 200  # counted for the HIT: 1
    for _ in range(10):  # refused at the address: the HIT's count stays at 1
        assert flooding.get(_page_url(hit)).status_code == 429
    mturk.accept(hit_mturk_id(hit), "ASSIGN0002", "AWORKER2")
    assert _accept(mturk, hit, "ASSIGN0002", "AWORKER2")


def test_previews_are_not_counted(on_mturk: Batch, mturk: FakeMTurk, settings: Any) -> None:
    settings.MTURK_PAGE_LIMIT_PER_ADDRESS = settings.MTURK_PAGE_LIMIT_PER_HIT = 1
    hit = _hit(on_mturk)
    for _ in range(3):
        assert Client().get(_page_url(hit, assignment_id=PREVIEW)).status_code == 200
    _accept(mturk, hit)


def test_the_limits_count_per_window(
    on_mturk: Batch, mturk: FakeMTurk, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.MTURK_PAGE_LIMIT_PER_ADDRESS = 1
    hit = _hit(on_mturk)
    monkeypatch.setattr("annotation.platforms.mturk.page.time.time", lambda: 1_000_000.0)
    Client().get(_page_url(hit, assignment_id="MADEUP0001"))
    mturk.accept(hit_mturk_id(hit), "ASSIGN0001", "AWORKER1")
    assert Client().get(_page_url(hit)).status_code == 429
    later = 1_000_000.0 + settings.MTURK_PAGE_LIMIT_WINDOW_SECONDS
    monkeypatch.setattr("annotation.platforms.mturk.page.time.time", lambda: later)
    assert Client().get(_page_url(hit)).status_code == 200


# Reviews -------------------------------------------------------------------------------------


def _submitted(mturk: FakeMTurk, hit: Hit, assignment_id: str, worker_id: str) -> Assignment:
    client, token = _accept(mturk, hit, assignment_id=assignment_id, worker_id=worker_id)
    response = _send(client, hit, token)
    assert response.status_code == 200, response.content
    mturk.submit(assignment_id)  # the worker's browser posts the form on to MTurk
    mturk_submissions_confirm()  # the periodic job: MTurk names the same worker
    return _assignment(assignment_id)


def test_reviews_are_sent_to_mturk_once(on_mturk: Batch, mturk: FakeMTurk, rey: Any) -> None:
    hit = _hit(on_mturk)
    good = _submitted(mturk, hit, "ASSIGN0001", "AWORKER1")
    bad = _submitted(mturk, hit, "ASSIGN0002", "AWORKER2")
    review_approve(assignment=good, reviewer=rey)
    review_reject(assignment=bad, reviewer=rey, reason=RejectReason.TRANSCRIBES_SPEECH)
    assert mturk_reviews_send() == {"sent": 2, "refused": 0, "mismatched": 0}
    assert mturk.reviews == {"ASSIGN0001": "approved", "ASSIGN0002": "rejected"}
    [rejection] = mturk.of("RejectAssignment")
    assert rejection["RequesterFeedback"].startswith("Please describe that someone speaks")
    assert mturk_reviews_send() == {"sent": 0, "refused": 0, "mismatched": 0}
    assert len(mturk.of("ApproveAssignment")) == 1


def test_a_review_mturk_refuses_is_sent_again_later(
    on_mturk: Batch, mturk: FakeMTurk, rey: Any
) -> None:
    assignment = _submitted(mturk, _hit(on_mturk), "ASSIGN0001", "AWORKER1")
    review_approve(assignment=assignment, reviewer=rey)
    mturk.refuse_after["ApproveAssignment"] = 0
    assert mturk_reviews_send() == {"sent": 0, "refused": 1, "mismatched": 0}
    assignment.refresh_from_db()
    assert _reported_at(assignment) is None
    del mturk.refuse_after["ApproveAssignment"]
    assert mturk_reviews_send() == {"sent": 1, "refused": 0, "mismatched": 0}


def test_a_decision_mturk_already_took_is_not_sent(
    on_mturk: Batch, mturk: FakeMTurk, rey: Any
) -> None:
    assignment = _submitted(mturk, _hit(on_mturk), "ASSIGN0001", "AWORKER1")
    review_approve(assignment=assignment, reviewer=rey)
    mturk.set_status("ASSIGN0001", "Approved")  # MTurk's own auto-approval came first
    assert mturk_reviews_send() == {"sent": 1, "refused": 0, "mismatched": 0}
    assert mturk_reviews_send() == {"sent": 0, "refused": 0, "mismatched": 0}
    assert not mturk.of("ApproveAssignment")


def test_the_platform_interface_runs_mturks_periodic_work(
    on_mturk: Batch, mturk: FakeMTurk, rey: Any
) -> None:
    hit = _hit(on_mturk)
    client, token = _accept(mturk, hit)
    _send(client, hit, token)
    mturk.submit("ASSIGN0001")
    result = platform_get("mturk").sync()
    assert result["confirm_confirmed"] == 1
    review_approve(assignment=_assignment("ASSIGN0001"), reviewer=rey)
    assert platform_get("mturk").sync()["decisions_send_sent"] == 1


def test_a_status_mturk_will_not_give_leaves_the_review_for_later(
    on_mturk: Batch, mturk: FakeMTurk, rey: Any, caplog: pytest.LogCaptureFixture
) -> None:
    assignment = _submitted(mturk, _hit(on_mturk), "ASSIGN0001", "AWORKER1")
    review_approve(assignment=assignment, reviewer=rey)
    mturk.refuse_after["ApproveAssignment"] = 0
    mturk.refuse_after["GetAssignment"] = 0
    assert mturk_reviews_send() == {"sent": 0, "refused": 1, "mismatched": 0}
    assert f"assignment #{assignment.pk} (ASSIGN0001) stands" in caplog.text
    assert "GetAssignment refused" in caplog.text


class _BrokenClient:
    """Asking MTurk how the assignment stands hits a bug."""

    def approve_assignment(self, **_: Any) -> None:
        raise ClientError(
            {"Error": {"Code": "RequestError", "Message": "refused"}}, "ApproveAssignment"
        )

    def get_assignment(self, **_: Any) -> None:
        raise TypeError("a bug, not MTurk's answer")


def test_an_unexpected_error_asking_mturk_is_raised_not_counted_as_undecided(
    on_mturk: Batch, mturk: FakeMTurk, rey: Any
) -> None:
    assignment = _submitted(mturk, _hit(on_mturk), "ASSIGN0001", "AWORKER1")
    review_approve(assignment=assignment, reviewer=rey)
    with pytest.raises(TypeError, match="a bug"):
        mturk_reviews_send(client=_BrokenClient())
    assignment.refresh_from_db()
    assert _reported_at(assignment) is None


# Returns on MTurk ---------------------------------------------------------------------------


def _state(assignment_id: str) -> str:
    return _assignment(assignment_id).state


def test_a_hit_returned_on_mturk_gives_its_slot_back(on_mturk: Batch, mturk: FakeMTurk) -> None:
    hit = _hit(on_mturk)
    _accept(mturk, hit, assignment_id="ASSIGN0001", worker_id="AWORKER1")
    _submitted(mturk, hit, "ASSIGN0002", "AWORKER2")
    mturk.give_back("ASSIGN0001")  # nothing in progress there now, one submitted
    assert mturk_returns_sync() == {"released": 1, "unsettled": 0, "failed": 0}
    assert _state("ASSIGN0001") == Assignment.State.RETURNED
    assert _state("ASSIGN0002") == Assignment.State.SUBMITTED
    assert Hit.objects.get(pk=hit.pk).taken == 1
    # the slot MTurk gave to a third worker is there for them here too
    _accept(mturk, hit, assignment_id="ASSIGN0003", worker_id="AWORKER3")
    assert Hit.objects.get(pk=hit.pk).taken == 2
    # AWORKER3 at work there
    assert mturk_returns_sync() == {"released": 0, "unsettled": 0, "failed": 0}
    assert _state("ASSIGN0003") == Assignment.State.ACCEPTED


def test_an_assignment_whose_time_ran_out_there_is_abandoned(
    on_mturk: Batch, mturk: FakeMTurk
) -> None:
    hit = _hit(on_mturk)
    _accept(mturk, hit, assignment_id="ASSIGN0001", worker_id="AWORKER1")
    mturk.give_back("ASSIGN0001")
    later = Assignment.objects.get().deadline + timedelta(seconds=1)
    assert mturk_returns_sync(now=later)["released"] == 1
    assert _state("ASSIGN0001") == Assignment.State.ABANDONED
    assert Hit.objects.get(pk=hit.pk).taken == 0


def test_it_leaves_a_hit_alone_while_it_cannot_tell_who_returned(
    on_mturk: Batch, mturk: FakeMTurk
) -> None:
    hit = _hit(on_mturk)
    _accept(mturk, hit, assignment_id="ASSIGN0001", worker_id="AWORKER1")
    _accept(mturk, hit, assignment_id="ASSIGN0002", worker_id="AWORKER2")
    mturk.give_back("ASSIGN0001")  # one of the two returned; which, MTurk won't say
    assert mturk_returns_sync() == {"released": 0, "unsettled": 1, "failed": 0}
    mturk.accept(hit_mturk_id(hit), "ASSIGN0001", "AWORKER1")  # both at work there
    assert mturk_returns_sync() == {"released": 0, "unsettled": 0, "failed": 0}
    assert {_state("ASSIGN0001"), _state("ASSIGN0002")} == {Assignment.State.ACCEPTED}
    assert Hit.objects.get(pk=hit.pk).taken == 2


def test_it_follows_mturks_pages_of_assignments(on_mturk: Batch, mturk: FakeMTurk) -> None:
    hit = _hit(on_mturk)
    for other in ("OTHER0001", "OTHER0002"):
        mturk.accept(hit_mturk_id(hit), other, f"A{other}")
        mturk.submit(other)
    _accept(mturk, hit, assignment_id="ASSIGN0001", worker_id="AWORKER1")
    # submitted there, on the last of MTurk's pages, though not yet here
    mturk.submit("ASSIGN0001")
    assert mturk_returns_sync() == {"released": 0, "unsettled": 0, "failed": 0}
    assert len(mturk.of("ListAssignmentsForHIT")) == 2
    assert _state("ASSIGN0001") == Assignment.State.ACCEPTED


def test_a_worker_back_on_the_same_hit_leaves_the_old_assignment(
    on_mturk: Batch, mturk: FakeMTurk
) -> None:
    hit = _hit(on_mturk)
    _accept(mturk, hit, assignment_id="ASSIGN0001", worker_id="AWORKER1")
    # returned on MTurk, then accepted again: MTurk gives a new assignmentId
    mturk.give_back("ASSIGN0001")
    client, token = _accept(mturk, hit, assignment_id="ASSIGN0009", worker_id="AWORKER1")
    assert _state("ASSIGN0001") == Assignment.State.RETURNED
    assert _state("ASSIGN0009") == Assignment.State.ACCEPTED
    assert Hit.objects.get(pk=hit.pk).taken == 1
    response = _send(client, hit, token)
    assert response.status_code == 200
    assert _state("ASSIGN0009") == Assignment.State.SUBMITTED


def test_returns_are_synced_again_when_mturk_does_not_answer(
    on_mturk: Batch, mturk: FakeMTurk
) -> None:
    hit = _hit(on_mturk)
    _accept(mturk, hit, assignment_id="ASSIGN0001", worker_id="AWORKER1")
    mturk.give_back("ASSIGN0001")
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


@pytest.mark.parametrize(
    ("second_worker", "left_as"),
    [(_submitted, Assignment.State.SUBMITTED), (_accept, Assignment.State.ACCEPTED)],
    ids=["the-other-submitted", "the-other-still-at-work"],
)
def test_a_new_worker_on_a_full_hit_takes_the_slot_returned_there(
    on_mturk: Batch, mturk: FakeMTurk, second_worker: Callable[..., Any], left_as: str
) -> None:
    hit = _hit(on_mturk)
    _accept(mturk, hit, assignment_id="ASSIGN0001", worker_id="AWORKER1")
    second_worker(mturk, hit, "ASSIGN0002", "AWORKER2")
    # AWORKER1 returned it there and MTurk gave the slot to AWORKER3, whose page opens
    mturk.give_back("ASSIGN0001")
    _accept(mturk, hit, assignment_id="ASSIGN0003", worker_id="AWORKER3")
    assert _state("ASSIGN0001") == Assignment.State.RETURNED
    assert _state("ASSIGN0002") == left_as
    assert _state("ASSIGN0003") == Assignment.State.ACCEPTED
    assert Hit.objects.get(pk=hit.pk).taken == 2


def test_a_new_worker_on_a_full_hit_is_refused_while_mturk_leaves_a_doubt(
    on_mturk: Batch, mturk: FakeMTurk
) -> None:
    hit = _hit(on_mturk)
    _accept(mturk, hit, assignment_id="ASSIGN0001", worker_id="AWORKER1")
    _accept(mturk, hit, assignment_id="ASSIGN0002", worker_id="AWORKER2")
    mturk.give_back("ASSIGN0001")
    mturk.accept(hit_mturk_id(hit), "ASSIGN0003", "AWORKER3")
    # MTurk answers for AWORKER3's assignment, then cannot say how the others stand
    mturk.fail_after["GetAssignment"] = 1
    response = Client().get(_page_url(hit, assignment_id="ASSIGN0003", worker_id="AWORKER3"))
    assert response.status_code == 409
    assert "reload the page in a minute" in response.content.decode()
    assert {_state("ASSIGN0001"), _state("ASSIGN0002")} == {Assignment.State.ACCEPTED}
    assert not MTurkWorker.objects.filter(worker_id="AWORKER3").exists()
