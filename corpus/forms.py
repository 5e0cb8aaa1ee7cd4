from __future__ import annotations

from django import forms

from corpus.models import Snapshot
from curation.models import Split


class SnapshotForm(forms.Form):
    format = forms.ChoiceField(choices=Snapshot.Format.choices, initial=Snapshot.Format.AUDIOCAPS)
    text = forms.ChoiceField(choices=Snapshot.Text.choices, initial=Snapshot.Text.RAW)
    splits = forms.MultipleChoiceField(
        choices=Split.choices, initial=Split.values, widget=forms.CheckboxSelectMultiple
    )
