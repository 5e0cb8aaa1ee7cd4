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
    with_audio = forms.BooleanField(
        required=False,
        label="Include the audio",
        help_text="WAV files in Clotho's folders (Clotho CSV) or Hugging Face's audiofolder "
        "layout (the other formats), with a dataset card",
    )
    licence = forms.ChoiceField(
        choices=Snapshot.Licence.choices,
        initial=Snapshot.Licence.CC_BY_4,
        required=False,  # left out: the default, as the API's
        help_text="of the captions and metadata, written into the card",
    )

    def clean_licence(self) -> str:
        return str(self.cleaned_data["licence"] or Snapshot.Licence.CC_BY_4)
