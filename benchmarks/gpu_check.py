"""The GPU check: one command for a session lent a GPU machine (benchmarks/gpu_check.sh runs
it). It builds a SynthScenes corpus with worker processes, trains ACT (the paper's size and
recipe) for one epoch in bfloat16 autocast, decodes held-out clips with beam 3, samples the
GPU's utilisation with nvidia-smi in the background during both, and writes a table ready
for benchmarks/RESULTS.md, each figure beside its target, to the output folder and stdout.

Usage: benchmarks/gpu_check.sh [--dry-run] [--out DIR] [--train N] [--decode N]
       [--workers N] [--batch-size N]

The machine it is written for is bare: system python3 with its own torch (2.11, Python 3.12),
numpy and torchaudio, no network, and only the repository checkout carried (64 MiB). So this
path is torch-only: no Django, no database, no soundfile (scenes never touch a file; features
come from the waveforms in memory), no metrics toolkit (speed is measured, not caption
quality). tests/benchmarks/test_gpu_check.py runs the dry run with those packages made
unimportable, so a dependency creeping in fails CI, not the lent machine.

`--dry-run` takes the same code path on CPU at tiny sizes (the tiny ACT, 48 clips), in
seconds: what CI runs so the check cannot rot. Figures from a dry run are not GPU figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

import synthscenes
from benchmarks import captioning
from benchmarks._measure import GpuUtilisation
from modeling.ml.checkpoint import load_checkpoint
from modeling.ml.config import ACTConfig, RunConfig, VocabConfig
from modeling.ml.config_features import FeatureConfig, feature_preset
from modeling.ml.presets import model_preset, scaled_epochs, train_preset
from modeling.ml.trainer import train
from modeling.ml.vocab import Vocabulary


@dataclasses.dataclass(frozen=True)
class Sizes:
    train: int  # training clips (2 captions each: twice as many caption items)
    decode: int  # held-out clips decoded with beam 3
    workers: int  # corpus worker processes
    preset: str  # ACT's model size


FULL = Sizes(train=50_000, decode=1_000, workers=16, preset="paper")
DRY = Sizes(train=24, decode=8, workers=2, preset="tiny")
# what the figures should reach on one H100 (issue 30); the dry run prints them too
TARGET_EPOCH_SECONDS = 60.0
TARGET_BEAM3_CLIPS_PER_S = 200.0
TARGET_GPU_UTIL = 80.0
TARGET_TOTAL_SECONDS = 480.0  # the check's whole run, within a lent machine's budget
BEAM = 3
SAMPLE_SECONDS = 0.2  # how often nvidia-smi reads the GPU's utilisation


def _front_end(n_mels: int, max_frames: int) -> FeatureConfig:
    """ACT's log-mels with the model's mel bins, at ACT's hop or the least longer one whose
    10 s clip fits the model's frames (the tiny dry-run model reads 64)."""
    config = feature_preset("act")
    samples = synthscenes.SCENE_SECONDS * config.sample_rate
    hop = max(config.hop_length, math.ceil(samples / (max_frames - 1)))
    return dataclasses.replace(config, n_mels=n_mels, hop_length=hop)


def _amp_dtype(device: torch.device) -> str:
    """What the trainer's autocast uses (Trainer._amp_dtype): bfloat16 where the GPU has it."""
    if device.type != "cuda":
        return "none"
    return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _mark(target: float, value: float | None, *, below: bool, dry_run: bool) -> str:
    if dry_run:
        return "(dry run)"
    if value is None:
        return "n/a"
    met = value < target if below else value >= target
    return "met" if met else "missed"


def run_check(sizes: Sizes, *, device: torch.device, batch_size: int | None) -> dict:
    """Builds, trains, decodes and samples (see the module docstring); returns the figures."""
    started = time.perf_counter()
    model_config = model_preset("act", sizes.preset)
    assert isinstance(model_config, ACTConfig)
    config = _front_end(model_config.feature_dim, model_config.max_frames)
    corpus = captioning.generate_corpus(
        sizes.train, 0, sizes.decode, feature_configs=[config], workers=sizes.workers
    )
    features = corpus.features.get(config)
    scenes = corpus.splits
    vocab_config = VocabConfig()
    vocab = Vocabulary.build(
        [c for s in scenes["train"] for c in s.captions], max_length=vocab_config.max_length
    )
    # room for the longest caption kept, plus <bos> and <eos>, as modeling.planning gives it
    longest = vocab_config.max_length + 2
    model_config = dataclasses.replace(
        model_config, max_caption_length=max(model_config.max_caption_length, longest)
    )
    clips = {
        split: captioning.ClipInputs(features[split], [[] for _ in features[split]])
        for split in ("train", "test")
    }
    items = clips["train"].caption_items([s.captions for s in scenes["train"]], vocab)

    recipe = scaled_epochs(train_preset("act"), 1)
    train_config = dataclasses.replace(
        recipe,
        device=device.type,
        amp=True,  # bfloat16 autocast on a GPU that has it (the trainer's _amp_dtype)
        batch_size=batch_size or recipe.batch_size,
    )
    run = RunConfig(
        model_name="act",
        model=model_config,
        vocab=vocab_config,
        train=train_config,
    )
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as work:
        with GpuUtilisation(device, interval=SAMPLE_SECONDS) as train_util:
            result = train(
                run=run, vocab=vocab, train_items=items, out_dir=work, feature_config=config
            )
        epoch_seconds = float(result.history[0]["seconds"])
        model = load_checkpoint(result.last_checkpoint, map_location=device).model.to(device)
    model.prepare(items)
    parameters = sum(p.numel() for p in model.parameters())

    warm = captioning.ClipInputs(clips["test"].features[:8], clips["test"].attributes[:8])
    captioning.decode(model, vocab, warm, beam=BEAM, device=device)  # kernels, allocator
    _sync(device)
    with GpuUtilisation(device, interval=SAMPLE_SECONDS) as decode_util:
        decode_started = time.perf_counter()
        captions = captioning.decode(model, vocab, clips["test"], beam=BEAM, device=device)
        _sync(device)
        decode_seconds = time.perf_counter() - decode_started

    return {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "amp_dtype": "bfloat16"
        if device.type == "cuda" and torch.cuda.is_bf16_supported()
        else "none",
        "sizes": dataclasses.asdict(sizes),
        "batch_size": train_config.batch_size,
        "parameters": parameters,
        "corpus_clips": sizes.train + sizes.decode,
        "corpus_seconds": corpus.seconds,
        "caption_items": len(items),
        "steps": result.steps,
        "epoch_seconds": epoch_seconds,
        "train_items_per_s": len(items) / epoch_seconds,
        "train_loss": result.history[0]["train_loss"],
        "decode_clips": len(captions),
        "decode_seconds": decode_seconds,
        "beam3_clips_per_s": len(captions) / decode_seconds,
        "gpu_util_train": train_util.mean,
        "gpu_util_train_samples": train_util.samples,
        "gpu_util_decode": decode_util.mean,
        "gpu_util_decode_samples": decode_util.samples,
        "gpu_peak_mib": torch.cuda.max_memory_allocated(device) / 2**20
        if device.type == "cuda"
        else None,
        "example": captions.get("0", ""),
        "total_seconds": time.perf_counter() - started,
    }


def table(figures: dict, *, dry_run: bool) -> str:
    """The RESULTS.md table: each figure, its target where it has one, met or missed."""
    sizes = figures["sizes"]
    util = figures["gpu_util_train"]
    decode_util = figures["gpu_util_decode"]

    def pct(value: float | None) -> str:
        return "n/a (no nvidia-smi)" if value is None else f"{value:.0f} %"

    rows = [
        ("device", figures["device"], "", ""),
        (
            "corpus",
            f"{figures['corpus_clips']:,} SynthScenes clips, {sizes['workers']} workers: "
            f"{figures['corpus_seconds']:.1f} s",
            "",
            "",
        ),
        (
            f"ACT ({sizes['preset']}, {figures['parameters']:,} parameters) one "
            f"epoch, {sizes['train']:,} clips ({figures['caption_items']:,} captions), batch "
            f"{figures['batch_size']}, autocast {figures['amp_dtype']}",
            f"{figures['epoch_seconds']:.1f} s ({figures['train_items_per_s']:.0f} captions/s)",
            f"< {TARGET_EPOCH_SECONDS:.0f} s (H100)",
            _mark(TARGET_EPOCH_SECONDS, figures["epoch_seconds"], below=True, dry_run=dry_run),
        ),
        (
            f"beam-{BEAM} decoding, {figures['decode_clips']:,} clips",
            f"{figures['beam3_clips_per_s']:.0f} clips/s",
            f">= {TARGET_BEAM3_CLIPS_PER_S:.0f} clips/s",
            _mark(
                TARGET_BEAM3_CLIPS_PER_S, figures["beam3_clips_per_s"], below=False, dry_run=dry_run
            ),
        ),
        (
            "GPU utilisation while training (mean of nvidia-smi samples)",
            pct(util),
            f">= {TARGET_GPU_UTIL:.0f} %",
            _mark(TARGET_GPU_UTIL, util, below=False, dry_run=dry_run),
        ),
        ("GPU utilisation while decoding", pct(decode_util), "", ""),
        (
            "peak GPU memory",
            "n/a" if figures["gpu_peak_mib"] is None else f"{figures['gpu_peak_mib']:,.0f} MiB",
            "",
            "",
        ),
        (
            "whole check, wall clock",
            f"{figures['total_seconds']:.0f} s",
            f"<= {TARGET_TOTAL_SECONDS:.0f} s",
            _mark(TARGET_TOTAL_SECONDS, figures["total_seconds"], below=True, dry_run=dry_run),
        ),
    ]
    head = "dry run on CPU (tiny sizes; not GPU figures)" if dry_run else "GPU check"
    lines = [
        f"{head}: torch {figures['torch']}, Python {figures['python']}",
        "",
        "| what | figure | target | |",
        "|---|---|---|---|",
        *(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows),
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes (CI)")
    parser.add_argument("--out", type=Path, help="folder for the table (default $OUT)")
    parser.add_argument("--train", type=int, help="training clips")
    parser.add_argument("--decode", type=int, help="clips decoded with beam 3")
    parser.add_argument("--workers", type=int, help="corpus worker processes")
    parser.add_argument("--batch-size", type=int, help="default: ACT's recipe's")
    args = parser.parse_args(argv)
    base = DRY if args.dry_run else FULL
    sizes = Sizes(
        train=args.train or base.train,
        decode=args.decode or base.decode,
        workers=args.workers or base.workers,
        preset=base.preset,
    )
    if args.dry_run:
        device = torch.device("cpu")
    elif torch.cuda.is_available():
        device = torch.device("cuda")
    else:
        print("gpu_check: no CUDA device here; --dry-run runs the same path on CPU", flush=True)
        return 2
    out = args.out or Path(os.environ.get("OUT") or tempfile.mkdtemp(prefix="gpu-check-out-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"gpu_check: {sizes} on {device}, writing to {out}", flush=True)
    figures = run_check(sizes, device=device, batch_size=args.batch_size)
    text = table(figures, dry_run=args.dry_run)
    (out / "gpu_check.md").write_text(text)
    (out / "gpu_check.json").write_text(json.dumps(figures, indent=2, default=str) + "\n")
    print(text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
