"""Named batch presets: a set of batch fields and crowd requirements that the batch form
and the API fill in at once, each field staying editable.

"AudioCaps crowd" is the crowd of the AudioCaps paper (Kim et al., NAACL 2019): MTurk
workers with at least 95 % of their HITs approved and more than 1,000 approved, located in
Australia, Canada, the United Kingdom, New Zealand or the United States, paid 10 cents a
clip. Those figures are MTurk-wide records, so the preset asks for the worker's record in
every project (`site_wide_record`); a new local crowd has nobody with 1,001 approved HITs,
and a researcher trying the preset on one lowers the figures on the form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError


@dataclass(frozen=True)
class BatchPreset:
    label: str
    # A worker is paid per HIT: this times the batch's clips per HIT, whatever number the
    # researcher settles on (annotation.services.batch_publish), until a reward per HIT is
    # set by hand.
    reward_cents_per_clip: int
    min_approval_percent: int
    min_approved: int  # at least this many approved HITs (MTurk: "greater than" one less)
    site_wide_record: bool
    locales: tuple[str, ...]  # ISO 3166-1 alpha-2 codes

    def fields(self) -> dict[str, Any]:
        """The batch fields the preset fills, named as the form and the API name them."""
        return {
            "reward_cents_per_clip": self.reward_cents_per_clip,
            "min_approval_percent": self.min_approval_percent,
            "min_approved": self.min_approved,
            "site_wide_record": self.site_wide_record,
            "locales": list(self.locales),
        }


BATCH_PRESETS: dict[str, BatchPreset] = {
    "audiocaps-crowd": BatchPreset(
        label="AudioCaps crowd",
        reward_cents_per_clip=10,
        min_approval_percent=95,
        min_approved=1001,  # "more than 1,000 approved HITs"
        site_wide_record=True,
        locales=("AU", "CA", "GB", "NZ", "US"),
    ),
}


def batch_preset(name: str) -> BatchPreset:
    try:
        return BATCH_PRESETS[name]
    except KeyError:
        raise ValidationError(
            {"preset": f"Unknown preset {name!r}; use one of {', '.join(sorted(BATCH_PRESETS))}."}
        ) from None
