from __future__ import annotations

import uuid
from typing import Any, cast

from django import forms
from django.db.models import QuerySet

from annotation.models import Batch
from core.models import Project
from crowd.models import Qualification, RejectReason
from crowd.services import MAX_BONUS_CENTS


class RejectForm(forms.Form):
    reason = forms.ChoiceField(choices=[("", "Reason…"), *RejectReason.choices])
    feedback = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Empty: the reason's standard feedback.",
    )


class FeedbackForm(forms.Form):
    feedback = forms.CharField(required=False, max_length=2000)


class BlockForm(forms.Form):
    reason = forms.CharField(max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))


class UnblockForm(forms.Form):
    reason = forms.CharField(required=False, max_length=2000)


class BonusForm(forms.Form):
    amount_cents = forms.IntegerField(min_value=1, max_value=MAX_BONUS_CENTS, label="Amount (¢)")
    batch = forms.ModelChoiceField(queryset=Batch.objects.none(), empty_label="For work in…")
    reason = forms.CharField(max_length=2000)
    idempotency_key = forms.CharField(max_length=64, widget=forms.HiddenInput)

    def __init__(self, *args: Any, batches: QuerySet[Batch], **kwargs: Any) -> None:
        """`batches`: those the worker worked in; a bonus counts against its batch's cap."""
        super().__init__(*args, **kwargs)
        # self.fields holds copies of the fields declared above, typed only as Field
        cast(forms.ModelChoiceField, self.fields["batch"]).queryset = batches
        # a fresh key per rendered form: sending the same form twice pays once
        self.fields["idempotency_key"].initial = uuid.uuid4().hex


class GradeForm(forms.Form):
    decision = forms.ChoiceField(
        choices=[("approve", "Pass"), ("reject", "Fail")], widget=forms.RadioSelect
    )
    feedback = forms.CharField(
        required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 3})
    )


class QualificationForm(forms.Form):
    name = forms.CharField(max_length=200)
    instructions = forms.CharField(
        required=False, max_length=5000, widget=forms.Textarea(attrs={"rows": 3})
    )
    clip_ids = forms.CharField(
        label="Clip ids",
        max_length=2000,
        help_text="Ids of the project's clips, separated by commas or spaces.",
    )
    min_words = forms.IntegerField(min_value=1, max_value=200, initial=3)
    max_words = forms.IntegerField(min_value=1, max_value=200, initial=40)


class RequirementsForm(forms.Form):
    qualifications = forms.ModelMultipleChoiceField(
        queryset=Qualification.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )
    min_approval_percent = forms.IntegerField(
        min_value=0, max_value=100, initial=0, label="Minimum approval rate (%)"
    )
    min_approved = forms.IntegerField(min_value=0, initial=0, label="Minimum approved assignments")
    site_wide_record = forms.BooleanField(
        required=False,
        label="Count the worker's record in every project",
        help_text="Off: only reviews in this project count, so other projects' reviewers "
        "cannot lock a worker out of this batch.",
    )
    locales = forms.CharField(
        required=False,
        max_length=1000,
        label="Worker countries",
        help_text="ISO 3166 codes separated by spaces or commas (AU CA GB NZ US): only "
        "workers who declared one of these countries may work. Empty: any country.",
    )

    def clean_locales(self) -> list[str]:
        return str(self.cleaned_data["locales"]).replace(",", " ").split()

    def __init__(self, *args: Any, project: Project, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        qualifications = cast(forms.ModelMultipleChoiceField, self.fields["qualifications"])
        qualifications.queryset = Qualification.objects.filter(project=project)
