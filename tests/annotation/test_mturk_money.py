"""MTurk money against the fake MTurk: the ledger's bonuses paid with SendBonus, and the
reconciliation of the ledger and the assignments' states with MTurk's own records."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.urls import reverse

from annotation.models import Assignment, Batch, PlatformRef
from annotation.platforms import platform_get
from annotation.platforms.mturk import mturk_reviews_send
from annotation.platforms.mturk.bonuses import bonus_reason, bonus_token, mturk_bonuses_send
from annotation.platforms.mturk.reconcile import mturk_reconcile
from crowd.models import LedgerDiscrepancy, LedgerEntry, RejectReason
from crowd.services import bonus_pay, review_approve, review_reject
from tests.annotation.mturk_fake import FakeMTurk
from tests.annotation.test_mturk import _hit, _submitted
from tests.conftest import login


def _bonus(
    assignment: Assignment, by: Any, *, key: str = "bonus-1", cents: int = 25
) -> LedgerEntry:
    entry, _ = bonus_pay(
        project=assignment.hit.batch.project,
        worker=assignment.worker,
        by=by,
        amount_cents=cents,
        reason="Clear, careful captions",
        idempotency_key=key,
        batch=assignment.hit.batch,
        assignment=assignment if key == "bonus-1" else None,
    )
    return entry


def _payment(entry: LedgerEntry) -> PlatformRef:
    return PlatformRef.objects.get(platform="mturk", kind="payment", local_id=entry.pk)


@pytest.fixture
def approved(on_mturk: Batch, mturk: FakeMTurk, rey: Any) -> Assignment:
    """AWORKER1's assignment, approved here and on MTurk."""
    assignment = _submitted(mturk, _hit(on_mturk), "ASSIGN0001", "AWORKER1")
    review_approve(assignment=assignment, reviewer=rey)
    assert mturk_reviews_send()["sent"] == 1
    return assignment


# Bonuses ------------------------------------------------------------------------------------


def test_a_bonus_is_sent_with_sendbonus_once(
    approved: Assignment, mturk: FakeMTurk, rey: Any
) -> None:
    entry = _bonus(approved, rey)
    assert mturk_bonuses_send() == {"paid": 1, "refused": 0}
    [sent] = mturk.of("SendBonus")
    assert sent == {
        "WorkerId": "AWORKER1",
        "BonusAmount": "0.25",
        "AssignmentId": "ASSIGN0001",
        "Reason": f"Clear, careful captions (Earmark bonus #{entry.pk})",
        "UniqueRequestToken": bonus_token(entry),
    }
    assert len(sent["UniqueRequestToken"]) <= 64
    ref = _payment(entry)
    assert (ref.external_id, ref.last_error) == (bonus_token(entry), "")
    assert ref.reported_at is not None
    assert mturk_bonuses_send() == {"paid": 0, "refused": 0}
    assert len(mturk.of("SendBonus")) == 1


def test_a_refused_bonus_is_shown_and_paid_by_a_later_run(
    approved: Assignment, mturk: FakeMTurk, rey: Any, alice: Any
) -> None:
    entry = _bonus(approved, rey)
    mturk.refuse_after["SendBonus"] = 0
    assert mturk_bonuses_send() == {"paid": 0, "refused": 1}
    assert "SendBonus refused" in _payment(entry).last_error
    page = login(alice).get(reverse("ledger", args=[approved.hit.batch.project.slug]))
    html = page.content.decode()
    assert 'data-testid="bonus-unpaid-there"' in html
    assert "SendBonus refused" in html
    del mturk.refuse_after["SendBonus"]
    assert platform_get("mturk").sync()["bonuses_send_paid"] == 1
    assert _payment(entry).last_error == ""
    page = login(alice).get(reverse("ledger", args=[approved.hit.batch.project.slug]))
    assert 'data-testid="bonus-paid-there"' in page.content.decode()
    assert len(mturk.bonuses) == 1


def test_a_bonus_whose_answer_was_lost_is_not_paid_again(
    approved: Assignment, mturk: FakeMTurk, rey: Any
) -> None:
    entry = _bonus(approved, rey)
    # a run sent it and died before writing down MTurk's answer; its token has expired
    PlatformRef.objects.create(
        platform="mturk", kind="payment", local_id=entry.pk, external_id=bonus_token(entry)
    )
    mturk.pay_bonus("ASSIGN0001", "0.25", bonus_reason(entry))
    assert mturk_bonuses_send() == {"paid": 1, "refused": 0}
    assert not mturk.of("SendBonus")
    assert len(mturk.bonuses) == 1


def test_a_bonus_for_the_batch_goes_on_the_workers_confirmed_assignment(
    approved: Assignment, mturk: FakeMTurk, rey: Any
) -> None:
    _bonus(approved, rey, key="bonus-for-the-batch")
    assert mturk_bonuses_send()["paid"] == 1
    assert mturk.of("SendBonus")[0]["AssignmentId"] == "ASSIGN0001"


def test_a_bonus_in_another_currency_is_refused_not_converted(
    approved: Assignment, mturk: FakeMTurk, rey: Any
) -> None:
    entry = _bonus(approved, rey)
    LedgerEntry.objects.filter(pk=entry.pk).update(currency="GBP")
    assert mturk_bonuses_send() == {"paid": 0, "refused": 1}
    assert "MTurk pays US dollars; this bonus is in GBP" in _payment(entry).last_error
    assert not mturk.of("SendBonus")


# Reconciliation -----------------------------------------------------------------------------


@pytest.fixture
def paid(approved: Assignment, rey: Any) -> LedgerEntry:
    """A clean state: the assignment approved and its bonus paid, here and on MTurk."""
    entry = _bonus(approved, rey)
    assert mturk_bonuses_send()["paid"] == 1
    return entry


def test_a_clean_reconciliation_records_nothing(
    paid: LedgerEntry, mturk: FakeMTurk, alice: Any
) -> None:
    assert mturk_reconcile() == {"discrepancies": 0, "failed": 0}
    assert not LedgerDiscrepancy.objects.exists()
    assert mturk.of("ListAssignmentsForHIT")
    assert mturk.of("ListBonusPayments")
    page = login(alice).get(reverse("ledger", args=[paid.project.slug]))
    assert 'data-testid="no-discrepancies"' in page.content.decode()


def _listed(mturk: FakeMTurk, assignment_id: str, **changes: Any) -> None:
    for name, value in changes.items():
        setattr(mturk.assignments[assignment_id], name, value)


def _unknown_assignment(mturk: FakeMTurk, entry: LedgerEntry) -> None:
    hit_id = mturk.assignments["ASSIGN0001"].hit_id
    mturk.accept(hit_id, "ASSIGN0099", "ASTRANGER")  # never opened our page
    mturk.submit("ASSIGN0099")
    mturk.set_status("ASSIGN0099", "Approved")


def _paid_twice(mturk: FakeMTurk, entry: LedgerEntry) -> None:
    mturk.bonuses.append(dict(mturk.bonuses[0]))


BREAKS: dict[str, tuple[Callable[[FakeMTurk, LedgerEntry], None], str]] = {
    "rejected there": (
        lambda m, e: _listed(m, "ASSIGN0001", status="Rejected"),
        "approved here with its reward in the ledger but rejected on MTurk",
    ),
    "still submitted there": (
        lambda m, e: _listed(m, "ASSIGN0001", status="Submitted"),
        "is approved here and that was sent, but it is submitted on MTurk",
    ),
    "another worker's there": (
        lambda m, e: _listed(m, "ASSIGN0001", worker_id="AOTHER"),
        "is worker AWORKER1's here but worker AOTHER's on MTurk",
    ),
    "gone there": (
        lambda m, e: m.give_back("ASSIGN0001"),
        "was submitted on MTurk, but MTurk no longer lists it",
    ),
    "unknown here": (
        _unknown_assignment,
        "ASSIGN0099 on HIT",
    ),
    "bonus not in the ledger": (
        lambda m, e: m.pay_bonus("ASSIGN0001", "1.00", "A thank-you"),
        "a bonus of 1.00 USD to worker AWORKER1 on assignment ASSIGN0001 was paid on MTurk",
    ),
    "bonus paid twice": (_paid_twice, "was paid 2 times on MTurk"),
    "bonus of another amount": (
        lambda m, e: m.bonuses[0].update(BonusAmount="0.50"),
        "was paid as 0.50 USD on MTurk",
    ),
    "bonus lost there": (
        lambda m, e: m.bonuses.clear(),
        "was sent to MTurk, but MTurk does not list it",
    ),
}


@pytest.mark.parametrize("kind", list(BREAKS))
def test_each_difference_is_recorded_once(
    kind: str, paid: LedgerEntry, mturk: FakeMTurk, alice: Any
) -> None:
    breaks, wording = BREAKS[kind]
    breaks(mturk, paid)
    assert mturk_reconcile() == {"discrepancies": 1, "failed": 0}
    [found] = LedgerDiscrepancy.objects.all()
    assert (found.platform, found.project_id) == ("mturk", paid.project_id)
    assert wording in found.problem
    assert mturk_reconcile() == {"discrepancies": 1, "failed": 0}  # again: the same row
    assert list(LedgerDiscrepancy.objects.values_list("pk", "found_at")) == [
        (found.pk, found.found_at)
    ]
    page = login(alice).get(reverse("ledger", args=[paid.project.slug]))
    assert wording in page.content.decode().replace("&#x27;", "'")


def test_a_bonus_not_paid_yet_is_a_difference_until_it_is_paid(
    approved: Assignment, mturk: FakeMTurk, rey: Any
) -> None:
    entry = _bonus(approved, rey)
    mturk.refuse_after["SendBonus"] = 0
    result = platform_get("mturk").sync()
    assert (result["bonuses_send_refused"], result["reconcile_discrepancies"]) == (1, 1)
    [found] = LedgerDiscrepancy.objects.all()
    assert (found.entry_id, found.assignment_id) == (entry.pk, approved.pk)
    assert "not paid on MTurk yet" in found.problem
    del mturk.refuse_after["SendBonus"]
    assert platform_get("mturk").sync()["reconcile_discrepancies"] == 0
    assert not LedgerDiscrepancy.objects.exists()


def test_a_decision_mturk_took_otherwise_is_listed_once(
    on_mturk: Batch, mturk: FakeMTurk, rey: Any, alice: Any
) -> None:
    assignment = _submitted(mturk, _hit(on_mturk), "ASSIGN0001", "AWORKER1")
    review_reject(assignment=assignment, reviewer=rey, reason=RejectReason.OFF_TOPIC)
    mturk.set_status("ASSIGN0001", "Approved")  # MTurk's auto-approval paid it first
    for _ in range(2):
        platform_get("mturk").sync()
    [found] = LedgerDiscrepancy.objects.all()
    assert (found.platform, found.assignment_id) == ("mturk", assignment.pk)
    assert "rejected here but approved on MTurk" in found.problem
    page = login(alice).get(reverse("ledger", args=[on_mturk.project.slug]))
    assert "MTurk paid its reward" in page.content.decode()


def test_a_hit_mturk_does_not_list_keeps_its_projects_discrepancies(
    paid: LedgerEntry, mturk: FakeMTurk
) -> None:
    _listed(mturk, "ASSIGN0001", status="Rejected")
    assert mturk_reconcile()["discrepancies"] == 1
    _listed(mturk, "ASSIGN0001", status="Approved")  # fixed there, but MTurk cannot say so now
    mturk.refuse_after["ListAssignmentsForHIT"] = 0
    assert mturk_reconcile() == {"discrepancies": 0, "failed": 1}
    assert LedgerDiscrepancy.objects.count() == 1
    del mturk.refuse_after["ListAssignmentsForHIT"]
    assert mturk_reconcile() == {"discrepancies": 0, "failed": 0}
    assert not LedgerDiscrepancy.objects.exists()
