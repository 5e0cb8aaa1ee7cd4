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
    label_curate,
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


def test_a_soft_cap_lets_multi_label_clips_push_a_label_past_it() -> None:
    # Labels 0 and 1 (2 clips each) fill first; every one of their clips also carries
    # label 2, which ends up with 4 clips against a cap of 2.
    data = candidates([[1, 2], [1, 2], [0, 2], [0, 2]], 3)

    result = select_subset(spec(max_clips_per_label=2), data)

    assert list(result.counts_after) == [2, 2, 4]


def test_a_hard_cap_holds_on_multi_label_clips() -> None:
    data = candidates([[1, 2], [1, 2], [0, 2], [0, 2]], 3)

    result = select_subset(spec(max_clips_per_label=2, hard_cap=True), data)

    # rare labels fill first (a tie in label order): label 0's clips fill label 2, so
    # label 1's clips, which also carry label 2, stay out
    assert list(result.counts_after) == [2, 0, 2]
    assert sorted(result.clip_ids) == [102, 103]


@pytest.mark.parametrize("seed", range(4))
def test_no_kept_label_ever_passes_a_hard_cap(seed: int) -> None:
    rng = np.random.default_rng(seed)
    weights = 1 / np.arange(1, 9)  # skewed, as AudioSet is
    clip_labels = [
        list(rng.choice(8, size=rng.integers(1, 5), replace=False, p=weights / weights.sum()))
        for _ in range(400)
    ]
    data = candidates(clip_labels, 8, words=[1, 3])

    hard = select_subset(spec(max_clips_per_label=15, hard_cap=True, seed=seed), data)
    soft = select_subset(spec(max_clips_per_label=15, seed=seed), data)

    assert hard.counts_after.max() <= 15 < soft.counts_after.max()
    assert hard.counts_after.min() > 0


def test_a_hard_cap_still_fills_labels_whose_clips_are_free() -> None:
    data = candidates([[0]] * 5 + [[1]] * 5 + [[0, 1]] * 2, 2)

    result = select_subset(spec(max_clips_per_label=3, hard_cap=True), data)

    assert list(result.counts_after) == [3, 3]


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
        ({"hard_cap": "yes"}, "hard_cap: true or false"),
        ({"only_word_labels": 1}, "only_word_labels: true or false"),
        ({"word_label_set": "coco"}, "word_label_set: one of site, audiocaps"),
        ({"captions_per_val_clip": 0}, "captions_per_val_clip: a whole number from 1 to 20"),
        ({"captions_per_train_clip": 21}, "captions_per_train_clip: a whole number from 1"),
        ({"captions_per_test_clip": 2.5}, "captions_per_test_clip"),
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
    # no cap: every candidate clip of a kept label is selected
    assert report["labels"]
    assert all(row["after"] == row["before"] > 0 for row in report["labels"])
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


# The AudioCaps recipe ---------------------------------------------------------------------


def test_the_audiocaps_preset_is_the_papers_recipe() -> None:
    preset = PRESETS["audiocaps"]

    assert (preset.segment_lists, preset.min_clips_per_label) == (["unbalanced"], 1000)
    assert preset.excluded_subtrees == ["Music"]
    assert preset.keep_labels_also_outside_excluded_subtrees
    assert set(preset.excluded_flags) == {"excluded", "needs_visuals", "needs_expertise"}
    assert (preset.word_label_set, preset.only_word_labels) == ("audiocaps", True)
    assert (preset.max_clips_per_label, preset.hard_cap) == (2000, True)
    assert [preset.captions_per_clip(s) for s in ("train", "val", "test")] == [1, 5, 5]


@pytest.fixture
def ontology(db: None) -> None:
    ontology_import(path=FIXTURES / "audioset_ontology.json")


def clips_carrying(*label_names: list[str]) -> None:
    """One AudioSet clip of the balanced list per list of label names."""
    labels = {label.name: label for label in Label.objects.all()}
    for i, names in enumerate(label_names):
        clip = Clip.objects.create(
            source=Clip.Source.YOUTUBE, youtube_id=f"clip{i:07d}", segment_list="balanced"
        )
        clip.labels.set([labels[name] for name in names])


def audiocaps_recipe(project: Project, **overrides: object) -> Recipe:
    """The bundled preset on the balanced list, small enough for a few clips."""
    fields = {
        **PRESETS["audiocaps"].to_dict(),
        "segment_lists": ["balanced"],
        "min_clips_per_label": 1,
        "val_size": 0,
        "test_size": 0,
        **overrides,
    }
    return recipe_save(project=project, name="AudioCaps", spec=fields)


def kept_names(subset: Subset) -> set[str]:
    return {row["name"] for row in subset.report["labels"]}


@pytest.mark.parametrize("spare", [True, False])
def test_it_keeps_bell_though_it_also_sits_under_music_only_when_asked(
    ontology: None, project: Project, spare: bool
) -> None:
    clips_carrying(["Bell"], ["Bell"], ["Guitar"], ["Siren"])
    recipe = audiocaps_recipe(
        project, only_word_labels=False, keep_labels_also_outside_excluded_subtrees=spare
    )

    subset = subset_build(recipe=recipe)

    assert kept_names(subset) == ({"Bell", "Siren"} if spare else {"Siren"})


def test_it_keeps_only_labels_of_the_chosen_word_label_set(
    ontology: None, project: Project
) -> None:
    clips_carrying(["Siren"], ["Speech"], ["Speech", "Male speech, man speaking"])

    subset = subset_build(recipe=audiocaps_recipe(project))

    assert kept_names(subset) == {"Siren", "Male speech, man speaking"}
    assert subset.subsetclip_set.count() == 2


def test_it_needs_word_labels_on_the_site_to_keep_only_word_labels(
    ontology: None, project: Project
) -> None:
    clips_carrying(["Siren"])

    with pytest.raises(ValidationError, match="this site has no word labels imported"):
        subset_build(recipe=audiocaps_recipe(project, word_label_set="site"))


def test_the_report_counts_the_labels_each_rule_drops(ontology: None, project: Project) -> None:
    label_curate(
        project=project,
        label=Label.objects.get(name="Inside, small room"),
        needs_visuals=True,
        needs_expertise=False,
        excluded=False,
    )
    clips_carrying(["Music", "Guitar"], ["Inside, small room"], ["Speech"], ["Speech"], ["Siren"])

    subset = subset_build(
        recipe=audiocaps_recipe(project, only_word_labels=False, min_clips_per_label=2)
    )

    report = subset.report
    assert report["labels_considered"] == 5
    assert [(row["rule"], row["dropped"]) for row in report["label_rules"]] == [
        ("in an excluded subtree (Music)", 2),
        ("abstract in the ontology", 0),
        ("blacklisted in the ontology", 0),
        ("flagged excluded in this project", 0),
        ("flagged needs visuals in this project", 1),
        ("flagged needs expertise in this project", 0),
        ("fewer than 2 candidate clips", 1),
    ]
    assert report["labels_kept"] == 1


def test_the_report_shows_figure_8s_skew_over_the_word_labels(
    ontology: None, project: Project
) -> None:
    per_word = {"Siren": 10, "Truck": 9, "Door": 8, "Wind": 3, "Rain": 2, "Laughter": 1}
    clips_carrying(*[[name] for name, n in per_word.items() for _ in range(n)], *[["Speech"]] * 40)

    subset = subset_build(
        recipe=audiocaps_recipe(project, only_word_labels=False, max_clips_per_label=2)
    )

    report = subset.report
    assert report["word_skew_before"] == pytest.approx((10 + 9 + 8) / 3 - (3 + 2 + 1) / 3)
    assert report["word_skew_after"] == pytest.approx(2 - (2 + 2 + 1) / 3)
    assert report["skew_before"] == pytest.approx((40 + 10 + 9) / 3 - 2)  # Speech counts here


def test_a_label_under_several_groups_counts_for_each_of_them(
    ontology: None, project: Project
) -> None:
    clips_carrying(["Hiss"], ["Siren"])

    report = subset_build(recipe=audiocaps_recipe(project)).report

    counts = report["super_categories"]
    assert [counts[c] for c in ("other_things", "source_ambiguous", "animal", "alarm")] == [
        1,
        1,
        1,
        1,
    ]
    assert counts["human"] == 0
