"""The ledger: rewards booked with approvals, bonuses paid once per idempotency key,
totals per worker and per batch, and the CSV export."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from annotation.models import Batch
from core.models import Project
from crowd.models import LedgerEntry
from crowd.services import bonus_pay, ledger_csv, ledger_totals, review_approve
from tests.conftest import login
from tests.crowd.conftest import MakeBatch, Submit


def _bonus(
    batch: Batch,
    worker: Any,
    by: Any,
    cents: int,
    key: str = "k",
    /,  # so that `paid_for` may name another batch
    *,
    reason: str = "Great detail.",
    **paid_for: Any,
) -> tuple[LedgerEntry, bool]:
    """A bonus in the batch's project, for what `paid_for` names (the batch when it is empty)."""
    return bonus_pay(
        project=batch.project,
        worker=worker,
        by=by,
        amount_cents=cents,
        reason=reason,
        idempotency_key=key,
        **(paid_for or {"batch": batch}),
    )


def test_it_pays_a_bonus_once_per_key(batch: Batch, ann: Any, rey: Any) -> None:
    first, created = _bonus(batch, ann, rey, 50, "k-1")
    again, created_again = _bonus(batch, ann, rey, 50, "k-1")
    assert created
    assert not created_again
    assert again == first
    assert LedgerEntry.objects.filter(kind="bonus").count() == 1


def test_it_refuses_a_key_reused_for_another_bonus(batch: Batch, ann: Any, rey: Any) -> None:
    _bonus(batch, ann, rey, 50, "k-1")
    with pytest.raises(ValidationError, match="already used for another bonus"):
        _bonus(batch, ann, rey, 500, "k-1")
    assert LedgerEntry.objects.get().amount_cents == 50


@pytest.mark.parametrize(
    ("amount", "reason", "key", "field"),
    [
        (0, "r", "k", "amount_cents"),
        (10_001, "r", "k", "amount_cents"),
        (5, " ", "k", "reason"),
        (5, "r", "", "idempotency_key"),
    ],
)
def test_it_checks_a_bonus(
    batch: Batch, ann: Any, rey: Any, amount: int, reason: str, key: str, field: str
) -> None:
    with pytest.raises(ValidationError) as info:
        _bonus(batch, ann, rey, amount, key, reason=reason)
    assert field in info.value.message_dict
    assert not LedgerEntry.objects.exists()


def test_it_ties_a_bonus_to_the_workers_own_assignment_only(
    batch: Batch, submit: Submit, ann: Any, abe: Any, rey: Any
) -> None:
    abes = submit(abe)
    with pytest.raises(ValidationError, match="not this worker's"):
        _bonus(batch, ann, rey, 5, assignment=abes)


@pytest.mark.parametrize("persona", ["ann", "rex", "olive"])
def test_it_lets_only_reviewers_of_the_project_pay(
    batch: Batch, abe: Any, request: pytest.FixtureRequest, persona: str
) -> None:
    with pytest.raises(PermissionDenied):
        _bonus(batch, abe, request.getfixturevalue(persona), 5)
    assert not LedgerEntry.objects.exists()


def test_it_totals_per_worker_and_per_batch(
    make_batch: MakeBatch, submit: Submit, ann: Any, abe: Any, rey: Any
) -> None:
    cheap = make_batch(name="Cheap", reward_cents=10, clips=2)
    dear = make_batch(name="Dear", reward_cents=30, clips=1)
    review_approve(assignment=submit(ann, batch=cheap), reviewer=rey)
    review_approve(assignment=submit(ann, batch=dear), reviewer=rey)
    review_approve(assignment=submit(abe, batch=cheap), reviewer=rey)
    _bonus(cheap, abe, rey, 5)

    totals = ledger_totals(project=cheap.project)

    per_worker = {r["worker__username"]: (r["rewards"], r["bonuses"]) for r in totals["per_worker"]}
    per_batch = {r["batch__name"]: r["total"] for r in totals["per_batch"]}
    assert per_worker == {"ann": (40, 0), "abe": (10, 5)}
    assert per_batch == {"Cheap": 25, "Dear": 30}
    assert totals["by_currency"] == {"USD": 55}


def test_it_never_adds_amounts_across_currencies(
    make_batch: MakeBatch, submit: Submit, ann: Any, abe: Any, rey: Any, alice: Any
) -> None:
    batch = make_batch(name="Cheap", reward_cents=10, clips=2)
    review_approve(assignment=submit(ann, batch=batch), reviewer=rey)
    review_approve(assignment=submit(abe, batch=batch), reviewer=rey)
    # as if abe's reward came from a batch on Prolific, paid in pounds
    LedgerEntry.objects.filter(worker=abe).update(platform="prolific", currency="GBP")

    totals = ledger_totals(project=batch.project)
    page = login(alice).get(reverse("ledger", args=[batch.project.slug])).content.decode()

    assert totals["by_currency"] == {"GBP": 10, "USD": 10}
    assert {(r["worker__username"], r["currency"]) for r in totals["per_worker"]} == {
        ("ann", "USD"),
        ("abe", "GBP"),
    }
    assert [(r["batch__name"], r["currency"], r["total"]) for r in totals["per_batch"]] == [
        ("Cheap", "GBP", 10),
        ("Cheap", "USD", 10),
    ]
    assert "£0.10" in page
    assert "$0.10" in page
    assert "$0.20" not in page


def test_it_exports_the_ledger_as_csv(
    batch: Batch, submit: Submit, ann: Any, rey: Any, alice: Any
) -> None:
    assignment = review_approve(assignment=submit(ann), reviewer=rey)
    _bonus(batch, ann, rey, 125, reason='=HYPERLINK("http://evil")')
    rows = list(csv.reader(io.StringIO("".join(ledger_csv(project=batch.project, user=alice)))))
    assert rows[0] == [
        "date",
        "kind",
        "worker",
        "batch_id",
        "batch",
        "assignment_id",
        "amount",
        "reason",
        "paid_by",
        "currency",
        "platform",
    ]
    assert rows[1][1:8] == [
        "reward",
        "ann",
        str(batch.pk),
        batch.name,
        str(assignment.pk),
        "0.10",
        "",
    ]
    assert rows[1][-2:] == ["USD", "local"]  # a local batch's reward, in dollars as ever
    # a formula in a reason is written as text, not run by the spreadsheet
    bonus = ["bonus", "ann", str(batch.pk), batch.name, "", "1.25"]
    assert rows[2][1:] == [*bonus, '\'=HYPERLINK("http://evil")', "rey", "USD", "local"]


@pytest.mark.parametrize("persona", ["rey", "ann", "olive"])
def test_it_exports_the_ledger_to_researchers_only(
    batch: Batch, request: pytest.FixtureRequest, persona: str
) -> None:
    with pytest.raises(PermissionDenied):
        list(ledger_csv(project=batch.project, user=request.getfixturevalue(persona)))


# The batch's bonus cap ---------------------------------------------------------------


def test_bonuses_stop_at_the_batchs_cap(batch: Batch, ann: Any, abe: Any, rey: Any) -> None:
    Batch.objects.filter(pk=batch.pk).update(bonus_cap_cents=300)
    batch.refresh_from_db()
    _bonus(batch, ann, rey, 200, "k-1")
    with pytest.raises(ValidationError) as info:
        _bonus(batch, abe, rey, 150, "k-2")
    message = " ".join(info.value.message_dict["amount_cents"])
    assert "caps bonuses at $3.00 in all; $2.00 is paid already, so at most $1.00 more" in message
    _bonus(batch, abe, rey, 100, "k-3")  # exactly up to the cap
    assert LedgerEntry.objects.filter(kind="bonus").count() == 2


def test_a_repeated_request_at_the_cap_returns_the_bonus_it_paid(
    batch: Batch, ann: Any, rey: Any
) -> None:
    Batch.objects.filter(pk=batch.pk).update(bonus_cap_cents=200)
    first, _ = _bonus(batch, ann, rey, 200, "k-1")
    again, created = _bonus(batch, ann, rey, 200, "k-1")
    assert (again, created) == (first, False)


def test_each_batch_has_its_own_cap(make_batch: MakeBatch, ann: Any, rey: Any) -> None:
    small = make_batch(name="Small", clips=1)
    other = make_batch(name="Other", clips=1)
    Batch.objects.filter(pk=small.pk).update(bonus_cap_cents=100)
    small.refresh_from_db()
    _bonus(small, ann, rey, 100, "k-1")
    _bonus(other, ann, rey, 100, "k-2")
    with pytest.raises(ValidationError, match="caps bonuses"):
        _bonus(small, ann, rey, 1, "k-3")


def test_a_bonus_names_its_batch(batch: Batch, ann: Any, rey: Any) -> None:
    with pytest.raises(ValidationError) as info:
        bonus_pay(
            project=batch.project,
            worker=ann,
            by=rey,
            amount_cents=5,
            reason="r",
            idempotency_key="k",
        )
    assert "each batch caps its bonuses" in info.value.message_dict["batch"][0]


def test_a_bonus_for_another_projects_batch_is_refused(
    batch: Batch, ann: Any, rey: Any, olive: Any
) -> None:
    birds = Batch(project=Project.objects.get(slug="birds"), name="Birds")
    with pytest.raises(ValidationError, match="is not in"):
        _bonus(batch, ann, rey, 5, batch=birds)


def test_a_bonus_for_an_assignment_counts_against_its_batch(
    batch: Batch, submit: Submit, ann: Any, rey: Any
) -> None:
    Batch.objects.filter(pk=batch.pk).update(bonus_cap_cents=10)
    assignment = submit(ann)
    with pytest.raises(ValidationError, match="caps bonuses"):
        _bonus(batch, ann, rey, 11, assignment=assignment)
