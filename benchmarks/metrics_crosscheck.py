"""Earmark's caption metrics (corpus.evaluation: pycocoevalcap 1.2) against aac-metrics, an
independent implementation (tests/corpus/aac_metrics_scorer.py says how it runs here), on:

- the AudioCaps v1 test human bound (975 clips x 5 references, 5 rounds: each reference in
  turn against the other four), per round and the mean;
- 1NN retrieval captions on SynthScenes (seed 2026): each test scene gets the first caption of
  the training scene nearest by mean-pooled log-mels (modeling.ml.retrieval, what Earmark's
  1NN captioner returns before its vocabulary), scored against the scene's 5 captions;
- AudioCaps test with wrong-clip captions (each clip gets the first reference of the next
  clip, as benchmarks/evaluate.py scores): a low-scoring regime, many n-gram counts at zero.

Prints both implementations' corpus scores, the largest absolute difference of the corpus and
of the per-clip scores, and the time each took. BLEU-1..4, METEOR, ROUGE-L and CIDEr-D; SPICE
needs Stanford CoreNLP 3.6.0, which is not obtainable here.

`--fixture DIR` also writes the SynthScenes predictions and references as
DIR/synthscenes_1nn_{predictions,references}.csv (tests/fixtures/evaluation holds those of
`--train 1000 --test 200`).

Usage: .venv/bin/python benchmarks/metrics_crosscheck.py [--train 1000] [--test 975]
       [--fixture DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT))

from corpus import evaluation, evaluation_java  # noqa: E402
from corpus.evaluation_files import read_references  # noqa: E402
from tests.corpus import aac_metrics_scorer as aac  # noqa: E402

SEED = 2026
FAMILIES = ("bleu", "meteor", "rouge", "cider")
Captions = dict[str, list[str]]


def synthscenes_1nn(train: int, test: int) -> tuple[dict[str, str], Captions]:
    """(predictions, references) keyed by the test scenes' names."""
    import synthscenes
    from modeling.ml import retrieval
    from modeling.ml.features import extract, feature_preset

    # the 0.1 s hop of RESULTS.md's SynthScenes runs: 101 frames, enough to tell scenes apart
    config = dataclasses.replace(feature_preset("act"), hop_length=3200)
    train_scenes = list(synthscenes.generate_scenes(SEED, train, n_captions=2))
    test_scenes = list(synthscenes.generate_scenes(SEED, test, start=train, n_captions=5))
    bank = retrieval.mean_pooled([extract(s.waveform, s.sample_rate, config) for s in train_scenes])
    queries = retrieval.mean_pooled(
        [extract(s.waveform, s.sample_rate, config) for s in test_scenes]
    )
    nearest = retrieval.nearest(bank, queries)
    predictions = {
        scene.name: train_scenes[j].captions[0]
        for scene, j in zip(test_scenes, nearest, strict=True)
    }
    return predictions, {scene.name: scene.captions for scene in test_scenes}


def write_fixture(folder: Path, predictions: Mapping[str, str], references: Captions) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "synthscenes_1nn_predictions.csv", "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["file_name", "caption_predicted"])
        out.writerows((key, text) for key, text in predictions.items())
    count = max(map(len, references.values()))
    with open(folder / "synthscenes_1nn_references.csv", "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["file_name", *(f"caption_{i + 1}" for i in range(count))])
        out.writerows([key, *refs] for key, refs in references.items())


def largest_difference(
    ours: Sequence[Mapping[str, float | None]], theirs: Sequence[Mapping[str, float]]
) -> float:
    return max(
        abs(float(mine[name] or 0.0) - other[name])
        for mine, other in zip(ours, theirs, strict=True)
        for name in aac.COMPARED
    )


def table(title: str, ours: Mapping[str, float | None], theirs: Mapping[str, float]) -> str:
    lines = [title, f"  {'metric':<8} {'Earmark':>13} {'aac-metrics':>13} {'|diff|':>9}"]
    for name in aac.COMPARED:
        mine = float(ours[name] or 0.0)
        lines.append(
            f"  {name:<8} {mine:13.10f} {theirs[name]:13.10f} {abs(mine - theirs[name]):9.1e}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=int, default=1000, help="SynthScenes training scenes")
    parser.add_argument("--test", type=int, default=975, help="SynthScenes test scenes")
    parser.add_argument("--fixture", type=Path, help="write the SynthScenes 1NN files here")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    why = aac.unavailable()
    if why:
        sys.exit(why)
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    print(
        f"machine: {platform.machine()}, Python {platform.python_version()}, "
        f"{java.splitlines()[0]}, pycocoevalcap {evaluation_java.package_version()}, "
        f"aac-metrics {aac.version()}"
    )

    references = read_references(SHARED / "audiocaps" / "test.csv", fmt="audiocaps")
    keys = list(references)
    wrong_clip = {key: references[keys[(i + 1) % len(keys)]][0] for i, key in enumerate(keys)}
    started = time.perf_counter()
    nn_predictions, nn_references = synthscenes_1nn(args.train, args.test)
    print(
        f"SynthScenes 1NN: {args.train} training scenes, {args.test} test scenes, "
        f"generated and retrieved in {time.perf_counter() - started:.1f} s"
    )
    if args.fixture:
        write_fixture(args.fixture, nn_predictions, nn_references)

    rounds = aac.human_rounds(references)
    sets = {
        "SynthScenes 1NN retrieval": (nn_predictions, nn_references),
        "AudioCaps test, wrong-clip captions": (wrong_clip, references),
    }
    jobs = [*rounds, *(aac.prediction_job(p, r) for p, r in sets.values())]
    folder = Path(tempfile.mkdtemp(prefix="earmark-crosscheck-"))
    kit = evaluation_java.toolkit(folder / "cache")
    started = time.perf_counter()
    run = aac.AacMetricsRun(jobs, kit=kit, folder=folder / "aac")

    meteor = evaluation_java.MeteorProcess(kit=kit)
    ours_started = time.perf_counter()
    bound = evaluation.human_upper_bound(
        references=references, metrics=FAMILIES, kit=kit, meteor=meteor
    )
    evaluations = [
        evaluation.evaluate(predictions=p, references=r, metrics=FAMILIES, kit=kit, meteor=meteor)
        for p, r in sets.values()
    ]
    ours_seconds = time.perf_counter() - ours_started
    meteor.close()
    theirs = run.result()
    theirs_seconds = time.perf_counter() - started
    per_job = ", ".join(f"{job['seconds']:.1f}" for job in theirs)
    print(
        f"Earmark: {ours_seconds:.1f} s (one METEOR JVM); aac-metrics: {theirs_seconds:.1f} s "
        f"alongside (a METEOR JVM per scoring, 2 at a time; per scoring {per_job} s)"
    )

    figures: dict[str, Any] = {"aac_metrics": aac.version()}
    round_scores = [job["corpus"] for job in theirs[: len(rounds)]]
    their_bound = {
        name: sum(r[name] for r in round_scores) / len(round_scores) for name in aac.COMPARED
    }
    bound_rounds = largest_difference(bound.rounds, round_scores)
    bound_mean = largest_difference([bound.scores], [their_bound])
    print()
    print(table(f"AudioCaps test human bound ({bound.clips} clips, 5 rounds)", bound.scores,
                their_bound))  # fmt: skip
    print(f"  largest |diff|: mean {bound_mean:.1e}, per round {bound_rounds:.1e}")
    figures["human_bound"] = {
        "earmark": bound.scores, "aac_metrics": their_bound,
        "max_abs_diff_mean": bound_mean, "max_abs_diff_rounds": bound_rounds,
    }  # fmt: skip
    overall = max(bound_mean, bound_rounds)
    for (title, (_, refs)), ours, job in zip(
        sets.items(), evaluations, theirs[len(rounds) :], strict=True
    ):
        corpus = largest_difference([ours.scores], [job["corpus"]])
        per_clip = max(
            abs(ours.per_clip[key][name] - job["per_clip"][name][i])
            for i, key in enumerate(refs)
            for name in aac.COMPARED
        )
        print()
        print(table(f"{title} ({len(refs)} clips)", ours.scores, job["corpus"]))
        print(f"  largest |diff|: corpus {corpus:.1e}, per clip {per_clip:.1e}")
        figures[title] = {
            "earmark": ours.scores, "aac_metrics": job["corpus"],
            "max_abs_diff_corpus": corpus, "max_abs_diff_per_clip": per_clip,
        }  # fmt: skip
        overall = max(overall, corpus, per_clip)
    print(f"\nlargest |diff| of all: {overall:.1e} (required: at most 1e-4)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
