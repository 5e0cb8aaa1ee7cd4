from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import template

from crowd.queries import blocks_of, requirements_refusals, worker_record
from crowd.services import qualifications_for

register = template.Library()


@register.filter
def dollars(cents: int | None) -> str:
    """1234 -> "$12.34"."""
    return money(cents, "USD")


# the currencies crowd platforms pay in (MTurk: USD; Prolific: GBP or USD); any other is
# written with its ISO code
CURRENCY_SIGNS = {"USD": "$", "GBP": "£", "EUR": "€"}


@register.filter
def money(cents: int | None, currency: str) -> str:
    """(1234, "GBP") -> "£12.34"; (1234, "CHF") -> "CHF 12.34"."""
    amount = f"{(cents or 0) / 100:,.2f}"
    sign = CURRENCY_SIGNS.get(currency)
    return f"{sign}{amount}" if sign else f"{currency} {amount}"


@register.inclusion_tag("crowd/_standing.html", takes_context=True)
def worker_standing(context: dict[str, Any]) -> dict[str, Any]:
    """The worker's blocks, qualifications still to take, batches whose requirements they
    miss (and why) and record, for the work page."""
    user = context["request"].user
    rows = qualifications_for(worker=user)
    return {
        "blocks": blocks_of(worker=user),
        "to_take": [r for r in rows if r["unlocks"] and not _passed(r)],
        "record": worker_record(worker=user),
        "refusals": requirements_refusals(worker=user),
    }


def _passed(row: dict[str, Any]) -> bool:
    attempt = row["attempt"]
    return attempt is not None and attempt.state == "approved"


@register.filter
def get_item(mapping: Mapping[Any, Any] | None, key: Any) -> Any:
    """mapping[key], or None: {{ paid_there|get_item:entry.pk }}."""
    return (mapping or {}).get(key)
