from __future__ import annotations

from typing import Any

from django import forms

from core.models import Project
from corpus.models import Snapshot
from corpus.services import snapshot_default_format
from curation.models import Split


class SnapshotForm(forms.Form):
    format = forms.ChoiceField(choices=Snapshot.Format.choices)
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

    def __init__(self, *args: Any, project: Project, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["format"].initial = snapshot_default_format(project=project)

    def clean_licence(self) -> str:
        return str(self.cleaned_data["licence"] or Snapshot.Licence.CC_BY_4)
