from __future__ import annotations

from typing import Any, cast

from django import forms

from core.models import Project
from corpus.models import Snapshot
from curation.models import Subset
from modeling.ml.catalog import MODEL_CONFIGS
from modeling.ml.presets import MODEL_PRESETS, NAMED_RECIPES, RECIPES, describe, recipe_names


class SnapshotChoiceField(forms.ModelChoiceField):
    """Snapshots labelled by version, size and splits."""

    def label_from_instance(self, obj: Snapshot) -> str:
        return f"v{obj.version} — {obj.total_captions:,} captions ({', '.join(obj.splits)})"


def recipe_rows() -> list[dict[str, str]]:
    """Each model's recipes in words, its default first, for the training form and the
    command's help."""
    rows = []
    for name in sorted(MODEL_CONFIGS):
        rows.append(
            {"model": name, "paper": RECIPES[name].paper, "summary": describe(RECIPES[name])}
        )
        for other in recipe_names(name)[1:]:
            recipe = NAMED_RECIPES[other][1]
            rows.append(
                {"model": f"{name} ({other})", "paper": recipe.paper, "summary": describe(recipe)}
            )
    return rows


def _recipe_choices() -> list[tuple[str, str]]:
    return [("", "the model's paper recipe")] + [
        (name, f"{name} ({', '.join(models)})") for name, (models, _) in NAMED_RECIPES.items()
    ]


class RunForm(forms.Form):
    model_name = forms.ChoiceField(
        label="Model",
        choices=[(m, m) for m in sorted(MODEL_CONFIGS)],
        help_text="It trains with its paper's recipe (listed below) unless the settings change it.",
    )
    preset = forms.ChoiceField(
        choices=[("small", "small (CPU in minutes)"), ("paper", "paper"), ("tiny", "tiny")],
        initial="small",
        help_text="Model size: the paper's, a small one for CPUs, or a tiny one; a run of "
        "another size than the paper's records it as scaled down.",
    )
    recipe = forms.ChoiceField(
        required=False,
        choices=_recipe_choices,
        help_text="Empty: the model's paper recipe. A recipe named by source (e.g. maac-code) "
        "trains as the authors' released code does (listed below).",
    )
    epochs = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=1000,
        help_text="Empty: the recipe's epochs. A number scales the recipe to that many caption "
        "epochs, its other stages and warm-up in proportion (recorded in the run).",
    )
    snapshot = SnapshotChoiceField(
        queryset=Snapshot.objects.none(),
        help_text="A ready JSON-lines snapshot: the run names exactly what it trained on.",
    )
    overrides = forms.CharField(
        label="Settings",
        required=False,
        widget=forms.Textarea(
            attrs={"rows": 4, "placeholder": "train.epochs=10\nmodel.dropout=0.3"}
        ),
        help_text="One key=value per line (train.*, model.*, vocab.*, features.*).",
    )

    def __init__(self, *args: Any, project: Project, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        snapshot = cast(SnapshotChoiceField, self.fields["snapshot"])
        snapshot.queryset = Snapshot.objects.filter(
            project=project, state=Snapshot.State.READY, format=Snapshot.Format.JSONL
        ).order_by("-version")

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        model, preset = data.get("model_name"), data.get("preset")
        if model and preset and preset not in MODEL_PRESETS.get(model, {}):
            self.add_error("preset", f"{model} has no {preset} preset.")
        recipe = data.get("recipe")
        if model and recipe and recipe not in recipe_names(model):
            known = ", ".join(recipe_names(model))
            self.add_error("recipe", f"{recipe} does not train {model} (its recipes: {known}).")
        return data

    def clean_overrides(self) -> list[str]:
        lines = [line.strip() for line in self.cleaned_data["overrides"].splitlines()]
        lines = [line for line in lines if line and not line.startswith("#")]
        bad = [line for line in lines if "=" not in line]
        if bad:
            raise forms.ValidationError(f"Not of the form key=value: {bad[0]!r}.")
        return lines


class StartFromForm(forms.Form):
    """A new run from a succeeded run's checkpoint (modeling.services.run_start_from)."""

    epochs = forms.IntegerField(
        min_value=1, required=False, help_text="Caption epochs; empty: the run's own."
    )


class SuggestForm(forms.Form):
    subset = forms.ModelChoiceField(
        queryset=Subset.objects.none(), help_text="Caption every ready clip of it."
    )
    beam_size = forms.IntegerField(min_value=1, max_value=10, initial=3)

    def __init__(self, *args: Any, project: Project, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        subset = cast(forms.ModelChoiceField, self.fields["subset"])
        subset.queryset = project.subsets.order_by("name")
