from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from core.models import Job, Project
from curation.models import Clip, Label, Recipe, Subset, SuperCategory, WordLabel
from curation.recipes import (
    PRESETS,
    Candidates,
    RecipeError,
    RecipeSpec,
    select_subset,
    skew,
    spec_from_text,
    spec_to_text,
)
from curation.services import (
    ontology_import,
    recipe_import,
    recipe_save,
    segments_import,
    subset_build,
    subset_from_clips,
)
from tests.conftest import FIXTURES


def candidates(
    clip_labels: list[list[int]],
    n_labels: int,
    *,
    usable: list[int] | None = None,
    excluded: list[int] | None = None,
    words: list[int] | None = None,
) -> Candidates:
    """Clip i (id 100+i) carries labels clip_labels[i]."""
    link_clip = np.array(
        [c for c, labels in enumerate(clip_labels) for _ in labels], dtype=np.int64
    )
    link_label = np.array([label for labels in clip_labels for label in labels], dtype=np.int64)

    def mask(indices: list[int] | None, default: bool) -> np.ndarray:
        out = np.full(n_labels, default if indices is None else False)
        if indices is not None:
            out[indices] = True
        return out

    excluded_mask = mask(excluded, False)
    usable_mask = mask(usable, True) & ~excluded_mask
    return Candidates(
        np.arange(100, 100 + len(clip_labels), dtype=np.int64),
        link_clip,
        link_label,
        usable_mask,
        excluded_mask,
        mask(words, False),
    )


def spec(**overrides: object) -> RecipeSpec:
    return RecipeSpec(val_size=0, test_size=0, **overrides)  # type: ignore[arg-type]


def test_it_drops_labels_with_too_few_clips() -> None:
    data = candidates([[0], [0], [0], [1]], 2)

    result = select_subset(spec(min_clips_per_label=2), data)

    assert list(result.kept_labels) == [True, False]
    assert sorted(result.clip_ids) == [100, 101, 102]


def test_it_drops_clips_carrying_an_excluded_subtree_label() -> None:
    data = candidates([[0], [0, 1], [1]], 2, excluded=[1])

    result = select_subset(spec(), data)

    assert sorted(result.clip_ids) == [100]


def test_it_keeps_such_clips_for_their_other_labels_when_asked() -> None:
    data = candidates([[0], [0, 1], [1]], 2, excluded=[1])

    result = select_subset(spec(drop_clips_with_excluded_labels=False), data)

    assert sorted(result.clip_ids) == [100, 101]
    assert result.counts_after[1] == 0


def test_it_ignores_unusable_labels() -> None:
    data = candidates([[0], [1], [1]], 2, usable=[0])

    result = select_subset(spec(), data)

    assert sorted(result.clip_ids) == [100]


def test_it_caps_clips_per_label() -> None:
    data = candidates([[0]] * 10 + [[1]] * 3, 2)

    result = select_subset(spec(max_clips_per_label=4), data)

    assert list(result.counts_after) == [4, 3]
    assert list(result.counts_before) == [10, 3]


def test_it_prefers_clips_with_more_word_labels_when_capping() -> None:
    # Label 0 (5 clips) is filled first; 101 and 103 also carry label 1, which has a word
    # label, so they win over 100, 102 and 104 whatever the seed.
    clip_labels = [[0], [0, 1], [0], [0, 1], [0]] + [[1]] * 6
    data = candidates(clip_labels, 2, words=[1])

    for seed in range(5):
        recipe = spec(max_clips_per_label=2, seed=seed)
        chosen = set(select_subset(recipe, data).clip_ids.tolist())
        assert {101, 103} <= chosen
        assert not chosen & {100, 102, 104}


def test_it_trims_a_dominant_label_to_its_maximum_share() -> None:
    data = candidates([[0]] * 8 + [[1]] * 2 + [[2]] * 2, 3)

    result = select_subset(spec(max_label_share=0.5), data)

    total = len(result.clip_ids)
    assert result.counts_after[0] <= 0.5 * total
    assert result.counts_after[1] == 2
    assert result.counts_after[2] == 2


def test_it_splits_by_counts_and_by_fractions() -> None:
    data = candidates([[0]] * 20, 1)

    by_count = select_subset(RecipeSpec(val_size=3, test_size=5), data)
    by_fraction = select_subset(RecipeSpec(val_size=0.25, test_size=0.25), data)

    assert [int((by_count.splits == s).sum()) for s in ("train", "val", "test")] == [12, 3, 5]
    assert [int((by_fraction.splits == s).sum()) for s in ("train", "val", "test")] == [10, 5, 5]


def test_it_refuses_splits_larger_than_the_selection() -> None:
    with pytest.raises(RecipeError, match="only 3 were selected"):
        select_subset(RecipeSpec(val_size=2, test_size=2), candidates([[0]] * 3, 1))


def test_it_selects_and_splits_the_same_clips_for_the_same_seed() -> None:
    rng = np.random.default_rng(0)
    clip_labels = [list(rng.choice(6, size=rng.integers(1, 4), replace=False)) for _ in range(300)]
    data = candidates(clip_labels, 6, words=[0, 2])
    recipe = RecipeSpec(max_clips_per_label=20, val_size=5, test_size=5, seed=11)

    first, second = select_subset(recipe, data), select_subset(recipe, data)
    other = select_subset(
        RecipeSpec(max_clips_per_label=20, val_size=5, test_size=5, seed=12), data
    )

    assert list(first.clip_ids) == list(second.clip_ids)
    assert list(first.splits) == list(second.splits)
    assert list(first.clip_ids) != list(other.clip_ids)


def test_it_measures_skew_as_top_three_minus_bottom_three() -> None:
    assert skew(np.array([10, 9, 8, 0, 3, 2, 1])) == pytest.approx(9 - 2)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"min_clip": 3}, "unknown recipe field(s) min_clip"),
        ({"segment_lists": ["youtube"]}, "segment_lists"),
        ({"min_clips_per_label": -1}, "min_clips_per_label"),
        ({"max_clips_per_label": 0}, "max_clips_per_label"),
        ({"max_label_share": 1.5}, "max_label_share"),
        ({"excluded_flags": ["noisy"]}, "excluded_flags"),
        ({"val_size": 0.6, "test_size": 0.5}, "test_size"),
        ({"seed": "x"}, "seed"),
        ({"video_features_height": 300}, "video_features_height: one of 240, 360, 480"),
        ({"video_features_height": "360"}, "video_features_height"),
        ({"video_features_height": True}, "video_features_height"),
        ({"seed": -1}, "seed: a whole number from 0 to 9,223,372,036,854,775,807 (got -1)"),
        ({"seed": 2**63}, "seed: a whole number from 0 to"),
        ({"min_clips_per_label": 10**4000}, "min_clips_per_label: a whole number from 0 to"),
        ({"max_clips_per_label": 10**30}, "max_clips_per_label: a whole number from 1 to"),
        ({"val_size": 10**30}, "val_size: a count from 0 to 1,000,000,000"),
        ({"seed": 10**4299}, "seed: a whole number from 0 to"),
    ],
)
def test_it_names_the_field_of_an_invalid_recipe(data: dict[str, object], message: str) -> None:
    with pytest.raises(RecipeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        RecipeSpec.from_dict(data)


@pytest.mark.parametrize("fmt", ["toml", "json"])
def test_it_round_trips_a_recipe_through_text(fmt: str) -> None:
    text = spec_to_text(PRESETS["audiocaps"], fmt=fmt, name="AudioCaps")

    assert spec_from_text(text, fmt=fmt) == PRESETS["audiocaps"]


@pytest.mark.parametrize("fmt", ["toml", "json"])
def test_it_round_trips_the_video_features_height(fmt: str) -> None:
    spec = RecipeSpec(segment_lists=["eval"], video_features_height=360)

    text = spec_to_text(spec, fmt=fmt, name="Sharp")

    assert spec_from_text(text, fmt=fmt) == spec
    assert spec_from_text(text, fmt=fmt).video_features_height == 360


@pytest.mark.parametrize("fmt", ["toml", "json"])
def test_it_leaves_out_an_unset_video_features_height(fmt: str) -> None:
    text = spec_to_text(RecipeSpec(), fmt=fmt)

    assert "video_features_height" not in text
    assert spec_from_text(text, fmt=fmt).video_features_height is None


def test_it_shows_a_long_bad_value_shortened() -> None:
    with pytest.raises(RecipeError) as refused:
        RecipeSpec.from_dict({"seed": 10**4299})
    assert len(str(refused.value)) < 200


@pytest.mark.parametrize(
    ("fmt", "text", "message"),
    [
        ("json", '{"seed": ' + "[" * 30_000 + "]" * 30_000 + "}", "not valid JSON: nested too"),
        ("toml", "seed = " + "[" * 30_000 + "]" * 30_000, "not valid TOML: nested too deeply"),
        ("toml", "seed = " + "{a = " * 10_000 + "1" + "}" * 10_000, "not valid TOML: nested"),
        ("json", '{"seed": 1' + "0" * 5_000 + "}", "not valid JSON: a number is too long"),
        ("toml", "seed = 1" + "0" * 5_000, "not valid TOML: a number is too long"),
    ],
    ids=["deep-json", "deep-toml-array", "deep-toml-table", "long-json-number", "long-toml"],
)
def test_it_refuses_text_the_parsers_choke_on(fmt: str, text: str, message: str) -> None:
    with pytest.raises(RecipeError, match=message):
        spec_from_text(text, fmt=fmt)


def test_it_reports_where_a_toml_recipe_is_broken() -> None:
    with pytest.raises(RecipeError, match="not valid TOML"):
        spec_from_text("seed = = 3", fmt="toml")


# Through the database -------------------------------------------------------------------


@pytest.fixture
def imported(db: None) -> None:
    ontology_import(path=FIXTURES / "audioset_ontology.json")
    segments_import(path=FIXTURES / "segments" / "balanced_head.csv", segment_list="balanced")
    speech = WordLabel.objects.create(name="speech", super_category=SuperCategory.HUMAN)
    Label.objects.filter(name="Speech").update(word_label=speech)


def small_recipe(project: Project, **overrides: object) -> Recipe:
    fields = {
        "segment_lists": ["balanced"],
        "excluded_subtrees": ["Music"],
        "val_size": 2,
        "test_size": 2,
        "seed": 5,
        **overrides,
    }
    return recipe_save(project=project, name="Small", spec=fields)


def test_it_builds_a_subset_with_report_and_chart(imported: None, project: Project) -> None:
    subset = subset_build(recipe=small_recipe(project))

    report = subset.report
    assert report["candidate_clips"] == 50
    assert report["selected_clips"] == subset.subsetclip_set.count() > 0
    assert report["splits"]["val"] == 2
    assert report["splits"]["test"] == 2
    assert report["super_categories"]["human"] > 0
    assert all(row["before"] >= row["after"] or row["after"] > 0 for row in report["labels"])
    assert subset.chart.read(8) == b"\x89PNG\r\n\x1a\n"


def test_it_never_selects_music_labels_or_clips(imported: None, project: Project) -> None:
    subset = subset_build(recipe=small_recipe(project))

    music = Label.objects.get(name="Music")
    assert not subset.clips.filter(labels=music).exists()
    assert "Music" not in {row["name"] for row in subset.report["labels"]}


def test_it_builds_identical_subsets_from_the_same_recipe(imported: None, project: Project) -> None:
    recipe = small_recipe(project, max_clips_per_label=3)

    first = subset_build(recipe=recipe, slug="first")
    second = subset_build(recipe=recipe, slug="second")

    def rows(subset: Subset) -> set[tuple[int, str]]:
        return set(subset.subsetclip_set.values_list("clip_id", "split"))

    assert rows(first) == rows(second)


def test_it_refuses_an_unknown_excluded_subtree(imported: None, project: Project) -> None:
    with pytest.raises(ValidationError, match="no label named Jazzz"):
        subset_build(recipe=small_recipe(project, excluded_subtrees=["Jazzz"]))
    assert not Subset.objects.exists()


def test_it_imports_a_recipe_file_and_builds_it_from_the_command(
    imported: None, project: Project, tmp_path: Path
) -> None:
    path = tmp_path / "small.toml"
    path.write_text(
        'name = "From file"\nsegment_lists = ["balanced"]\nval_size = 1\ntest_size = 1\n'
    )

    call_command("build_subset", str(path), "--project", project.slug, stdout=io.StringIO())

    assert project.recipes.get().name == "From file"
    job = Job.objects.get(kind="subset_build")
    assert job.state == Job.State.SUCCEEDED
    assert Subset.objects.get(slug=job.result["subset"]).report["splits"]["val"] == 1


def test_it_names_the_file_and_field_of_a_bad_recipe_file(project: Project, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"max_label_share": 7}')

    with pytest.raises(ValidationError, match=r"bad\.json: max_label_share"):
        recipe_import(project=project, path=path)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.toml", "seed = [", r"^bad\.toml: not valid TOML"),
        ("neg.toml", "val_size = -3\n", r"^neg\.toml: val_size: a count from 0"),
        ("absent.json", None, r"absent\.json: cannot read \(No such file or directory\)$"),
    ],
)
def test_the_command_refuses_a_bad_recipe_file_with_a_message_not_a_traceback(
    project: Project, tmp_path: Path, name: str, content: str | None, message: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content)

    with pytest.raises(CommandError, match=message):
        call_command("build_subset", str(path), "--project", project.slug, stdout=io.StringIO())
    assert not project.recipes.exists()
    assert not Job.objects.exists()


def test_the_command_logs_a_refused_build_without_a_traceback(
    project: Project, caplog: pytest.LogCaptureFixture
) -> None:
    small_recipe(project)  # no ontology loaded: the build refuses to start

    with pytest.raises(CommandError, match="No ontology loaded; run import_ontology first"):
        call_command("build_subset", "small", "--project", project.slug, stdout=io.StringIO())
    assert Job.objects.get(kind="subset_build").state == Job.State.FAILED
    assert "No ontology loaded" in caplog.text
    assert "Traceback" not in caplog.text


def test_it_lists_known_recipes_for_an_unknown_slug(imported: None, project: Project) -> None:
    small_recipe(project)

    with pytest.raises(CommandError, match="known: small"):
        call_command("build_subset", "nope", "--project", project.slug, stdout=io.StringIO())


@pytest.mark.shared_data
def test_it_runs_an_audiocaps_like_recipe_on_real_lists(
    shared_data: Path, db: None, project: Project
) -> None:
    audioset = shared_data / "audioset"
    ontology_import(path=audioset / "ontology.json")
    segments_import(path=audioset / "balanced_train_segments.csv", segment_list="balanced")
    recipe = recipe_save(
        project=project,
        name="AC-like",
        spec={
            "segment_lists": ["balanced"],
            "min_clips_per_label": 100,
            "excluded_subtrees": ["Music"],
            "max_clips_per_label": 120,
            "val_size": 100,
            "test_size": 200,
            "seed": 1,
        },
    )

    subset = subset_build(recipe=recipe)

    report = subset.report
    assert all(row["before"] >= 100 for row in report["labels"])
    music = Label.objects.get(name="Music")
    assert not subset.clips.filter(labels=music).exists()
    assert report["selected_clips"] > 1000
    assert report["skew_after"] < report["skew_before"]


def test_a_subset_whose_clips_carry_no_word_label_reports_zero_per_super_category(
    imported: None, project: Project
) -> None:
    speech = Label.objects.get(name="Speech")
    no_speech = Clip.objects.exclude(labels=speech).filter(labels__isnull=False).distinct()
    picked = list(no_speech.values_list("pk", flat=True)[:3])

    subset = subset_from_clips(project=project, name="No words", clip_ids=picked)

    assert subset.report["super_categories"] == {"human": 0}
