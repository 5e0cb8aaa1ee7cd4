"""Train every first-wave captioner on SynthScenes and score it: BLEU-4, METEOR, CIDEr-D on
the test split, seconds per epoch, and (on CUDA) training clips/s, peak GPU memory and
beam-3 inference clips/s. The audio-visual and keyword captioners train on SynthScenes with
video (see "Audio-visual models" below).

Usage: .venv/bin/python benchmarks/train_synthscenes.py [--train 2000] [--val 200]
       [--test 200] [--models nn,lstm,tempatt,topdown,act,bilstm] [--epochs 15]
       [--preset small] [--hop 1280] [--device auto] [--workers N] [--json OUT]

Pure PyTorch + pycocoevalcap (no Django, no database): scenes are generated (seed 2026) by
`--workers` processes that keep only their features and videos, log-mels computed once (64
mels at 32 kHz; the hop is a flag because LSTMs over 500 frames are slow on 2 CPU cores), the
vocabulary built on the training captions, each model trained with its paper's recipe where
MODELS.md gives one and early-stopped on validation CIDEr-D, then decoded with beam 3 on the
test split. TopDown gets its attribute words from 1NN retrieval (the labels of the nearest
training clip), the paper's realistic setting. Train clips carry 2 captions, val/test clips 5.

Audio-visual models: vact (AdaAVA-audio), vact_video (AdaAVA-video), vact_concat,
video_only and crossmodal / crossmodal_mbp (the AV captioner without / with MBP) read each
scene's video as raw frames (--video-fps, --video-size; rendered directly, not through MP4)
through their trainable frame CNN; maac / maac_rl pre-train their keyword encoder for
--pretrain-epochs on spaCy keywords of the training captions, and maac_rl then fine-tunes on
CIDEr-D (self-critical, --scst-epochs) from its best cross-entropy weights.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from benchmarks import captioning
from corpus.evaluation import evaluate
from modeling.ml.checkpoint import load_checkpoint
from modeling.ml.cider import CiderD
from modeling.ml.config import ACTConfig, RunConfig, VocabConfig
from modeling.ml.config_av import AVConfig, CaptionLengthConfig, VACTConfig, VideoCaptionerConfig
from modeling.ml.features import feature_preset
from modeling.ml.models.base import Captioner
from modeling.ml.presets import TRAIN_PRESETS, model_preset
from modeling.ml.registry import uses_video
from modeling.ml.runtime import pick_device
from modeling.ml.trainer import train
from modeling.ml.vocab import Vocabulary, tokenize

# the paper recipes (modeling.ml.presets.TRAIN_PRESETS) with epochs from the command line
RECIPES = {"nn": "audiocaps", "lstm": "audiocaps", "tempatt": "audiocaps",
           "topdown": "audiocaps", "act": "act", "bilstm": "bilstm",
           "vact": "act", "vact_video": "act", "vact_concat": "act", "video_only": "act",
           "crossmodal": "act", "crossmodal_mbp": "act", "maac": "maac",
           "maac_rl": "maac"}  # fmt: skip
# benchmark name -> registry name, for the variants that differ by a setting only
VARIANTS = {"crossmodal_mbp": "crossmodal", "maac_rl": "maac"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=int, default=2000)
    parser.add_argument("--val", type=int, default=200)
    parser.add_argument("--test", type=int, default=200)
    parser.add_argument("--models", default="nn,lstm,tempatt,topdown,act,bilstm")
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--preset", default="small")
    parser.add_argument("--hop", type=int, default=1280, help="log-mel hop in samples at 32 kHz")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--threads", type=int, default=0, help="torch CPU threads (0: torch's default)"
    )
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1,
        help="processes generating the corpus and its features (default: one per core)",
    )  # fmt: skip
    parser.add_argument("--video-fps", type=float, default=2.0)
    parser.add_argument("--video-size", type=int, default=24, help="a multiple of 3")
    parser.add_argument(
        "--pretrain-epochs", type=int, default=5,
        help="MAAC's keyword encoder; crossmodal_mbp's MBP pre-training",
    )  # fmt: skip
    parser.add_argument("--scst-epochs", type=int, default=5, help="maac_rl's SCST stage")
    args = parser.parse_args()
    names = args.models.split(",")
    if args.workers < 1:
        raise SystemExit(f"--workers: must be at least 1, got {args.workers}")
    if args.threads:
        # on a busy 2-core machine one thread avoids intra-op threads spinning on each other
        torch.set_num_threads(args.threads)

    device = pick_device(args.device)
    print(f"machine: {platform.machine()}, {torch.get_num_threads()} torch threads, "
          f"device {device}" + (f" ({torch.cuda.get_device_name(device)})"
                                if device.type == "cuda" else ""))  # fmt: skip
    config = dataclasses.replace(feature_preset("act"), hop_length=args.hop)
    video = None
    if any(uses_video(VARIANTS.get(name, name)) for name in names):
        video = captioning.VideoSpec(fps=args.video_fps, size=args.video_size)
    corpus = captioning.generate_corpus(
        args.train, args.val, args.test, feature_configs=[config], video=video,
        workers=args.workers,
    )  # fmt: skip
    sets, feats, videos = corpus.splits, corpus.features.get(config), corpus.videos
    print(f"generated {sum(map(len, sets.values()))} scenes in {corpus.seconds:.1f} s "
          f"({args.workers} worker(s))")  # fmt: skip
    if videos is not None:
        print(f"video {videos['train'][0].shape[0]} frames of {args.video_size}x"
              f"{args.video_size} per clip")  # fmt: skip
    vocab = Vocabulary.build([c for s in sets["train"] for c in s.captions], max_length=30)
    print(f"vocabulary: {len(vocab)} words")
    keywords = None
    keyword_count = 0
    if any(VARIANTS.get(name, name) == "maac" for name in names):
        keyword_count, keywords = captioning.keyword_targets(
            sets["train"], model_preset("maac", args.preset).keyword_targets_size()
        )
    reward = CiderD({str(i): [tokenize(c) for c in s.captions]
                     for i, s in enumerate(sets["train"])})  # fmt: skip
    attrs = captioning.retrieved_attributes(sets, feats, vocab)
    clips = {
        split: captioning.ClipInputs(
            feats[split],
            attrs[split],
            videos[split] if videos else None,
            keywords if split == "train" else None,
        )
        for split in sets
    }
    data = {
        split: clips[split].caption_items([s.captions for s in sets[split]], vocab)
        for split in sets
    }
    references = {split: captioning.references(sets[split]) for split in ("val", "test")}

    def decode(model: Captioner, split: str, beam: int) -> dict[str, str]:
        return captioning.decode(model, vocab, clips[split], beam=beam, device=device)

    def reward_fn(captions: list[list[int]], clip_ids: list[str]) -> list[float]:
        return reward.scores([vocab.decode(c).split() for c in captions], clip_ids)

    results = []
    for name in names:
        registered = VARIANTS.get(name, name)
        model_config = dataclasses.replace(
            model_preset(registered, args.preset), feature_dim=config.n_mels
        )
        longest = max(f.shape[0] for f in feats["train"]) + 8
        caption_room = vocab.max_length + 2
        if isinstance(model_config, CaptionLengthConfig):
            model_config = dataclasses.replace(
                model_config,
                max_caption_length=max(model_config.max_caption_length, caption_room),
            )
        if isinstance(model_config, ACTConfig):  # act and the vact variants
            model_config = dataclasses.replace(model_config, max_frames=longest)
        if uses_video(registered):
            assert isinstance(model_config, VideoCaptionerConfig)
            assert videos is not None
            frames = max(v.shape[0] for v in videos["train"])
            model_config = dataclasses.replace(
                model_config, video_frame_size=args.video_size, video_dim=128
            )
            if isinstance(model_config, VACTConfig):
                model_config = dataclasses.replace(model_config, max_video_frames=frames)
            else:
                model_config = dataclasses.replace(model_config, max_video_tokens=frames)
        if name == "crossmodal_mbp":
            assert isinstance(model_config, AVConfig)
            model_config = dataclasses.replace(model_config, mbp=True)
        if registered == "maac":
            model_config = model_config.with_keywords_found(keyword_count)
        recipe = RECIPES[name]
        train_config = dataclasses.replace(
            TRAIN_PRESETS[recipe], epochs=args.epochs, batch_size=args.batch_size,
            device=args.device, early_stopping_patience=4, log_every_steps=50,
        )  # fmt: skip
        if registered == "maac":
            # the trainable CNN backbone has no pretrained weights to keep frozen
            train_config = dataclasses.replace(
                train_config, pretrain_frozen_epochs=0, pretrain_epochs=args.pretrain_epochs,
                scst_epochs=args.scst_epochs if name == "maac_rl" else 0,
            )  # fmt: skip
        if name == "crossmodal_mbp":  # MBP is a pre-training loss; fine-tuning follows
            train_config = dataclasses.replace(train_config, pretrain_epochs=args.pretrain_epochs)
        run = RunConfig(
            model_name=registered, model=model_config, vocab=VocabConfig(), train=train_config
        )

        def score(
            model: Captioner, watched: str = train_config.plateau_metric
        ) -> float | dict[str, float]:
            # the BiLSTM's plateaus watch BLEU-4 (train.plateau_metric)
            got = evaluate(predictions=decode(model, "val", 1), references=references["val"],
                           metrics=["cider", "bleu"] if watched else ["cider"])  # fmt: skip
            cider = float(got.scores["CIDEr-D"] or 0.0)
            if not watched:
                return cider
            return {"score": cider, watched: float(got.scores[watched] or 0.0)}

        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        with tempfile.TemporaryDirectory() as out:
            started = time.perf_counter()
            result = train(
                run=run,
                vocab=vocab,
                train_items=data["train"],
                out_dir=out,
                val_items=data["val"],
                score_fn=score,
                feature_config=config,
                reward_fn=reward_fn if train_config.scst_epochs else None,
            )
            train_seconds = time.perf_counter() - started
            best = load_checkpoint(result.best_checkpoint or result.last_checkpoint,
                                   map_location=device)  # fmt: skip
        model = best.model.to(device)
        model.prepare(data["train"])
        started = time.perf_counter()
        predictions = decode(model, "test", 3)
        infer = len(predictions) / (time.perf_counter() - started)
        scores = evaluate(predictions=predictions, references=references["test"],
                          metrics=["bleu", "meteor", "rouge", "cider"]).scores  # fmt: skip
        epochs = len(result.history)
        epoch_seconds = [row["seconds"] for row in result.history]
        row = {
            "model": name,
            "epochs": epochs,
            "stopped": result.stopped,
            "seconds_per_epoch": sum(epoch_seconds) / max(1, len(epoch_seconds)),
            "train_seconds": train_seconds,
            "train_clips_per_s": len(data["train"]) * epochs / max(1e-9, sum(epoch_seconds)),
            "beam3_clips_per_s": infer,
            "gpu_peak_mb": torch.cuda.max_memory_allocated(device) / 2**20
            if device.type == "cuda"
            else None,
            **{k: scores.get(k) for k in ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr-D")},
            "example": predictions["0"],
        }
        results.append(row)
        print(
            f"{name:14} BLEU-4 {row['BLEU-4']:.3f}  METEOR {row['METEOR']:.3f}  "
            f"CIDEr-D {row['CIDEr-D']:.3f}  {row['seconds_per_epoch']:.1f} s/epoch x {epochs} "
            f"({result.stopped}), train {row['train_clips_per_s']:.0f} captions/s, "
            f"beam-3 {infer:.0f} clips/s"
            + (f", GPU peak {row['gpu_peak_mb']:.0f} MB" if row["gpu_peak_mb"] else ""),
            flush=True,
        )
        print(
            f"         test clip 0: {row['example']!r} (reference: {sets['test'][0].captions[0]!r})"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
