from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

from django import forms

from annotation.models import Batch, ClipReport
from annotation.presets import BATCH_PRESETS, BatchPreset
from annotation.services import (
    MAX_AUTO_APPROVE_DELAY,
    MAX_CAPTIONS_PER_CLIP,
    MAX_CLIPS_PER_HIT,
    MAX_LIFETIME,
    MAX_REWARD_CENTS,
    MAX_TIME_ALLOTTED,
    MAX_WORDS,
)
from core.models import Project
from crowd.models import Qualification
from crowd.records import Requirements
from curation.models import Split, Subset


class PresetForm(forms.Form):
    """The batch form's "fill in from a preset" choice (a GET: it fills, never publishes)."""

    preset = forms.ChoiceField(
        choices=[(name, preset.label) for name, preset in BATCH_PRESETS.items()],
        label="Preset",
    )


class BatchForm(forms.Form):
    name = forms.CharField(max_length=200)
    subset = forms.ModelChoiceField(queryset=Subset.objects.none(), to_field_name="slug")
    split = forms.ChoiceField(choices=Split.choices, initial=Split.VAL)
    captions_per_clip = forms.IntegerField(
        min_value=1,
        max_value=MAX_CAPTIONS_PER_CLIP,
        required=False,
        help_text="Empty: what the subset's recipe asks (AudioCaps: 1 for train, 5 for val "
        "and test).",
    )
    clips_per_hit = forms.IntegerField(min_value=1, max_value=MAX_CLIPS_PER_HIT, initial=5)
    reward_cents_per_clip = forms.IntegerField(
        min_value=0,
        max_value=MAX_REWARD_CENTS,
        required=False,
        label="Reward per clip (cents)",
        help_text="With the reward per HIT empty, a HIT pays this for each of its clips.",
    )
    reward_cents = forms.IntegerField(
        min_value=0,
        max_value=MAX_REWARD_CENTS,
        required=False,
        initial=20,
        label="Reward per HIT (cents)",
        help_text="What a worker is paid per approved HIT. Empty: the reward per clip times "
        "the clips per HIT.",
    )
    time_allotted_minutes = forms.IntegerField(
        min_value=1, max_value=MAX_TIME_ALLOTTED // timedelta(minutes=1), initial=30
    )
    lifetime_hours = forms.IntegerField(
        min_value=1, max_value=MAX_LIFETIME // timedelta(hours=1), initial=7 * 24
    )
    estimated_minutes = forms.IntegerField(
        min_value=1,
        max_value=MAX_TIME_ALLOTTED // timedelta(minutes=1),
        required=False,
        label="Estimated minutes per HIT",
        help_text="How long one HIT takes a worker. Prolific pays by the hour and refuses a "
        "reward below its minimum hourly rate; empty: not estimated.",
    )
    auto_approve_days = forms.IntegerField(
        min_value=0, max_value=MAX_AUTO_APPROVE_DELAY.days, initial=3
    )
    min_words = forms.IntegerField(min_value=1, max_value=MAX_WORDS, initial=3)
    max_words = forms.IntegerField(min_value=1, max_value=MAX_WORDS, initial=40)
    bonus_cap_cents = forms.IntegerField(
        min_value=0,
        required=False,
        label="Bonus cap (cents)",
        help_text="The most paid in bonuses, all together, for this batch's work. "
        "Empty: 10000 ($100).",
    )
    # who may take the batch's HITs (crowd.BatchRequirements; also on the batch's
    # requirements page afterwards)
    min_approval_percent = forms.IntegerField(
        min_value=0,
        max_value=100,
        required=False,
        label="Minimum approval rate (%)",
        help_text="Empty: none. A worker with nothing reviewed yet counts as 100 %.",
    )
    min_approved = forms.IntegerField(
        min_value=0, required=False, label="Minimum approved HITs", help_text="Empty: none."
    )
    site_wide_record = forms.BooleanField(
        required=False,
        label="Count the worker's record in every project",
        help_text="Off: only reviews in this project count.",
    )
    locales = forms.CharField(
        required=False,
        max_length=1000,
        label="Worker countries",
        help_text="ISO 3166 codes separated by spaces or commas (AU CA GB NZ US): only "
        "workers who declared one of these countries may work. Empty: any country.",
    )
    qualifications = forms.ModelMultipleChoiceField(
        queryset=Qualification.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Qualification tests required",
    )

    def __init__(
        self, *args: Any, project: Project, preset: BatchPreset | None = None, **kwargs: Any
    ) -> None:
        """`preset` fills the fields it names (over any other initial value); each stays
        editable. Its rate is per clip, so it empties the reward per HIT, which then follows
        whatever clips per HIT the researcher publishes with."""
        super().__init__(*args, **kwargs)
        # self.fields holds copies of the fields declared above, typed only as Field
        subset = cast(forms.ModelChoiceField, self.fields["subset"])
        subset.queryset = Subset.objects.filter(project=project)
        qualifications = cast(forms.ModelMultipleChoiceField, self.fields["qualifications"])
        qualifications.queryset = Qualification.objects.filter(project=project)
        if preset is not None:
            filled = preset.fields()
            filled["locales"] = " ".join(filled["locales"])
            self.initial.update(filled, reward_cents=None)

    def publish_kwargs(self) -> dict[str, Any]:
        """The cleaned form as batch_publish arguments."""
        data = self.cleaned_data
        return {
            "name": data["name"],
            "subset": data["subset"],
            "split": data["split"],
            "captions_per_clip": data["captions_per_clip"],
            "clips_per_hit": data["clips_per_hit"],
            "reward_cents": data["reward_cents"],
            "reward_cents_per_clip": data["reward_cents_per_clip"],
            "time_allotted": timedelta(minutes=data["time_allotted_minutes"]),
            "lifetime": timedelta(hours=data["lifetime_hours"]),
            "auto_approve_delay": timedelta(days=data["auto_approve_days"]),
            "min_words": data["min_words"],
            "max_words": data["max_words"],
            "bonus_cap_cents": data["bonus_cap_cents"],
            "estimated_minutes": data["estimated_minutes"],
            "requirements": Requirements(
                qualifications=tuple(data["qualifications"]),
                min_approval_percent=data["min_approval_percent"] or 0,
                min_approved=data["min_approved"] or 0,
                site_wide_record=data["site_wide_record"],
                locales=tuple(data["locales"].replace(",", " ").split()),
            ),
        }


class BatchStateForm(forms.Form):
    state = forms.ChoiceField(choices=Batch.State.choices)


class ClipReportForm(forms.Form):
    clip = forms.IntegerField(min_value=1, widget=forms.HiddenInput)
    problem = forms.ChoiceField(choices=ClipReport.Problem.choices, widget=forms.RadioSelect)
    note = forms.CharField(
        required=False,
        max_length=ClipReport.NOTE_MAX_CHARS,
        widget=forms.TextInput(attrs={"placeholder": "optional: what is wrong"}),
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        # named as clip_report() takes them
        if "clip" in data:
            data["clip_id"] = data.pop("clip")
        return data
