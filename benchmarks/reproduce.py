"""Reproduction: every captioner family trained with its paper's default recipe on one
SynthScenes corpus, scored on its test split next to 1-nearest-neighbour retrieval, with the
papers' orderings beside ours.

Usage: .venv/bin/python benchmarks/reproduce.py [--train 2000] [--val 200] [--test 200]
       [--epochs N] [--models nn,lstm,...] [--preset small] [--device auto]
       [--frames-per-second F] [--threads N] [--results benchmarks/RESULTS.md | --no-results]

Each model gets the config a run queued from the web page gets (`modeling.services.run_plan`:
its recipe's training stages, vocabulary, input features, decoding, and the adaptations a run
makes), sized by `--preset`; `--epochs N` scales every stage of each recipe to N caption
epochs (`modeling.ml.presets.scaled_epochs`), as `manage.py train --epochs` does. Features are
computed once per front end and shared by the models that read it; `--frames-per-second`
overrides every front end's hop (CPU runs: LSTMs over 1,000 frames are slow on 2 cores), and
scales the SpecAugment time masks with it so that they cover the same seconds. Validation
(greedy, CIDEr-D, every epoch) picks the checkpoint that is scored on test with the recipe's
beam.

The table (markdown) is printed and appended to `--results` under the machine's name:
the epochs of each stage and the optimisation steps, the epoch of the best validation (caption
and self-critical epochs), BLEU-4, METEOR, ROUGE-L, CIDEr-D on test, training
clip-captions/s (caption epochs only, validation excluded), beam clips/s, peak memory (CUDA:
allocated, per model; CPU: the process's peak RSS so far) and, on CUDA, the GPU utilisation
sampled during training (nvidia-smi). On CUDA the trainer runs under bf16 autocast
(train.amp).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from benchmarks import captioning

ALL_MODELS = ("nn", "lstm", "tempatt", "topdown", "act", "bilstm", "vact", "maac", "crossmodal")
METRICS = ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr-D")
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


@dataclass(frozen=True)
class Ordering:
    """A ranking a paper reports (best first), checked on our test CIDEr-D."""

    source: str
    models: tuple[str, ...]


PAPER_ORDERINGS = (
    Ordering("AudioCaps (Kim et al. 2019), Table 3", ("topdown", "tempatt", "lstm", "nn")),
    Ordering("V-ACT (Liu et al. 2023): audio-visual over audio only", ("vact", "act")),
)


@dataclass
class Row:
    model: str
    recipe: str
    epochs: str  # stages run, e.g. "2+5+3"
    steps: int  # optimisation steps, every stage
    best_epoch: int | None
    validated_epochs: int  # caption and self-critical epochs (pre-training is not validated)
    scores: dict[str, float]
    train_clips_per_s: float | None
    beam: int
    beam_clips_per_s: float
    peak_memory_mb: float
    gpu_utilisation: float | None
    example: str


class GpuUtilisation:
    """Mean GPU utilisation (%) sampled every `interval` s by nvidia-smi while it runs;
    None where there is no nvidia-smi (or no CUDA device)."""

    def __init__(self, device: torch.device, interval: float = 0.5) -> None:
        self.index = device.index or 0
        self.interval = interval
        self.samples: list[float] = []
        self.enabled = device.type == "cuda" and shutil.which("nvidia-smi") is not None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        command = ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                   "-i", str(self.index)]  # fmt: skip
        while not self._stop.wait(self.interval):
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode == 0 and done.stdout.strip():
                self.samples.append(float(done.stdout.split()[0]))

    def __enter__(self) -> GpuUtilisation:
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._stop.set()
            self._thread.join()

    @property
    def mean(self) -> float | None:
        return sum(self.samples) / len(self.samples) if self.samples else None


def _django() -> None:
    """run_plan reads settings (the weights folder); no database is touched."""
    from django.conf import settings

    if settings.configured:  # e.g. under pytest
        return
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "earmark.settings")
    os.environ.setdefault("DEBUG", "1")  # the dev SECRET_KEY: nothing is served or signed
    os.environ.setdefault("EARMARK_VAR_DIR", tempfile.mkdtemp(prefix="earmark-reproduce-"))
    import django

    django.setup()


def plan(
    name: str, *, preset: str, epochs: int | None, frames_per_second: float | None,
    device: str, video_fps: float, video_size: int,
) -> tuple[Any, Any, dict[str, Any]]:  # fmt: skip
    """(RunConfig, FeatureConfig, recipe record) of a run of `name` as the app plans it."""
    from modeling.ml.features import FeatureConfig, feature_preset
    from modeling.ml.presets import default_recipe
    from modeling.ml.registry import run_config_from_dict, uses_video
    from modeling.planning import run_plan

    recipe = default_recipe(name)
    overrides = [f"train.device={device}"]
    if frames_per_second:
        front_end = feature_preset(recipe.features)
        factor = frames_per_second / front_end.frames_per_second
        train = recipe.train_config()
        overrides += [
            f"features.hop_length={round(front_end.sample_rate / frames_per_second)}",
            f"train.spec_time_mask={max(1, round(train.spec_time_mask * factor))}",
            f"train.spec_pp_time_mask={max(1, round(train.spec_pp_time_mask * factor))}",
        ]
    if uses_video(name):
        overrides += [f"video.fps={video_fps}", f"video.size={video_size}"]
    planned = run_plan(model_name=name, preset=preset, overrides=overrides, epochs=epochs)
    run = run_config_from_dict(planned.config["run"])
    return run, FeatureConfig.from_dict(planned.config["features"]), planned.recipe


def peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def train_and_score(
    name: str, run: Any, feature_config: Any, *, recipe: str, splits: captioning.Splits,
    store: captioning.FeatureStore, videos: captioning.PerSplit | None,
    device: torch.device,
) -> Row:  # fmt: skip
    from corpus.evaluation import evaluate
    from modeling.ml.checkpoint import load_checkpoint
    from modeling.ml.cider import CiderD
    from modeling.ml.train_state import CAPTION
    from modeling.ml.trainer import train
    from modeling.ml.vocab import Vocabulary, tokenize

    features = store.get(feature_config)
    vocab = Vocabulary.build(
        [c for s in splits["train"] for c in s.captions],
        min_count=run.vocab.min_count,
        max_length=run.vocab.max_length,
    )
    attributes = captioning.retrieved_attributes(splits, features, vocab)
    keywords = None
    if name == "maac":
        found, keywords = captioning.keyword_targets(
            splits["train"], run.model.keyword_targets_size()
        )
        run = dataclasses.replace(run, model=run.model.with_keywords_found(found))
    if hasattr(run.model, "max_frames"):  # the ACT family and the AV captioner
        longest = max(f.shape[0] for f in features["train"]) + 8
        run = dataclasses.replace(run, model=dataclasses.replace(run.model, max_frames=longest))
    clips = {
        split: captioning.ClipInputs(
            features[split],
            attributes[split],
            videos[split] if videos else None,
            keywords if split == "train" else None,
        )
        for split in captioning.SPLITS
    }
    captions = {split: [s.captions for s in scenes] for split, scenes in splits.items()}
    items = {
        split: clips[split].caption_items(captions[split], vocab) for split in ("train", "val")
    }
    refs = {split: captioning.references(splits[split]) for split in ("val", "test")}
    validation_seconds = 0.0
    watched = run.train.plateau_metric

    def score(model: Any) -> float | dict[str, float]:
        nonlocal validation_seconds
        started = time.perf_counter()
        predictions = captioning.decode(model, vocab, clips["val"], beam=1, device=device)
        got = evaluate(predictions=predictions, references=refs["val"],
                       metrics=["cider", "bleu"] if watched else ["cider"]).scores  # fmt: skip
        validation_seconds += time.perf_counter() - started
        cider = float(got["CIDEr-D"] or 0.0)
        return {"score": cider, watched: float(got[watched] or 0.0)} if watched else cider

    reward = CiderD({str(i): [tokenize(c) for c in s.captions]
                     for i, s in enumerate(splits["train"])})  # fmt: skip

    def reward_fn(tokens: list[list[int]], clip_ids: list[str]) -> list[float]:
        return reward.scores([vocab.decode(c).split() for c in tokens], clip_ids)

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    with tempfile.TemporaryDirectory() as out, GpuUtilisation(device) as gpu:
        result = train(
            run=run, vocab=vocab, train_items=items["train"], out_dir=out,
            val_items=items["val"], score_fn=score, feature_config=feature_config,
            reward_fn=reward_fn if run.train.scst_epochs else None,
        )  # fmt: skip
        best = load_checkpoint(result.best_checkpoint or result.last_checkpoint,
                               map_location=device)  # fmt: skip
    model = best.model.to(device)
    model.prepare(items["train"])
    beam = run.decoding.beam_size
    started = time.perf_counter()
    predictions = captioning.decode(model, vocab, clips["test"], beam=beam, device=device)
    beam_rate = len(predictions) / (time.perf_counter() - started)
    scores = evaluate(predictions=predictions, references=refs["test"],
                      metrics=["bleu", "meteor", "rouge", "cider"]).scores  # fmt: skip
    caption_rows = [r for r in result.history if r["stage"] == CAPTION]
    train_seconds = sum(r["seconds"] for r in caption_rows) - validation_seconds
    # the checkpoint scored on test: the first best validation, caption or self-critical
    validated = [r for r in result.history if r["score"] is not None]
    best_row = max(validated, key=lambda r: r["score"]) if validated else None
    stages: dict[str, int] = {}
    for r in result.history:
        stages[r["stage"]] = stages.get(r["stage"], 0) + 1
    return Row(
        model=name,
        recipe=recipe,
        epochs="+".join(str(n) for n in stages.values()) or "0",
        best_epoch=None if best_row is None else validated.index(best_row) + 1,
        validated_epochs=len(validated),
        steps=result.steps,
        scores={k: float(scores.get(k) or 0.0) for k in METRICS},
        train_clips_per_s=len(items["train"]) * len(caption_rows) / train_seconds
        if caption_rows and train_seconds > 0
        else None,
        beam=beam,
        beam_clips_per_s=beam_rate,
        peak_memory_mb=peak_memory_mb(device),
        gpu_utilisation=gpu.mean,
        example=predictions["0"],
    )


def _figure(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(rows: Sequence[Row], device: torch.device) -> str:
    memory = "GPU peak MB" if device.type == "cuda" else "peak RSS MB"
    lines = [
        f"| model | recipe | epochs | steps | best val epoch | {' | '.join(METRICS)} "
        f"| train clips/s | beam | beam clips/s | {memory} | GPU util % |",
        "|---|---|---|---|---|" + "---|" * len(METRICS) + "---|---|---|---|---|",
    ]
    for r in rows:
        best = "-" if r.best_epoch is None else f"{r.best_epoch} of {r.validated_epochs}"
        lines.append(
            f"| {r.model} | {r.recipe} | {r.epochs} | {r.steps} | {best} | "
            + " | ".join(f"{r.scores[m]:.3f}" for m in METRICS)
            + f" | {_figure(r.train_clips_per_s)} | {r.beam} | {r.beam_clips_per_s:.0f} "
            f"| {r.peak_memory_mb:.0f} | {_figure(r.gpu_utilisation)} |"
        )
    return "\n".join(lines)


def _why_behind(row: Row) -> str:
    """What the run itself says about a model that ranks below where its paper puts it."""
    if row.best_epoch is not None and row.best_epoch == row.validated_epochs:
        return (
            f"{row.model} was still improving at its last epoch ({row.validated_epochs}, "
            f"{row.steps} steps)"
        )
    if row.best_epoch is not None:
        return (
            f"{row.model} peaked at epoch {row.best_epoch} of {row.validated_epochs} "
            f"({row.steps} steps)"
        )
    return f"{row.model} was not validated"


def orderings(rows: Sequence[Row]) -> str:
    """The papers' orderings against ours (test CIDEr-D), and every learned model against
    1NN retrieval, each marked holds / differs with what the run says about the laggard."""
    by_name = {r.model: r for r in rows}
    cider = {name: r.scores["CIDEr-D"] for name, r in by_name.items()}
    lines = ["| claim | paper | ours (CIDEr-D) | |", "|---|---|---|---|"]
    for ordering in PAPER_ORDERINGS:
        present = [m for m in ordering.models if m in cider]
        if len(present) < 2:
            continue
        ours = sorted(present, key=lambda m: -cider[m])
        paper = " > ".join(present)
        shown = " > ".join(f"{m} {cider[m]:.3f}" for m in ours)
        behind = [
            m for i, m in enumerate(present) if any(cider[m] < cider[n] for n in present[i + 1 :])
        ]
        verdict = (
            "holds"
            if not behind
            else "differs: " + "; ".join(_why_behind(by_name[m]) for m in behind)
        )
        lines.append(f"| {ordering.source} | {paper} | {shown} | {verdict} |")
    if "nn" in cider:
        for r in rows:
            if r.model == "nn":
                continue
            beats = r.scores["CIDEr-D"] > cider["nn"]
            verdict = "holds" if beats else "misses: " + _why_behind(r)
            lines.append(
                f"| learned model beats 1NN | {r.model} > nn | {r.scores['CIDEr-D']:.3f} vs "
                f"{cider['nn']:.3f} | {verdict} |"
            )
    return "\n".join(lines)


def machine(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (CUDA, bf16 autocast)"
    return (
        f"{platform.machine()} CPU, {os.cpu_count()} cores, {torch.get_num_threads()} torch "
        f"threads, load average {os.getloadavg()[0]:.1f} at the end"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=int, default=2000, help="train clips (2 captions)")
    parser.add_argument("--val", type=int, default=200, help="validation clips (5 captions)")
    parser.add_argument("--test", type=int, default=200, help="test clips (5 captions)")
    parser.add_argument("--epochs", type=int, help="scale every recipe to this many caption epochs")
    parser.add_argument("--models", default=",".join(ALL_MODELS))
    parser.add_argument("--preset", default="small", help="model sizes: paper, small, tiny")
    parser.add_argument("--device", default="auto")
    parser.add_argument(
        "--frames-per-second", type=float, help="override every front end's frame rate"
    )
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    parser.add_argument("--video-fps", type=float, default=2.0)
    parser.add_argument("--video-size", type=int, default=24, help="frame side, a multiple of 3")
    parser.add_argument("--results", type=Path, default=RESULTS, help="markdown file to append to")
    parser.add_argument("--no-results", action="store_true", help="print only")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> str:
    """Runs the reproduction and returns the markdown section it printed (and appended)."""
    args = parse_args(argv)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = sorted(set(names) - set(ALL_MODELS))
    if unknown:
        raise SystemExit(f"--models: unknown {', '.join(unknown)}; known: {', '.join(ALL_MODELS)}")
    if args.threads:
        # on a busy 2-core machine one thread avoids intra-op threads spinning on each other
        torch.set_num_threads(args.threads)
    _django()
    from modeling.ml.registry import uses_video
    from modeling.ml.runtime import pick_device

    device = pick_device(args.device)
    started = time.perf_counter()
    splits = captioning.generate_splits(args.train, args.val, args.test)
    print(f"generated {args.train}/{args.val}/{args.test} scenes in "
          f"{time.perf_counter() - started:.1f} s", flush=True)  # fmt: skip
    store = captioning.FeatureStore(splits)
    videos = None
    if any(uses_video(n) for n in names):
        videos = captioning.render_videos(splits, fps=args.video_fps, size=args.video_size)
    rows = []
    for name in names:
        run, feature_config, record = plan(
            name, preset=args.preset, epochs=args.epochs, device=args.device,
            frames_per_second=args.frames_per_second, video_fps=args.video_fps,
            video_size=args.video_size,
        )  # fmt: skip
        paper = str(record.get("paper", name)).split(" (")[0]
        print(f"{name}: {record.get('summary', '')}", flush=True)
        started = time.perf_counter()
        row = train_and_score(
            name, run, feature_config, recipe=paper, splits=splits, store=store,
            videos=videos if uses_video(name) else None, device=device,
        )  # fmt: skip
        rows.append(row)
        print(
            f"{name}: CIDEr-D {row.scores['CIDEr-D']:.3f} after {row.epochs} epochs in "
            f"{time.perf_counter() - started:.0f} s; test clip 0: {row.example!r} "
            f"(reference: {splits['test'][0].captions[0]!r})",
            flush=True,
        )
        print(table([row], device).splitlines()[-1], flush=True)  # a row survives a cut-off run
    command = "benchmarks/reproduce.py " + " ".join(argv if argv is not None else sys.argv[1:])
    section = "\n".join([
        f"## {datetime.date.today().isoformat()} — reproduction on SynthScenes "
        f"(`benchmarks/reproduce.py`)",
        "",
        f"Machine: {machine(device)}; torch {torch.__version__}, Python "
        f"{platform.python_version()}. Command: `{command.strip()}`. Corpus: SynthScenes seed "
        f"{captioning.SEED}, {args.train} train clips (2 captions), {args.val} val and "
        f"{args.test} test clips (5 references); `{args.preset}` model sizes; features computed "
        f"once per front end ({store.seconds:.0f} s).",
        "",
        table(rows, device),
        "",
        "The papers' orderings next to ours:",
        "",
        orderings(rows),
        "",
    ])  # fmt: skip
    print("\n" + section)
    if not args.no_results:
        with args.results.open("a", encoding="utf-8") as out:
            out.write("\n" + section)
    return section


if __name__ == "__main__":
    main()
