"""Forms of the curation pages. RecipeForm is generated from curation.recipes.RecipeSpec, so a
field added to the spec appears on the editor (tests fail if its type has no form field)."""

from __future__ import annotations

import re
from dataclasses import fields
from typing import Any

from django import forms
from django.core.exceptions import ImproperlyConfigured

from curation.models import Label
from curation.recipes import (
    FLAGS,
    PRESETS,
    SEGMENT_LISTS,
    VIDEO_FEATURES_HEIGHTS,
    WORD_LABEL_SET_CHOICES,
    RecipeError,
    RecipeSpec,
)

# The comments on RecipeSpec's fields, for people.
HELP: dict[str, str] = {
    "segment_lists": "AudioSet lists to draw clips from.",
    "min_clips_per_label": "Drop labels with fewer candidate clips than this (AudioCaps: 1000).",
    "excluded_subtrees": "Ontology subtrees (names or ids, comma-separated) whose labels are "
    "never used (AudioCaps: Music).",
    "drop_clips_with_excluded_labels": "Also drop every clip that carries a label from an "
    "excluded subtree.",
    "keep_labels_also_outside_excluded_subtrees": "Keep a label of an excluded subtree that "
    "also sits under a parent outside it (Bell: under Music and Sounds of things; AudioCaps "
    "kept it).",
    "excluded_flags": "Curation flags that exclude a label.",
    "exclude_abstract": "Honour the ontology's “abstract” restriction.",
    "exclude_blacklisted": "Honour the ontology's “blacklist” restriction.",
    "word_label_set": "Which labels are word labels (clips with more of them are preferred): "
    "the site's imported word labels, or a bundled set (audiocaps: the paper's Figure 7).",
    "only_word_labels": "Keep only the labels of that word-label set.",
    "max_clips_per_label": "Fill each label up to this many clips, preferring clips with more "
    "word labels. Empty: no cap.",
    "hard_cap": "Hard cap: take a clip only if none of its labels is full yet, so no label "
    "passes the cap. Off: a clip taken for one label also counts for its others, which may "
    "pass it.",
    "max_label_share": "Then trim any label holding more than this share of the selected clips "
    "(between 0 and 1). Empty: no trim.",
    "val_size": "Validation size: a count (500) or a fraction (0.1).",
    "test_size": "Test size: a count or a fraction; train gets the rest.",
    "captions_per_train_clip": "Captions a caption batch of the train split asks per clip "
    "(AudioCaps: 1).",
    "captions_per_val_clip": "… of the val split (AudioCaps: 5).",
    "captions_per_test_clip": "… of the test split (AudioCaps: 5).",
    "seed": "The same seed on the same data selects and splits the same clips.",
    "video_features_height": "Fetching also stores a silent video this tall for video "
    "features (the video models read it instead of the 144p hint). Applies to clips fetched "
    "from now on; changes no selection.",
}
CHOICES: dict[str, list[tuple[str, str]]] = {
    "segment_lists": [(s, s) for s in SEGMENT_LISTS],
    "excluded_flags": [(f, f.replace("_", " ")) for f in FLAGS],
}
# single choices, shown as a select; "" stands for None
SELECTS: dict[str, list[tuple[str, str]]] = {
    "video_features_height": [("", "none (the 144p hint only)")]
    + [(str(h), f"{h}p") for h in VIDEO_FEATURES_HEIGHTS],
}
# single choices of text, shown as a select
TEXT_SELECTS: dict[str, list[tuple[str, str]]] = {
    "word_label_set": [
        (name, "the site's imported word labels" if name == "site" else f"bundled: {name}")
        for name in WORD_LABEL_SET_CHOICES
    ],
}
PRESET_CHOICES = [("", "blank (defaults)")] + [(name, name) for name in PRESETS]


class CountOrFractionField(forms.CharField):
    """RecipeSpec's val_size/test_size: "500" is a count, "0.1" a fraction."""

    def to_python(self, value: Any) -> int | float | None:  # type: ignore[override]
        text = str(value or "").strip()
        if not text:
            return None
        if re.fullmatch(r"\d+", text):
            return int(text)
        try:
            return float(text)
        except ValueError:
            raise forms.ValidationError("Enter a count (500) or a fraction (0.1).") from None


def _spec_field(name: str, kind: str) -> forms.Field:
    """The form field for one RecipeSpec field; its `data-spec` attribute tells the preview
    script how to read it back into the spec. Range rules stay in RecipeSpec.validate, so
    the page and the API give the same messages."""
    if name in CHOICES:
        boxes = forms.CheckboxSelectMultiple(attrs={"data-spec": "choices"})
        return forms.MultipleChoiceField(choices=CHOICES[name], required=False, widget=boxes)
    if name in SELECTS:
        # the preview script reads a select's value like a number input's
        select = forms.Select(attrs={"data-spec": "int"})
        return forms.TypedChoiceField(
            choices=SELECTS[name], coerce=int, empty_value=None, required=False, widget=select
        )
    if name in TEXT_SELECTS:
        text_select = forms.Select(attrs={"data-spec": "text"})
        return forms.ChoiceField(choices=TEXT_SELECTS[name], widget=text_select)
    number = {"step": "any"}
    table: dict[str, tuple[type[forms.Field], dict[str, Any], str]] = {
        "list[str]": (forms.CharField, {"required": False}, "csv"),
        "bool": (forms.BooleanField, {"required": False}, "bool"),
        "int": (forms.IntegerField, {}, "int"),
        "int | None": (forms.IntegerField, {"required": False}, "int"),
        "float | None": (forms.FloatField, {"required": False, "attrs": number}, "float"),
        "float | int": (CountOrFractionField, {"attrs": number, "number": True}, "size"),
    }
    if kind not in table:
        raise ImproperlyConfigured(f"RecipeSpec.{name}: no form field for type {kind!r}")
    field_class, options, spec_kind = table[kind]
    attrs = {"data-spec": spec_kind, **options.pop("attrs", {})}
    if options.pop("number", False) or field_class in (forms.IntegerField, forms.FloatField):
        widget: forms.Widget = forms.NumberInput(attrs=attrs)
    elif field_class is forms.BooleanField:
        widget = forms.CheckboxInput(attrs=attrs)
    else:
        widget = forms.TextInput(attrs=attrs)
    return field_class(widget=widget, **options)


class RecipeForm(forms.Form):
    name = forms.CharField(max_length=200)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spec: RecipeSpec | None = None
        for spec_field in fields(RecipeSpec):
            form_field = _spec_field(spec_field.name, str(spec_field.type))
            form_field.label = spec_field.name.replace("_", " ").capitalize()
            form_field.help_text = HELP.get(spec_field.name, "")
            self.fields[spec_field.name] = form_field

    @staticmethod
    def initial_for(name: str, spec: dict[str, Any]) -> dict[str, Any]:
        """The form's values for a stored spec (a dict, so an outdated one still opens)."""
        # fields the stored spec predates show their defaults, as the build reads them
        data: dict[str, Any] = {"name": name, **RecipeSpec().to_dict(), **spec}
        data["excluded_subtrees"] = ", ".join(spec.get("excluded_subtrees") or [])
        return data

    def clean_excluded_subtrees(self) -> list[str]:
        names = [n.strip() for n in self.cleaned_data["excluded_subtrees"].split(",") if n.strip()]
        known = {mid for mid in Label.objects.filter(mid__in=names).values_list("mid", flat=True)}
        known |= {n.lower() for n in Label.objects.values_list("name", flat=True)}
        unknown = [n for n in names if n not in known and n.lower() not in known]
        if unknown:
            raise forms.ValidationError(f"No label named {', '.join(unknown)}.")
        return names

    def clean(self) -> dict[str, Any]:
        """Checks the whole spec with RecipeSpec's own rules and puts each message on the
        field it names (messages start "field: …")."""
        super().clean()
        cleaned = self.cleaned_data
        if self.errors:
            return cleaned
        data = {f.name: cleaned.get(f.name) for f in fields(RecipeSpec)}
        try:
            self.spec = RecipeSpec.from_dict(data)
        except (RecipeError, TypeError) as exc:
            where, _, why = str(exc).partition(": ")
            if where in self.fields and why:
                self.add_error(where, why)
            else:
                self.add_error(None, str(exc))
        return cleaned


class NewRecipeForm(forms.Form):
    name = forms.CharField(max_length=200)
    preset = forms.ChoiceField(choices=PRESET_CHOICES, required=False, label="Start from")

    def spec(self) -> RecipeSpec:
        preset = self.cleaned_data.get("preset")
        # a copy: the presets are shared module state
        return RecipeSpec.from_dict(PRESETS[preset].to_dict()) if preset else RecipeSpec()


class RecipeUploadForm(forms.Form):
    file = forms.FileField(label="Recipe file (.toml or .json, at most 64 KB)")


class LabelCurateForm(forms.Form):
    needs_visuals = forms.BooleanField(required=False)
    needs_expertise = forms.BooleanField(required=False)
    excluded = forms.BooleanField(required=False)
    note = forms.CharField(required=False, max_length=2000)


class BuildForm(forms.Form):
    name = forms.CharField(max_length=200, required=False, label="Subset name (optional)")


class ArchiveUploadForm(forms.Form):
    archive = forms.FileField(
        help_text="A .zip or .tar(.gz/.bz2/.xz) of wav, flac, mp3, ogg, opus or m4a files, "
        "each at most 60 s long."
    )
    subset_name = forms.CharField(
        max_length=200,
        required=False,
        label="Make a subset of them",
        help_text="Optional: the name of a new subset holding every clip of the archive.",
    )

    def clean_archive(self) -> Any:
        from django.conf import settings

        archive = self.cleaned_data["archive"]
        limit = settings.ARCHIVE_UPLOAD_MAX_BYTES
        if archive.size > limit:
            raise forms.ValidationError(
                f"{archive.name} is {archive.size / 1024**2:,.0f} MB; uploads may be at most "
                f"{limit / 1024**2:,.0f} MB. Import bigger folders on the server with "
                "`manage.py import_local_audio`."
            )
        return archive
