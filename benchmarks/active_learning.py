"""Active learning on SynthScenes with oracle annotators: rounds of select -> annotate ->
retrain for each strategy, the validation CIDEr-D curve of each, how many captions each
needs to reach random's final score, and the precision/recall of the disagreement flags on
captions swapped between clips.

Usage: .venv/bin/python benchmarks/active_learning.py [--pool 480] [--val 100] [--initial 40]
       [--step 40] [--rounds 5] [--epochs 12] [--model lstm] [--preset small] [--hop 3200]
       [--strategies random,uncertainty,margin,committee,diversity] [--flag-clips 200]
       [--swap 0.1] [--json OUT]

Pure PyTorch + pycocoevalcap (no Django, no database), like train_synthscenes.py: scenes are
generated in memory (seed 2026), log-mels computed once. The oracle annotator reveals a
clip's reference captions (--captions-per-clip of them) when a strategy picks it. Every
strategy starts from the same random initial set; each round trains a fresh model on the
captions revealed so far (vocabulary from those captions only, fixed epochs, seed fixed),
scores it on the validation split (greedy decoding, pycocoevalcap CIDEr-D), decodes the
unlabelled pool with beam 3 and picks the next --step clips with active/scoring.rank —
the same function the app uses to order HITs. Committee members are the beam's hypotheses.

Flags: --flag-clips held-out clips with 5 references each; --swap of all their captions
are exchanged between random pairs of clips (a caption never lands on its own clip), then
every caption goes through active/scoring.caption_findings with the clip's other captions,
the final random-strategy model's beam-3 suggestion and its entropy, and the clip's
AudioSet label names as word hints. Precision/recall are reported per check and for the
checks the app turns on.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from active import scoring
from corpus.evaluation import evaluate
from modeling.ml import synthscenes
from modeling.ml.checkpoint import load_checkpoint
from modeling.ml.config import TRAIN_PRESETS, RunConfig, VocabConfig, model_preset
from modeling.ml.data import CaptionItem, collate
from modeling.ml.decoding import beam_search, greedy
from modeling.ml.features import extract, feature_preset
from modeling.ml.trainer import pick_device, to_device, train
from modeling.ml.vocab import BOS_ID, EOS_ID, Vocabulary, tokenize

SEED = 2026


def scenes(count: int, start: int, n_captions: int) -> list[synthscenes.Scene]:
    return list(synthscenes.generate_scenes(SEED, count, start=start, n_captions=n_captions))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", type=int, default=480)
    parser.add_argument("--val", type=int, default=100)
    parser.add_argument("--initial", type=int, default=40)
    parser.add_argument("--step", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--captions-per-clip", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--model", default="lstm")
    parser.add_argument("--preset", default="small")
    parser.add_argument("--hop", type=int, default=3200)
    parser.add_argument("--strategies", default="random,uncertainty,committee")
    parser.add_argument("--flag-clips", type=int, default=200)
    parser.add_argument("--swap", type=float, default=0.1)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    strategies = args.strategies.split(",")
    if strategies[0] != "random":
        strategies = ["random", *[s for s in strategies if s != "random"]]

    started_all = time.perf_counter()
    device = pick_device(args.device)
    print(
        f"machine: {platform.machine()}, {torch.get_num_threads()} torch threads, device {device}"
    )
    t = time.perf_counter()
    pool = scenes(args.pool, 0, args.captions_per_clip)
    val = scenes(args.val, args.pool, 5)
    held = scenes(args.flag_clips, args.pool + args.val, 5)
    print(f"generated {len(pool) + len(val) + len(held)} scenes in {time.perf_counter() - t:.1f} s")
    config = dataclasses.replace(feature_preset("act"), hop_length=args.hop)
    t = time.perf_counter()
    feats = {
        "pool": [extract(s.waveform, s.sample_rate, config) for s in pool],
        "val": [extract(s.waveform, s.sample_rate, config) for s in val],
        "held": [extract(s.waveform, s.sample_rate, config) for s in held],
    }
    print(f"log-mel {config.n_mels}x{feats['pool'][0].shape[0]} for all clips in "
          f"{time.perf_counter() - t:.1f} s")  # fmt: skip
    val_refs = {str(i): s.captions for i, s in enumerate(val)}

    def decode(model: Any, vocab: Vocabulary, features: list[Any], beam: int) -> list[list[Any]]:
        out: list[list[Any]] = []
        model.eval()
        with torch.no_grad():
            for start in range(0, len(features), 64):
                batch = collate([
                    CaptionItem(features=f, tokens=[BOS_ID, EOS_ID], clip_id=str(start + j))
                    for j, f in enumerate(features[start : start + 64])
                ])  # fmt: skip
                batch = to_device(batch, device)
                if beam == 1:
                    out.extend([h] for h in greedy(model, batch, max_length=vocab.max_length))
                else:
                    out.extend(
                        beam_search(model, batch, beam_size=beam, max_length=vocab.max_length)
                    )
        return out

    def fit(labelled: list[int]) -> tuple[Any, Vocabulary]:
        texts = [c for i in labelled for c in pool[i].captions]
        vocab = Vocabulary.build(texts, max_length=30)
        items = [
            CaptionItem(features=feats["pool"][i], tokens=vocab.encode(tokenize(c)), clip_id=str(i))
            for i in labelled
            for c in pool[i].captions
        ]
        model_config = dataclasses.replace(
            model_preset(args.model, args.preset), feature_dim=config.n_mels
        )
        train_config = dataclasses.replace(
            TRAIN_PRESETS["audiocaps"], epochs=args.epochs, batch_size=16, device=args.device,
            early_stopping_patience=None, log_every_steps=1000, seed=SEED,
        )  # fmt: skip
        run = RunConfig(model_name=args.model, model=model_config, vocab=VocabConfig(),
                        train=train_config)  # fmt: skip
        with tempfile.TemporaryDirectory() as out:
            result = train(run=run, vocab=vocab, train_items=items, out_dir=out,
                           feature_config=config)  # fmt: skip
            best = load_checkpoint(result.last_checkpoint, map_location=device)
        model = best.model.to(device)
        model.prepare(items)
        return model, vocab

    def val_cider(model: Any, vocab: Vocabulary) -> float:
        hyps = decode(model, vocab, feats["val"], 1)
        predictions = {str(i): (vocab.decode(h[0].tokens) if h else "") or "<empty>"
                       for i, h in enumerate(hyps)}  # fmt: skip
        return float(evaluate(predictions=predictions, references=val_refs,
                              metrics=["cider"]).scores["CIDEr-D"] or 0.0)  # fmt: skip

    rng = random.Random(SEED)
    initial = sorted(rng.sample(range(len(pool)), args.initial))
    mids_names = {e.mids[0]: e.label for s in pool for e in s.events if e.mids}
    curves: dict[str, list[dict[str, Any]]] = {}
    last_model: dict[str, tuple[Any, Vocabulary]] = {}
    for strategy in strategies:
        labelled = list(initial)
        curve = []
        for number in range(args.rounds + 1):
            t = time.perf_counter()
            model, vocab = fit(labelled)
            score = val_cider(model, vocab)
            captions = len(labelled) * args.captions_per_clip
            seconds = round(time.perf_counter() - t, 1)
            curve.append({"round": number, "clips": len(labelled), "captions": captions,
                          "value": round(score, 4), "seconds": seconds})  # fmt: skip
            print(f"{strategy:12} round {number}: {captions:5} captions, val CIDEr-D {score:.4f} "
                  f"({time.perf_counter() - t:.0f} s)", flush=True)  # fmt: skip
            if number == args.rounds:
                break
            unlabelled = [i for i in range(len(pool)) if i not in set(labelled)]
            evidence = []
            if strategy in ("uncertainty", "margin", "committee"):
                hyps = decode(model, vocab, [feats["pool"][i] for i in unlabelled], 3)
                for i, hs in zip(unlabelled, hyps, strict=True):
                    evidence.append(scoring.ClipEvidence(
                        key=i,
                        mean_entropy=hs[0].entropy if hs else None,
                        hypotheses=[{"text": vocab.decode(h.tokens), "score": h.score,
                                     "log_prob": h.log_prob} for h in hs],
                    ))  # fmt: skip
            else:
                evidence = [
                    scoring.ClipEvidence(key=i, labels=[mids_names.get(m, m) for m in pool[i].mids])
                    for i in unlabelled
                ]
            cider = None
            if strategy == "committee":
                cider = scoring.CiderD([scoring.committee_of(e) for e in evidence])
            covered: dict[str, int] = {}
            for i in labelled:
                for label in {mids_names.get(m, m) for m in pool[i].mids}:
                    covered[label] = covered.get(label, 0) + 1
            ranked = scoring.rank(strategy, evidence, cider=cider, covered=covered,
                                  seed=SEED + number)  # fmt: skip
            labelled += [r.key for r in ranked[: args.step]]
        curves[strategy] = curve
        last_model[strategy] = (model, vocab)

    target = curves["random"][-1]["value"]
    needed: dict[str, int | None] = {}
    for strategy, curve in curves.items():
        reach = next((p["captions"] for p in curve if p["value"] >= target), None)
        needed[strategy] = reach
    random_final = curves["random"][-1]["captions"]
    print(f"\nrandom's final val CIDEr-D {target:.4f} with {random_final} captions")
    for strategy in strategies:
        reach = needed[strategy]
        share = f"{100 * reach / random_final:.0f}%" if reach else "not reached"
        print(f"  {strategy:12} reaches it with {reach or '-'} captions ({share})")

    # flags on swapped captions -------------------------------------------------------------
    frng = random.Random(SEED + 1)
    texts = [list(s.captions) for s in held]
    slots = [(c, k) for c in range(len(held)) for k in range(len(texts[c]))]
    n_swap = round(args.swap * len(slots) / 2) * 2
    chosen = frng.sample(slots, len(slots))
    swapped: set[tuple[int, int]] = set()
    pairs = 0
    i = 0
    while pairs < n_swap // 2 and i + 1 < len(chosen):
        a, b = chosen[i], chosen[i + 1]
        i += 2
        if a[0] == b[0] or a in swapped or b in swapped:
            continue
        texts[a[0]][a[1]], texts[b[0]][b[1]] = texts[b[0]][b[1]], texts[a[0]][a[1]]
        swapped.update({a, b})
        pairs += 1
    model, vocab = last_model["random"]
    hyps = decode(model, vocab, feats["held"], 3)
    suggestions = [(vocab.decode(h[0].tokens), h[0].entropy) if h else (None, None) for h in hyps]
    documents = texts + [[s] for s, _ in suggestions if s]
    cider = scoring.CiderD(documents)
    thresholds = scoring.FlagThresholds()
    found: dict[str, set[tuple[int, int]]] = {"model": set(), "consensus": set(), "hints": set()}
    consensus_values = {True: [], False: []}
    for c, scene in enumerate(held):
        hints = [e.label for e in scene.events if e.label]
        for k, text in enumerate(texts[c]):
            others = texts[c][:k] + texts[c][k + 1 :]
            consensus_values[(c, k) in swapped].append(cider.score(text, others))
            findings = scoring.caption_findings(
                text=text, others=others, suggestion=suggestions[c][0],
                suggestion_entropy=suggestions[c][1], hints=hints, cider=cider,
                thresholds=thresholds,
            )  # fmt: skip
            for f in findings:
                found[f.kind].add((c, k))
    flags: dict[str, Any] = {"captions": len(slots), "swapped": len(swapped),
                             "thresholds": dataclasses.asdict(thresholds)}  # fmt: skip
    combos = {"model": found["model"], "consensus": found["consensus"], "hints": found["hints"],
              "all": found["model"] | found["consensus"] | found["hints"]}  # fmt: skip
    for name, flagged in combos.items():
        p, r = scoring.precision_recall(flagged, swapped)
        flags[name] = {"flagged": len(flagged), "precision": p, "recall": r}
        shown_p = "-" if p is None else f"{p:.3f}"
        shown_r = "-" if r is None else f"{r:.3f}"
        print(f"flags {name:10} {len(flagged):4} flagged, precision {shown_p}, recall {shown_r}")
    for bad, values in consensus_values.items():
        values.sort()
        if values:
            print(f"  leave-one-out CIDEr-D of {'swapped' if bad else 'clean'} captions: median "
                  f"{values[len(values) // 2]:.3f}, 10th pct {values[len(values) // 10]:.3f}, "
                  f"90th pct {values[9 * len(values) // 10]:.3f}")  # fmt: skip
    seconds = time.perf_counter() - started_all
    print(f"total {seconds / 60:.1f} min")
    if args.json:
        args.json.write_text(json.dumps({
            "label": f"SynthScenes simulation ({args.model} {args.preset}, pool {args.pool})",
            "metric": "CIDEr-D",
            "args": vars(args) | {"json": str(args.json)},
            "curves": curves,
            "random_final": {"captions": random_final, "value": target},
            "captions_to_reach_random_final": needed,
            "flags": flags,
            "seconds": round(seconds, 1),
        }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
