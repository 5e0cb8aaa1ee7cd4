from __future__ import annotations

from typing import Any, cast

from django import forms

from active.models import Presuggest, Strategy
from modeling.planning import model_choices


class BatchActiveForm(forms.Form):
    strategy = forms.ChoiceField(choices=Strategy.choices)
    presuggest = forms.ChoiceField(choices=Presuggest.choices, label="Pre-suggestion")
    seed = forms.IntegerField(min_value=0, max_value=2**31 - 1, required=False)


class ProjectActiveForm(forms.Form):
    model_name = forms.ChoiceField(label="Model")
    preset = forms.CharField(max_length=20, initial="small")
    overrides = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="key=value per line, as `train --set` (train.epochs=20)",
    )
    auto_retrain = forms.BooleanField(required=False, label="Retrain when the corpus grows")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # self.fields holds copies of the fields declared above, typed only as Field
        model_name = cast(forms.ChoiceField, self.fields["model_name"])
        model_name.choices = model_choices()

    def clean_overrides(self) -> list[str]:
        return [
            line.strip() for line in self.cleaned_data["overrides"].splitlines() if line.strip()
        ]
