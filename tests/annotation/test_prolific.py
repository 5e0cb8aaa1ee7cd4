"""Prolific mode against a fake Prolific API on 127.0.0.1: a batch as one study, the
participants' arrival checked with Prolific before anything is written, the submit and the
completion redirect, decisions, bonuses and returns kept in step by the periodic job."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.files.base import ContentFile
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from annotation.models import Assignment, Batch, Caption, ClipAudioServed, Platform, PlatformRef
from annotation.platforms import platform_get
from annotation.platforms.prolific.blocks import blocklist_group
from annotation.platforms.prolific.check import prolific_check
from annotation.platforms.prolific.client import prolific_client, study_id
from annotation.platforms.prolific.publish import batch_prolific_publish, completion_code
from annotation.platforms.prolific.sync import prolific_sync
from annotation.services import hit_claim
from crowd.models import LedgerDiscrepancy, LedgerEntry, RejectReason
from crowd.services import (
    batch_requirements_set,
    bonus_pay,
    qualification_create,
    review_approve,
    review_reject,
    worker_block,
)
from tests.annotation.conftest import prolific_ready as _ready
from tests.annotation.factories import (
    CAPTION,
    MakeBatch,
    audio_get_served_writes,
    listened,
    make_clips,
    make_subset,
)
from tests.annotation.prolific_fake import (
    COMPLETE,
    SITE,
    WORKSPACE,
    FakeProlific,
)
from tests.conftest import login, streamed, wav_bytes


def _url(batch: Batch, pid: str, session: str, study: str | None = None) -> str:
    query = {"PROLIFIC_PID": pid, "STUDY_ID": study or study_id(batch), "SESSION_ID": session}
    return f"/prolific/batches/{batch.pk}/?{urlencode(query)}"


def _arrive(prolific: FakeProlific, batch: Batch, pid: str) -> tuple[Client, str, str]:
    """The participant takes a place on Prolific, which opens our page."""
    session = prolific.start(study_id(batch), pid)
    client = Client(enforce_csrf_checks=True)
    response = client.get(_url(batch, pid, session))
    assert response.status_code == 200, response.content
    listened(_assignment(session))
    match = re.search(r'name="token" value="([^"]+)"', response.content.decode())
    assert match
    return client, session, match.group(1)


def _assignment(session: str) -> Assignment:
    ref = PlatformRef.objects.get(platform="prolific", kind="assignment", external_id=session)
    return Assignment.objects.get(pk=ref.local_id)


def _send(client: Client, batch: Batch, session: str, token: str, text: str = CAPTION) -> Any:
    assignment = _assignment(session)
    clips = assignment.hit.hit_clips.values_list("clip_id", flat=True)
    captions = {f"caption-{c}": text for c in clips}
    return client.post(f"/prolific/batches/{batch.pk}/", {"token": token, **captions})


def _nothing_made() -> bool:
    return not (
        Assignment.objects.exists()
        or PlatformRef.objects.filter(kind__in=["assignment", "worker"]).exists()
        or get_user_model().objects.filter(username__startswith="prolific-").exists()
    )


# Publishing ---------------------------------------------------------------------------------


def test_it_drafts_and_publishes_one_study_per_batch(
    on_prolific: Batch, prolific: FakeProlific
) -> None:
    [body] = prolific.of("POST", "/studies/")
    assert body["total_available_places"] == 4  # two HITs times two captions
    assert (body["reward"], body["currency"], body["estimated_completion_time"]) == (
        100,
        "GBP",
        5,
    )
    assert body["external_study_url"] == (
        f"{SITE}/prolific/batches/{on_prolific.pk}/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}"
        "&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    )
    assert body["prolific_id_option"] == "url_parameters"
    assert body["completion_codes"][0]["code"] == completion_code(on_prolific)
    assert prolific.studies[study_id(on_prolific)]["status"] == "ACTIVE"
    assert on_prolific.platform == Platform.PROLIFIC


def test_publishing_again_makes_nothing_more(on_prolific: Batch, prolific: FakeProlific) -> None:
    result = batch_prolific_publish(batch=on_prolific, by=None)
    assert result == {"study": study_id(on_prolific), "status": "ACTIVE", "places": 4}
    assert len(prolific.of("POST", "/studies/")) == 1
    assert len(prolific.of("POST", f"/studies/{study_id(on_prolific)}/transition/")) == 1


def test_a_reward_below_the_minimum_hourly_rate_is_refused(
    make_batch: MakeBatch, prolific: FakeProlific, alice: Any
) -> None:
    batch = _ready(make_batch(clips=1), reward_cents=10, minutes=5)
    with pytest.raises(ValidationError) as refused:
        batch_prolific_publish(batch=batch, by=alice)
    message = " ".join(refused.value.messages)
    assert "1.20 GBP an hour: below Prolific's minimum of 6.00 GBP an hour" in message
    assert "at least 0.50 GBP per HIT" in message
    assert not prolific.calls
    batch.refresh_from_db()
    assert batch.platform == Platform.LOCAL


def test_a_batch_without_an_estimate_is_refused(
    make_batch: MakeBatch, prolific: FakeProlific, alice: Any
) -> None:
    batch = make_batch(clips=1)
    with pytest.raises(ValidationError, match="no estimated time per HIT"):
        batch_prolific_publish(batch=batch, by=alice)


def test_the_batch_requirements_become_prolific_filters(
    make_batch: MakeBatch, prolific: FakeProlific, alice: Any
) -> None:
    batch = _ready(make_batch(clips=1))
    batch_requirements_set(
        batch=batch,
        by=alice,
        qualifications=[],
        min_approval_percent=95,
        min_approved=1000,
        site_wide_record=True,
        locales=["GB", "US"],
    )
    batch_prolific_publish(batch=batch, by=alice)
    [body] = prolific.of("POST", "/studies/")
    assert body["filters"] == [
        {"filter_id": "approval_rate", "selected_range": {"lower": 95, "upper": 100}},
        {"filter_id": "approval_numbers", "selected_range": {"lower": 1000}},
        {"filter_id": "current-country-of-residence", "selected_values": ["0", "1"]},
        {  # the project's blocked participants (test_prolific_blocks.py)
            "filter_id": "participant_group_blocklist",
            "selected_values": [blocklist_group(project=batch.project, client=prolific_client())],
        },
    ]


def test_a_required_qualification_test_is_refused(
    make_batch: MakeBatch, prolific: FakeProlific, alice: Any
) -> None:
    batch = _ready(make_batch(clips=1))
    clips = make_clips(2)
    make_subset(batch.project, clips)
    test = qualification_create(
        project=batch.project,
        created_by=alice,
        name="Listening test",
        clip_ids=" ".join(str(c.pk) for c in clips),
    )
    batch_requirements_set(
        batch=batch, by=alice, qualifications=[test], min_approval_percent=0, min_approved=0
    )
    with pytest.raises(ValidationError, match="qualification tests \\(Listening test\\)"):
        batch_prolific_publish(batch=batch, by=alice)
    assert not prolific.of("POST", "/studies/")


def test_only_researchers_publish_on_prolific(
    make_batch: MakeBatch, prolific: FakeProlific, rey: Any
) -> None:
    with pytest.raises(PermissionDenied):
        batch_prolific_publish(batch=_ready(make_batch(clips=1)), by=rey)


def test_the_command_publishes_through_a_job(make_batch: MakeBatch, prolific: FakeProlific) -> None:
    batch = _ready(make_batch(clips=1))
    call_command("prolific_publish", batch.pk)
    assert prolific.studies[study_id(batch)]["status"] == "ACTIVE"


def test_the_registry_names_prolific(on_prolific: Batch) -> None:
    assert platform_get("prolific").label == "Prolific"
    with pytest.raises(ValueError, match="known: local, mturk, prolific"):
        platform_get("upwork")


def test_local_workers_are_not_offered_a_batch_on_prolific(on_prolific: Batch, ann: Any) -> None:
    assert hit_claim(worker=ann) is None


# Arrival ----------------------------------------------------------------------------------


def test_a_participant_prolific_confirms_gets_an_assignment(
    on_prolific: Batch, prolific: FakeProlific
) -> None:
    _, session, _ = _arrive(prolific, on_prolific, "PARTICIPANT1")
    assignment = _assignment(session)
    assert assignment.hit.batch == on_prolific
    assert assignment.worker.username == "prolific-PARTICIPANT1"
    ref = PlatformRef.objects.get(kind="assignment", external_id=session)
    assert ref.confirmed_at is not None  # Prolific named the participant for the session


def test_a_forged_participant_id_is_refused_and_nothing_written(
    on_prolific: Batch, prolific: FakeProlific
) -> None:
    session = prolific.start(study_id(on_prolific), "PARTICIPANT1")
    response = Client().get(_url(on_prolific, "FORGED1", session))
    assert response.status_code == 409
    assert "belongs to another participant" in response.content.decode()
    assert _nothing_made()


def test_a_made_up_session_is_refused_and_nothing_written(
    on_prolific: Batch, prolific: FakeProlific
) -> None:
    response = Client().get(_url(on_prolific, "PARTICIPANT1", "MADEUP0001"))
    assert response.status_code == 409
    assert "open the study from Prolific" in response.content.decode()
    assert _nothing_made()


def test_another_studys_id_is_refused(on_prolific: Batch, prolific: FakeProlific) -> None:
    session = prolific.start(study_id(on_prolific), "PARTICIPANT1")
    response = Client().get(_url(on_prolific, "PARTICIPANT1", session, study="OTHERSTUDY"))
    assert response.status_code == 409
    assert _nothing_made()


def test_prolific_out_of_reach_refuses_for_now(on_prolific: Batch, prolific: FakeProlific) -> None:
    session = prolific.start(study_id(on_prolific), "PARTICIPANT1")
    prolific.fail["/submissions/"] = 503
    response = Client().get(_url(on_prolific, "PARTICIPANT1", session))
    assert response.status_code == 503
    assert _nothing_made()


def test_too_many_requests_from_one_address_are_refused_without_asking_prolific(
    on_prolific: Batch, prolific: FakeProlific, settings: Any
) -> None:
    settings.PROLIFIC_PAGE_LIMIT_PER_ADDRESS = 2
    for n in range(2):
        Client().get(_url(on_prolific, "FORGED1", f"MADEUP000{n}"))
    asked = len(prolific.calls)
    session = prolific.start(study_id(on_prolific), "PARTICIPANT1")
    response = Client().get(_url(on_prolific, "PARTICIPANT1", session))
    assert response.status_code == 429
    assert len(prolific.calls) == asked
    assert _nothing_made()
    assert (
        Client(REMOTE_ADDR="192.0.2.7").get(_url(on_prolific, "PARTICIPANT1", session)).status_code
        == 200
    )


def test_a_reload_finds_the_same_assignment(on_prolific: Batch, prolific: FakeProlific) -> None:
    _, session, _ = _arrive(prolific, on_prolific, "PARTICIPANT1")
    again = Client().get(_url(on_prolific, "PARTICIPANT1", session))
    assert again.status_code == 200
    assert Assignment.objects.count() == 1


def test_a_blocked_participant_gets_no_new_place(
    on_prolific: Batch, prolific: FakeProlific, rey: Any
) -> None:
    _, session, _ = _arrive(prolific, on_prolific, "PARTICIPANT1")
    worker = _assignment(session).worker
    worker_block(project=on_prolific.project, worker=worker, by=rey, reason="Copies the hints.")
    other = prolific.start(study_id(on_prolific), "PARTICIPANT1")
    response = Client().get(_url(on_prolific, "PARTICIPANT1", other))
    assert response.status_code == 409
    assert "blocked" in response.content.decode()


# Submit and completion ----------------------------------------------------------------------


def test_a_submit_stores_the_captions_and_redirects_with_the_completion_code(
    on_prolific: Batch, prolific: FakeProlific
) -> None:
    client, session, token = _arrive(prolific, on_prolific, "PARTICIPANT1")
    response = _send(client, on_prolific, session, token)
    assert response.status_code == 302
    target = urlsplit(response["Location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == COMPLETE
    assert parse_qs(target.query) == {"cc": [completion_code(on_prolific)]}
    assert _assignment(session).state == Assignment.State.SUBMITTED
    assert Caption.objects.get().text == CAPTION


def test_the_submit_is_checked_with_prolific_again(
    on_prolific: Batch, prolific: FakeProlific
) -> None:
    client, session, token = _arrive(prolific, on_prolific, "PARTICIPANT1")
    prolific.give_back(session)  # returned on Prolific, the page still open here
    response = _send(client, on_prolific, session, token)
    assert response.status_code == 409
    assert "already returned on Prolific" in response.content.decode()
    assert not Caption.objects.exists()


def test_a_caption_breaking_the_rules_keeps_the_form(
    on_prolific: Batch, prolific: FakeProlific
) -> None:
    client, session, token = _arrive(prolific, on_prolific, "PARTICIPANT1")
    response = _send(client, on_prolific, session, token, text="dog")
    assert response.status_code == 400
    assert 'name="token"' in response.content.decode()
    assert not Caption.objects.exists()


def test_the_page_plays_its_clips_to_the_token_holder_only(
    on_prolific: Batch, prolific: FakeProlific, settings: Any, tmp_path: Path
) -> None:
    settings.MEDIA_ROOT = tmp_path
    client, session, token = _arrive(prolific, on_prolific, "PARTICIPANT1")
    hit_clip = _assignment(session).hit.hit_clips.get()
    hit_clip.clip.audio.save("clip.wav", ContentFile(wav_bytes()))
    url = f"/prolific/batches/{on_prolific.pk}/{hit_clip.clip_id}/audio"
    response = client.get(url, {"t": token})
    assert response.status_code == 200
    assert streamed(response) == wav_bytes()
    assert client.get(url).status_code == 404
    assert client.get(url, {"t": token[:-2]}).status_code == 404


@pytest.fixture
def clip_audio(
    on_prolific: Batch, prolific: FakeProlific, settings: Any, tmp_path: Path
) -> tuple[Client, str]:
    """The participant's page open, with the address of its clip's audio, not played yet."""
    settings.MEDIA_ROOT = tmp_path
    client, session, token = _arrive(prolific, on_prolific, "PARTICIPANT1")
    hit_clip = _assignment(session).hit.hit_clips.get()
    hit_clip.clip.audio.save("clip.wav", ContentFile(wav_bytes()))
    ClipAudioServed.objects.all().delete()  # _arrive records every clip as heard
    url = f"/prolific/batches/{on_prolific.pk}/{hit_clip.clip_id}/audio"
    return client, f"{url}?{urlencode({'t': token})}"


def test_the_pages_first_get_records_the_clip_served_whole(clip_audio: tuple[Client, str]) -> None:
    assert len(audio_get_served_writes(*clip_audio)) == 1
    assert ClipAudioServed.objects.get().whole_at is not None


def test_a_range_of_the_clip_records_only_its_bytes(clip_audio: tuple[Client, str]) -> None:
    """Heard to the end counts bytes here as on the HIT page: one range is not the clip."""
    assert audio_get_served_writes(*clip_audio, "bytes=0-99")
    served = ClipAudioServed.objects.get()
    assert (served.ranges, served.whole_at) == ([[0, 99]], None)


def test_a_replay_on_the_page_writes_no_served_record(clip_audio: tuple[Client, str]) -> None:
    audio_get_served_writes(*clip_audio)
    assert audio_get_served_writes(*clip_audio) == []


def test_a_range_inside_one_served_on_the_page_writes_nothing(
    clip_audio: tuple[Client, str],
) -> None:
    assert audio_get_served_writes(*clip_audio, "bytes=0-99")
    assert audio_get_served_writes(*clip_audio, "bytes=10-50") == []
    assert ClipAudioServed.objects.get().ranges == [[0, 99]]


# The periodic job -------------------------------------------------------------------------


def _submitted(prolific: FakeProlific, batch: Batch, pid: str) -> Assignment:
    client, session, token = _arrive(prolific, batch, pid)
    assert _send(client, batch, session, token).status_code == 302
    prolific.complete(session, completion_code(batch))  # back on Prolific with the code
    return _assignment(session)


def _session(assignment: Assignment) -> str:
    return PlatformRef.objects.get(kind="assignment", local_id=assignment.pk).external_id


def test_approvals_and_rejections_go_to_prolific_once(
    on_prolific: Batch, prolific: FakeProlific, rey: Any
) -> None:
    good = _submitted(prolific, on_prolific, "PARTICIPANT1")
    bad = _submitted(prolific, on_prolific, "PARTICIPANT2")
    review_approve(assignment=good, reviewer=rey)
    review_reject(assignment=bad, reviewer=rey, reason=RejectReason.WRONG_TENSE)
    assert prolific_sync()["decisions_sent"] == 2
    assert prolific.submissions[_session(good)]["status"] == "APPROVED"
    rejected = prolific.submissions[_session(bad)]
    assert (rejected["status"], rejected["rejection_category"]) == (
        "REJECTED",
        "FAILED_INSTRUCTIONS",
    )
    [reject] = [
        b for b in prolific.of("POST", "/submissions/.+/transition/") if b["action"] == "REJECT"
    ]
    assert len(reject["message"]) >= 100
    assert prolific_sync()["decisions_sent"] == 0


def test_a_decision_waits_until_the_participant_completes_there(
    on_prolific: Batch, prolific: FakeProlific, rey: Any
) -> None:
    client, session, token = _arrive(prolific, on_prolific, "PARTICIPANT1")
    _send(client, on_prolific, session, token)
    review_approve(assignment=_assignment(session), reviewer=rey)
    assert prolific_sync()["decisions_waiting"] == 1
    prolific.complete(session, completion_code(on_prolific))
    assert prolific_sync()["decisions_sent"] == 1


def test_bonuses_are_paid_through_prolific_once(
    on_prolific: Batch, prolific: FakeProlific, rey: Any
) -> None:
    assignment = _submitted(prolific, on_prolific, "PARTICIPANT1")
    review_approve(assignment=assignment, reviewer=rey)
    bonus_pay(
        project=on_prolific.project,
        worker=assignment.worker,
        by=rey,
        amount_cents=50,
        reason="Vivid captions.",
        idempotency_key="bonus-1",
        assignment=assignment,
    )
    assert prolific_sync()["bonuses_paid"] == 1
    [set_up] = prolific.bonuses.values()
    assert (set_up["rows"], set_up["amount"]) == ([["PARTICIPANT1", "0.50"]], 50)
    assert prolific.paid == [set_up["id"]]
    assert prolific_sync()["bonuses_paid"] == 0


def test_a_bonus_whose_payment_failed_pays_the_same_set_up_later(
    on_prolific: Batch, prolific: FakeProlific, rey: Any
) -> None:
    assignment = _submitted(prolific, on_prolific, "PARTICIPANT1")
    review_approve(assignment=assignment, reviewer=rey)
    bonus_pay(
        project=on_prolific.project,
        worker=assignment.worker,
        by=rey,
        amount_cents=50,
        reason="Vivid captions.",
        idempotency_key="bonus-1",
        assignment=assignment,
    )
    prolific.fail["/bulk-bonus-payments/"] = 500
    assert prolific_sync()["bonuses_refused"] == 1
    del prolific.fail["/bulk-bonus-payments/"]
    assert prolific_sync()["bonuses_paid"] == 1
    assert len(prolific.bonuses) == 1  # set up once, paid once
    assert len(prolific.paid) == 1


def test_a_refused_bonus_payment_is_shown_on_the_ledger_page_until_paid(
    on_prolific: Batch, prolific: FakeProlific, rey: Any, alice: Any
) -> None:
    assignment = _submitted(prolific, on_prolific, "PARTICIPANT1")
    review_approve(assignment=assignment, reviewer=rey)
    bonus_pay(
        project=on_prolific.project,
        worker=assignment.worker,
        by=rey,
        amount_cents=50,
        reason="Vivid captions.",
        idempotency_key="bonus-1",
        assignment=assignment,
    )
    ledger = reverse("ledger", args=[on_prolific.project.slug])
    prolific.fail["/bulk-bonus-payments/"] = 500
    prolific_sync()
    html = login(alice).get(ledger).content.decode()
    assert 'data-testid="bonus-unpaid-there"' in html
    assert "Prolific answered 500" in html
    del prolific.fail["/bulk-bonus-payments/"]
    prolific_sync()
    html = login(alice).get(ledger).content.decode()
    assert 'data-testid="bonus-paid-there"' in html
    assert "Prolific answered 500" not in html


@pytest.mark.parametrize("gone", ["give_back", "time_out"])
def test_a_place_given_up_there_frees_its_slot(
    on_prolific: Batch, prolific: FakeProlific, gone: str
) -> None:
    _, session, _ = _arrive(prolific, on_prolific, "PARTICIPANT1")
    hit = _assignment(session).hit
    getattr(prolific, gone)(session)
    assert prolific_sync()["returns_released"] == 1
    hit.refresh_from_db()
    assert hit.taken == 0
    assert _assignment(session).state in (Assignment.State.RETURNED, Assignment.State.ABANDONED)


def test_the_sync_does_nothing_without_a_study(prolific: FakeProlific, db: None) -> None:
    assert prolific_sync() == {}
    assert not prolific.calls


# prolific_check -----------------------------------------------------------------------------


def test_the_check_passes_with_a_good_token_and_workspace(prolific: FakeProlific, db: None) -> None:
    call_command("prolific_check")
    assert [path for _, path, _ in prolific.calls] == ["/users/me/", f"/workspaces/{WORKSPACE}/"]


def test_the_check_names_a_refused_token(prolific: FakeProlific, settings: Any) -> None:
    settings.PROLIFIC_TOKEN = "wrong"
    with pytest.raises(CommandError, match="Prolific refused the token"):
        call_command("prolific_check")


def test_the_check_names_an_unknown_workspace(prolific: FakeProlific, settings: Any) -> None:
    settings.PROLIFIC_WORKSPACE_ID = "NOSUCHWORKSPACE"
    assert prolific_check(echo=lambda _: None) == [
        "Workspace NOSUCHWORKSPACE is not reachable: Prolific answered 404 to GET "
        'workspaces/NOSUCHWORKSPACE/: {"error": {"detail": "Not found."}}'
    ]


def test_the_check_without_a_token_says_so(settings: Any) -> None:
    settings.PROLIFIC_TOKEN = ""
    settings.PROLIFIC_EXTERNAL_URL = SITE
    assert prolific_check(echo=lambda _: None) == [
        "Set PROLIFIC_TOKEN to a Prolific API token first."
    ]


# One ledger, reconciled -----------------------------------------------------------------


def test_the_ledger_says_prolific_paid_in_its_currency(
    on_prolific: Batch, prolific: FakeProlific, rey: Any
) -> None:
    review_approve(assignment=_submitted(prolific, on_prolific, "PARTICIPANT1"), reviewer=rey)
    entry = LedgerEntry.objects.get()
    assert (entry.platform, entry.currency, entry.amount_cents) == ("prolific", "GBP", 100)


def test_a_submission_prolific_approved_without_a_reward_here_is_listed(
    on_prolific: Batch, prolific: FakeProlific, alice: Any
) -> None:
    assignment = _submitted(prolific, on_prolific, "PARTICIPANT1")
    prolific.submissions[_session(assignment)]["status"] = "APPROVED"  # approved there only
    assert prolific_sync()["money_discrepancies"] == 1
    [found] = LedgerDiscrepancy.objects.all()
    assert "approved (paid) on Prolific, with no reward in the ledger" in found.problem
    page = login(alice).get(reverse("ledger", args=[on_prolific.project.slug]))
    assert "approved (paid) on Prolific" in page.content.decode()


def test_a_bonus_prolific_did_not_pay_is_listed_until_paid(
    on_prolific: Batch, prolific: FakeProlific, rey: Any
) -> None:
    assignment = _submitted(prolific, on_prolific, "PARTICIPANT1")
    review_approve(assignment=assignment, reviewer=rey)
    bonus_pay(
        project=on_prolific.project,
        worker=assignment.worker,
        by=rey,
        amount_cents=50,
        reason="Vivid captions.",
        idempotency_key="bonus-1",
        assignment=assignment,
    )
    prolific.fail["/bulk-bonus-payments/"] = 500
    assert prolific_sync()["money_discrepancies"] == 1
    assert "not paid on Prolific" in LedgerDiscrepancy.objects.get().problem
    del prolific.fail["/bulk-bonus-payments/"]
    assert prolific_sync()["money_discrepancies"] == 0
    assert not LedgerDiscrepancy.objects.exists()


def test_a_study_prolific_does_not_list_keeps_its_discrepancies(
    on_prolific: Batch, prolific: FakeProlific
) -> None:
    assignment = _submitted(prolific, on_prolific, "PARTICIPANT1")
    prolific.submissions[_session(assignment)]["status"] = "APPROVED"
    prolific_sync()
    prolific.fail[f"/studies/{study_id(on_prolific)}/submissions/"] = 503
    assert prolific_sync()["money_failed"] == 1
    assert LedgerDiscrepancy.objects.count() == 1


# End to end ----------------------------------------------------------------------------------


def test_a_study_from_publishing_to_a_clean_reconciliation(
    make_batch: MakeBatch, prolific: FakeProlific, alice: Any, rey: Any
) -> None:
    batch = _ready(make_batch(clips=2, captions_per_clip=1))  # two places
    batch_prolific_publish(batch=batch, by=alice)
    batch.refresh_from_db()
    study = study_id(batch)
    # participants arrive; one claims another's session and is refused, nothing written
    first_client, first, first_token = _arrive(prolific, batch, "PARTICIPANT1")
    second_client, second, second_token = _arrive(prolific, batch, "PARTICIPANT2")
    forged = Client().get(_url(batch, "FORGED1", first))
    assert forged.status_code == 409
    assert not get_user_model().objects.filter(username__startswith="prolific-FORGED").exists()
    # they submit, and go back to Prolific with the completion code
    for client, session, token in (
        (first_client, first, first_token),
        (second_client, second, second_token),
    ):
        response = _send(client, batch, session, token)
        assert response["Location"] == f"{COMPLETE}?cc={completion_code(batch)}"
        prolific.complete(session, parse_qs(urlsplit(response["Location"]).query)["cc"][0])
    # review: one approved with a bonus, one rejected
    good, bad = _assignment(first), _assignment(second)
    review_approve(assignment=good, reviewer=rey)
    review_reject(assignment=bad, reviewer=rey, reason=RejectReason.OFF_TOPIC)
    bonus_pay(
        project=batch.project,
        worker=good.worker,
        by=rey,
        amount_cents=25,
        reason="Vivid captions.",
        idempotency_key="e2e-bonus",
        assignment=good,
    )
    result = prolific_sync()
    assert result["decisions_sent"] == 2
    assert result["bonuses_paid"] == 1
    assert result["money_discrepancies"] == 0
    assert prolific.submissions[first]["status"] == "APPROVED"
    assert prolific.submissions[second]["rejection_category"] == "LOW_EFFORT"
    [set_up] = prolific.bonuses.values()
    assert (set_up["study"], set_up["rows"]) == (study, [["PARTICIPANT1", "0.25"]])
    assert prolific.paid == [set_up["id"]]
    # the ledger: Prolific's reward and bonus in pounds, and nothing differs there
    paid = LedgerEntry.objects.filter(platform="prolific", currency="GBP")
    assert sorted(paid.values_list("kind", "amount_cents")) == [("bonus", 25), ("reward", 100)]
    page = login(alice).get(reverse("ledger", args=[batch.project.slug]))
    assert 'data-testid="no-discrepancies"' in page.content.decode()
    assert prolific_sync()["decisions_sent"] == 0  # nothing sent twice
