"""The bundled AudioCaps recipe on ../shared/data's AudioSet lists: what each rule drops,
clips per split, Figure 8's skew before and after, hard against soft cap, and time taken.

Usage: .venv/bin/python benchmarks/audiocaps_recipe.py [--synthetic-rows N]
Set DATABASE_URL to run on PostgreSQL (a fresh database). Needs ../shared/data.
With --synthetic-rows, also times the recipe over N AudioSet-shaped rows (as
benchmarks/segments.py makes them), where labels reach the paper's 1,000-clip floor.
"""

from __future__ import annotations

import argparse
import platform
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from _django import SHARED, setup
from segments import synthetic_csv

# the partial unbalanced list is the first 65,497 of 2,041,789 rows, sorted by YouTube id
# (random), so a ~3.2 % sample: the "scaled" runs shrink the floor and the cap by as much
PARTIAL_SHARE = 65_497 / 2_041_789


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(project: Any, name: str, **overrides: Any) -> dict[str, Any]:
    from curation.recipes import PRESETS, RecipeSpec
    from curation.services import recipe_save, subset_build

    spec = RecipeSpec.from_dict({**PRESETS["audiocaps"].to_dict(), **overrides})
    recipe = recipe_save(project=project, name=name, spec=spec)
    start = time.perf_counter()
    subset = subset_build(recipe=recipe)
    elapsed = time.perf_counter() - start
    report = subset.report
    cap = spec.max_clips_per_label
    largest = max((row["after"] for row in report["labels"]), default=0)
    rules = ", ".join(f"{r['rule']}: -{r['dropped']}" for r in report["label_rules"])
    splits = report["splits"]
    print(f"\n## {name}: {', '.join(f'{k}={v}' for k, v in overrides.items()) or 'preset'}")
    print(
        f"labels: {report['labels_considered']} on the candidates → {rules} → "
        f"{report['labels_kept']} kept"
    )
    print(
        f"clips: {report['candidate_clips']:,} candidates → {report['selected_clips']:,} "
        f"selected (train {splits['train']:,} / val {splits['val']:,} / test "
        f"{splits['test']:,}; captions per clip {report['captions_per_clip']})"
    )
    print(
        f"skew, word labels (Figure 8): {report['word_skew_before']:,.1f} → "
        f"{report['word_skew_after']:,.1f}; all kept labels: {report['skew_before']:,.1f} → "
        f"{report['skew_after']:,.1f}"
    )
    print(
        f"largest label after: {largest:,} clips (cap {cap:,}, "
        f"{'hard' if spec.hard_cap else 'soft'}); labels over the cap: "
        f"{sum(row['after'] > cap for row in report['labels'])}"
    )
    print(f"build: {elapsed:.2f} s, peak {peak_mb():.0f} MB")
    return report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--synthetic-rows", type=int, default=0)
    args = parser.parse_args()
    setup()

    from django.conf import settings
    from django.contrib.auth.models import User

    from core.services import project_create
    from curation.models import Label
    from curation.services import label_flags_apply, ontology_import, segments_import

    db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    print(f"machine: {platform.machine()}, python {platform.python_version()}, database {db}")
    audioset = SHARED / "audioset"
    ontology_import(path=audioset / "ontology.json")
    start = time.perf_counter()
    for name, segment_list in [
        ("balanced_train_segments.csv", "balanced"),
        ("eval_segments.csv", "eval"),
        ("unbalanced_train_segments.partial.csv", "unbalanced"),
    ]:
        rows = segments_import(path=audioset / name, segment_list=segment_list)["rows"]
        print(f"imported {name}: {rows:,} rows")
    print(f"segment import: {time.perf_counter() - start:.1f} s")

    user = User.objects.create_user("bench")
    project = project_create(name="AudioCaps bench", slug="audiocaps-bench", created_by=user)
    start = time.perf_counter()
    flags = label_flags_apply(project=project)
    print(f"AudioCaps flags: {flags['labels']} labels ({time.perf_counter() - start:.2f} s)")

    floor, cap = round(1000 * PARTIAL_SHARE), round(2000 * PARTIAL_SHARE)
    small = {"val_size": 0.1, "test_size": 0.1}
    run(project, "preset on the partial unbalanced list", **small)
    run(project, "preset, scaled floor and cap", min_clips_per_label=floor,
        max_clips_per_label=cap, **small)  # fmt: skip
    run(project, "scaled, every label (word-label switch off)", min_clips_per_label=floor,
        max_clips_per_label=cap, only_word_labels=False, **small)  # fmt: skip
    run(project, "scaled, every label, soft cap", min_clips_per_label=floor,
        max_clips_per_label=cap, only_word_labels=False, hard_cap=False, **small)  # fmt: skip
    lists = {"segment_lists": ["balanced", "eval", "unbalanced"]}
    run(project, "all three lists, preset floor and cap", **lists, **small)
    run(project, "all three lists, floor 100, every label", **lists, min_clips_per_label=100,
        max_clips_per_label=200, only_word_labels=False, **small)  # fmt: skip

    if args.synthetic_rows:
        label_ids = list(
            Label.objects.filter(abstract=False, blacklisted=False).values_list("mid", flat=True)
        )
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "synthetic.csv"
            synthetic_csv(path, args.synthetic_rows, label_ids)
            start = time.perf_counter()
            segments_import(path=path, segment_list="unbalanced")
            print(f"\nsynthetic import: {args.synthetic_rows:,} rows in "
                  f"{time.perf_counter() - start:.1f} s")  # fmt: skip
        run(project, "preset over the synthetic rows")
        run(project, "preset over the synthetic rows, soft cap", hard_cap=False)


if __name__ == "__main__":
    main()
