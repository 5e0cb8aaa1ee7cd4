"""Active learning on SynthScenes with oracle annotators: rounds of select -> annotate ->
retrain for each strategy, the validation CIDEr-D curve of each, how many captions each
needs to reach random's final score, and the precision/recall of the disagreement flags on
captions swapped between clips.

Usage: .venv/bin/python benchmarks/active_learning.py [--pool 480] [--val 100] [--initial 40]
       [--step 40] [--rounds 5] [--epochs 12] [--model lstm] [--preset small] [--hop 3200]
       [--seeds 2026,2027]
       [--min-steps 0] [--dev 0] [--patience 3]
       [--strategies random,uncertainty,margin,committee,diversity,hybrid]
       [--flag-clips 200]
       [--swap 0.1] [--data-seed 2026] [--threads N] [--jobs N] [--flags-only] [--json OUT]
       [--pool-segments ../shared/data/audioset/unbalanced_train_segments.partial.csv]
       [--val-segments ../shared/data/audioset/eval_segments.csv]

Pure PyTorch + pycocoevalcap (no Django, no database), like train_synthscenes.py: scenes are
generated in memory (seed 2026), log-mels computed once. The oracle annotator reveals a
clip's reference captions (--captions-per-clip of them) when a strategy picks it. For each
run seed (--seeds: the initial set, random's order and the model's initialisation) every
strategy starts from the same random initial set and the same first model; each round
trains a fresh model on the captions revealed so far (vocabulary from those captions only,
--epochs epochs, or more where --min-steps asks for more optimisation steps; with --dev N,
at most that, stopping early on the loss of N further clips kept apart from val, best
weights kept),
scores it on the validation split (greedy decoding, pycocoevalcap CIDEr-D), decodes the
unlabelled pool with beam 3 and picks the next --step clips with active/scoring.rank —
the same function the app uses to order HITs. Committee members are the beam's hypotheses.
Curves are averaged over the run seeds (--jobs N runs N seeds at once, each in its own
process with the same arguments, so a many-core machine gives the same numbers sooner);
"captions to reach random's final" is the first round of a strategy's mean curve at or
above random's mean final score (and per seed).
--flag-clips 0 skips the flags.

A skewed pool (--pool-segments, --val-segments): by default every sound event is as likely
as any other, in the pool and in val; real pools are not (AudioSet's unbalanced list holds
888 segments of a man speaking for every 6 of knocking), while evaluation sets are often
balanced (AudioSet's eval list has about 60 of each). With a segment list, each split's
events are drawn in proportion to their labels' counts in it.

A run that fits 15 minutes on one busy CPU thread: --pool 400 --val 100 --initial 40
--step 40 --rounds 4 --epochs 10 --seeds 1,2 --flag-clips 0 --threads 1.

Flags: --flag-clips held-out clips with 5 references each; --swap of all their captions
are exchanged between random pairs of clips (a caption never lands on its own clip or on a
slot holding the same text), then every caption goes through
active/scoring.caption_findings with the clip's other captions, the final random-strategy
model's beam-3 suggestion and its entropy (--flags-only: skip the strategies and use one
model trained on the whole pool), and the names of all the clip's AudioSet labels as word
hints, as the app's clip labels would give. Precision/recall are reported per check on its
own, for all checks as the app runs them (thresholds from FlagThresholds' defaults, which
the settings share), and with the model check not deferring to consensus. --data-seed
picks the SynthScenes set: tune on one, report on another.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

import synthscenes
from active import flagmodel, scoring
from benchmarks.flags_real import LAZY
from corpus.evaluation import evaluate
from modeling.ml.checkpoint import load_checkpoint
from modeling.ml.config import RunConfig, VocabConfig
from modeling.ml.data import CaptionItem, collate
from modeling.ml.decoding import beam_search, greedy
from modeling.ml.features import extract, feature_preset
from modeling.ml.presets import TRAIN_PRESETS, model_preset
from modeling.ml.runtime import pick_device, to_device
from modeling.ml.trainer import train
from modeling.ml.vocab import BOS_ID, EOS_ID, Vocabulary, tokenize

SEED = 2026


def scenes(
    seed: int, count: int, start: int, n_captions: int, weights: dict[str, float] | None = None
) -> list[synthscenes.Scene]:
    return list(synthscenes.generate_scenes(
        seed, count, start=start, n_captions=n_captions, event_weights=weights
    ))  # fmt: skip


_MID = re.compile(r"/[mgt]/[0-9a-z_]+")


def event_weights(segments: Path) -> dict[str, float]:
    """How often each SynthScenes event type occurs in an AudioSet segment list: the number
    of segments carrying the type's own (first, most specific) label, shared evenly between
    types that share it (the two beeps). Reads any of the lists in ../shared/data/audioset,
    the spreadsheet-mangled unbalanced one included (labels are found by their /m/ form)."""
    if not segments.is_file():
        raise SystemExit(f"{segments}: no such segment list (AudioSet's CSVs are in "
                         "../shared/data/audioset beside the project)")  # fmt: skip
    counts: dict[str, int] = {}
    with segments.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if not line.startswith("#"):
                for mid in set(_MID.findall(line)):
                    counts[mid] = counts.get(mid, 0) + 1
    sharing: dict[str, int] = {}
    for kind in synthscenes.EVENT_TYPES.values():
        sharing[kind.mids[0]] = sharing.get(kind.mids[0], 0) + 1
    weights = {key: counts.get(kind.mids[0], 0) / sharing[kind.mids[0]]
               for key, kind in synthscenes.EVENT_TYPES.items()}  # fmt: skip
    if not any(weights.values()):
        raise SystemExit(f"{segments}: none of SynthScenes' labels occurs in it")
    return weights


def swap_captions(texts: list[list[str]], share: float, seed: int) -> set[tuple[int, int]]:
    """Exchanges `share` of all captions between random pairs of clips, in place (a caption
    never lands on its own clip); returns the (clip, index) slots that now hold a swapped
    caption."""
    rng = random.Random(seed)
    slots = [(c, k) for c in range(len(texts)) for k in range(len(texts[c]))]
    n_swap = round(share * len(slots) / 2) * 2
    chosen = rng.sample(slots, len(slots))
    swapped: set[tuple[int, int]] = set()
    i = 0
    while len(swapped) < n_swap and i + 1 < len(chosen):
        a, b = chosen[i], chosen[i + 1]
        i += 2
        if a[0] == b[0] or texts[a[0]][a[1]] == texts[b[0]][b[1]]:
            continue
        texts[a[0]][a[1]], texts[b[0]][b[1]] = texts[b[0]][b[1]], texts[a[0]][a[1]]
        swapped.update({a, b})
    return swapped


def reach_at(curve: list[dict[str, Any]], target: float) -> int | None:
    """Captions revealed at the first round whose score is at or above `target`."""
    return next((p["captions"] for p in curve if p["value"] >= target), None)


def _pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def flag_report(
    held: list[synthscenes.Scene],
    suggestions: list[tuple[str | None, float | None]],
    *,
    swap: float,
    seed: int,
    thresholds: scoring.FlagThresholds | None = None,
) -> dict[str, Any]:
    """Swaps `swap` of the held-out clips' captions between clips, runs the three checks of
    active/scoring.caption_findings on every caption as the app does (the clip's other
    captions, the model's suggestion and its entropy, the clip's label names as hints;
    CIDEr-D document frequencies from the clips' captions plus the suggestions) and prints
    precision/recall per check and for all of them together, with the score each check
    thresholds for swapped and clean captions."""
    thresholds = thresholds or scoring.FlagThresholds()
    texts = [list(s.captions) for s in held]
    swapped = swap_captions(texts, swap, seed)
    cider = scoring.CiderD(texts + [[s] for s, _ in suggestions if s])
    # each check on its own (the model check as on a clip too thin for consensus), and all of
    # them as the app runs them (the model check deferring to consensus when so set)
    alone = dataclasses.replace(thresholds, model_defers_to_consensus=False)
    found: dict[str, set[tuple[int, int]]] = {"model": set(), "consensus": set(), "hints": set()}
    as_app: set[tuple[int, int]] = set()
    values: dict[str, dict[bool, list[float]]] = {
        "consensus": {True: [], False: []}, "model": {True: [], False: []}
    }  # fmt: skip
    for c, scene in enumerate(held):
        # the app's hints are the clip's labels: every AudioSet label of the scene
        hints = [synthscenes.LABEL_NAMES.get(m, m) for m in scene.mids]
        suggestion, entropy = suggestions[c]
        for k, text in enumerate(texts[c]):
            bad = (c, k) in swapped
            others = texts[c][:k] + texts[c][k + 1 :]
            values["consensus"][bad].append(cider.score(text, others))
            if suggestion and entropy is not None and entropy <= thresholds.model_max_entropy:
                values["model"][bad].append(cider.score(text, [suggestion]))
            evidence: dict[str, Any] = dict(text=text, others=others, suggestion=suggestion,
                            suggestion_entropy=entropy, hints=hints, cider=cider)  # fmt: skip
            for f in scoring.caption_findings(**evidence, thresholds=alone):
                found[f.kind].add((c, k))
            if scoring.caption_findings(**evidence, thresholds=thresholds):
                as_app.add((c, k))
    slots = sum(len(t) for t in texts)
    print(f"flags: {len(held)} clips, {slots} captions, {len(swapped)} swapped; "
          f"thresholds {dataclasses.asdict(thresholds)}")  # fmt: skip
    report: dict[str, Any] = {"clips": len(held), "captions": slots, "swapped": len(swapped),
                              "thresholds": dataclasses.asdict(thresholds)}  # fmt: skip
    combos = {**found, "all": as_app,
              "all, model not deferring": found["model"] | found["consensus"] | found["hints"],
              "consensus + hints": found["consensus"] | found["hints"]}  # fmt: skip
    for name, flagged in combos.items():
        p, r = scoring.precision_recall(flagged, swapped)
        report[name] = {"flagged": len(flagged), "precision": p, "recall": r}
        shown_p = "-" if p is None else f"{p:.3f}"
        shown_r = "-" if r is None else f"{r:.3f}"
        print(f"  {name:24} {len(flagged):4} flagged, precision {shown_p}, recall {shown_r}")
    for check, by_kind in values.items():
        for bad, numbers in by_kind.items():
            if numbers:
                print(f"  {check} CIDEr-D of {'swapped' if bad else 'clean'} captions "
                      f"(n={len(numbers)}): 10th pct {_pct(numbers, 0.1):.3f}, median "
                      f"{_pct(numbers, 0.5):.3f}, 90th pct {_pct(numbers, 0.9):.3f}")  # fmt: skip
    report["suggestions"] = [[text, None if h is None else round(h, 4)]
                             for text, h in suggestions]  # fmt: skip
    report["values"] = {check: {("swapped" if bad else "clean"): sorted(round(v, 4) for v in n)
                                for bad, n in by_kind.items()}
                        for check, by_kind in values.items()}  # fmt: skip
    return report


SINGLE_KINDS = flagmodel.CORRUPTIONS


def single_caption_report(
    held: list[synthscenes.Scene],
    suggestions: list[tuple[str | None, float | None]],
    *,
    share: float,
    seed: int,
) -> dict[str, Any]:
    """Clips with one caption (as AudioCaps train): the consensus check cannot run, so the
    model check (a caption far from a confident suggestion) and the word-hints check are
    all there is. Keeps each held-out clip's first caption, corrupts `share` of them with
    the real-caption benchmark's kinds (flagmodel.corrupt_clips: off-topic, generic,
    truncated, wrong-source) and runs the flag job's check (flagmodel.caption_check) on each;
    prints each check's precision and its recall per kind."""
    thresholds = scoring.FlagThresholds()
    single = [[s.captions[0]] for s in held]
    names = [{"name": n} for n in synthscenes.LABEL_NAMES.values()]
    words = {w for c in single for w in scoring.tokens(c[0])}
    sources = [w for w in flagmodel.source_names(names) if w in words]
    bad, changed = flagmodel.corrupt_clips(
        single, share=share, rng=random.Random(seed), lazy=LAZY, sources=sources
    )
    cider = scoring.CiderD([s.captions for s in held] + [[t] for t, _ in suggestions if t])
    found: dict[str, set[int]] = {"model": set(), "hints": set()}
    for c, scene in enumerate(held):
        suggestion, entropy = suggestions[c]
        findings, _ = flagmodel.caption_check(
            text=bad[c][0], suggestion=suggestion, suggestion_entropy=entropy,
            hints=[synthscenes.LABEL_NAMES.get(m, m) for m in scene.mids], cider=cider,
            thresholds=thresholds, model=None,
        )  # fmt: skip
        for f in findings:
            found[f.kind].add(c)
    corrupted = {c: kind for (c, _), kind in changed.items()}
    print(f"single-caption clips: {len(held)}, {len(corrupted)} corrupted (share {share})")
    report: dict[str, Any] = {"clips": len(held), "corrupted": len(corrupted)}
    for check, flagged in [*found.items(), ("model + hints", found["model"] | found["hints"])]:
        p, r = scoring.precision_recall(flagged, set(corrupted))
        per_kind = {
            kind: sum(1 for c, k in corrupted.items() if k == kind and c in flagged)
            / max(1, sum(1 for k in corrupted.values() if k == kind))
            for kind in SINGLE_KINDS
        }
        report[check] = {"flagged": len(flagged), "precision": p, "recall": r, **per_kind}
        kinds = ", ".join(f"{k} {v:.2f}" for k, v in per_kind.items())
        shown = "-" if p is None else f"{p:.3f}"
        print(f"  {check:14} {len(flagged):4} flagged, precision {shown}; recall {kinds}")
    return report


def run_seeds_in_processes(
    args: argparse.Namespace, seeds: list[int]
) -> tuple[dict[str, list[list[dict[str, Any]]]], dict[str, Any]]:
    """Runs this script once per seed, `args.jobs` at a time, each with the same arguments
    (so the same scenes, splits and features) and its own --json; returns every strategy's
    curves in seed order, and the flags, which only the first seed's process measures (from
    its final random model, as one process would). Each process's output goes to a log
    beside --json (or in a temporary folder)."""
    import concurrent.futures

    folder = Path(tempfile.mkdtemp(prefix="al-seeds-", dir=args.json.parent if args.json else None))

    def child(seed: int) -> dict[str, Any]:
        argv = [sys.executable, str(Path(__file__).resolve())]
        for key, value in vars(args).items():
            if key in ("seeds", "jobs", "json", "skip_flags") or value is None:
                continue
            flag = "--" + key.replace("_", "-")
            if isinstance(value, bool):
                argv += [flag] if value else []
            else:
                argv += [flag, str(value)]
        out = folder / f"seed-{seed}.json"
        argv += ["--seeds", str(seed), "--json", str(out)]
        if seed != seeds[0]:
            argv.append("--skip-flags")
        started = time.perf_counter()
        with open(folder / f"seed-{seed}.log", "w") as log:
            done = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=False)
        if done.returncode != 0:
            tail = (folder / f"seed-{seed}.log").read_text().splitlines()[-20:]
            raise SystemExit(f"seed {seed} failed (exit {done.returncode}):\n" + "\n".join(tail))
        print(f"seed {seed} done in {time.perf_counter() - started:.0f} s "
              f"(log {folder / f'seed-{seed}.log'})", flush=True)  # fmt: skip
        return json.loads(out.read_text())

    print(f"running {len(seeds)} seeds in {args.jobs} processes; logs in {folder}", flush=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as executor:
        results = list(executor.map(child, seeds))
    runs = {name: [r["runs"][name][0] for r in results] for name in results[0]["runs"]}
    return runs, results[0]["flags"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", type=int, default=480)
    parser.add_argument("--val", type=int, default=100)
    parser.add_argument("--initial", type=int, default=40)
    parser.add_argument("--step", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--captions-per-clip", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--min-steps", type=int, default=0,
                        help="train each round for at least this many optimisation steps "
                             "(batch 16): more epochs than --epochs when data are few")  # fmt: skip
    parser.add_argument("--dev", type=int, default=0,
                        help="clips (5 captions each, apart from val) for early stopping on "
                             "their loss; --epochs is then the most a round trains")  # fmt: skip
    parser.add_argument("--patience", type=int, default=3)
    parser.add_argument("--model", default="lstm")
    parser.add_argument("--preset", default="small")
    parser.add_argument("--hop", type=int, default=3200)
    parser.add_argument("--strategies", default="random,uncertainty,committee")
    parser.add_argument("--flag-clips", type=int, default=200)
    parser.add_argument("--swap", type=float, default=0.1)
    parser.add_argument("--flags-only", action="store_true",
                        help="skip the strategies: train one model on the whole pool and "
                             "measure the flags with it")  # fmt: skip
    parser.add_argument("--data-seed", type=int, default=SEED, help="the SynthScenes set")
    parser.add_argument(
        "--pool-segments",
        type=Path,
        help="an AudioSet segment list whose label frequencies the pool's (and "
        "the flag clips') sound events follow; default: all equally often",
    )
    parser.add_argument("--val-segments", type=Path,
                        help="the same for the val and dev clips")  # fmt: skip
    parser.add_argument("--seeds", default=str(SEED),
                        help="run seeds (initial set, random order, model init), comma-separated; "
                             "curves are their mean")  # fmt: skip
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--jobs", type=int, default=1,
                        help="run the seeds in this many processes at once (each with "
                             "--threads torch threads); same numbers as one process")  # fmt: skip
    parser.add_argument("--skip-flags", action="store_true",
                        help="make the held-out clips but do not measure the flags (what "
                             "--jobs asks of every seed's process but the first's)")  # fmt: skip
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    seeds = [int(x) for x in args.seeds.split(",")]
    if args.threads:
        torch.set_num_threads(args.threads)
    strategies = args.strategies.split(",")
    if strategies[0] != "random":
        strategies = ["random", *[s for s in strategies if s != "random"]]

    started_all = time.perf_counter()
    device = pick_device(args.device)
    print(
        f"machine: {platform.machine()}, {torch.get_num_threads()} torch threads, device {device}"
    )
    t = time.perf_counter()
    pool_w = event_weights(args.pool_segments) if args.pool_segments else None
    val_w = event_weights(args.val_segments) if args.val_segments else None
    for name, weights in (("pool", pool_w), ("val/dev", val_w)):
        if weights:
            total = sum(weights.values())
            ranked = sorted(weights.items(), key=lambda kv: -kv[1])
            print(f"{name} event types: "
                  + ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in ranked))  # fmt: skip
    pool = scenes(args.data_seed, args.pool, 0, args.captions_per_clip, pool_w)
    val = scenes(args.data_seed, args.val, args.pool, 5, val_w)
    held = scenes(args.data_seed, args.flag_clips, args.pool + args.val, 5, pool_w)
    dev = scenes(args.data_seed, args.dev, args.pool + args.val + args.flag_clips, 5, val_w)
    generated = len(pool) + len(val) + len(held) + len(dev)
    print(f"generated {generated} scenes in {time.perf_counter() - t:.1f} s")
    for name, split in (("pool", pool), ("val", val)):
        share: dict[str, int] = {}
        for scene in split:
            for kind in {e.type for e in scene.events}:
                share[kind] = share.get(kind, 0) + 1
        print(f"{name}: clips holding each event type: " + ", ".join(
            f"{k} {v}" for k, v in sorted(share.items(), key=lambda x: -x[1])
        ))  # fmt: skip
    config = dataclasses.replace(feature_preset("act"), hop_length=args.hop)
    t = time.perf_counter()
    feats = {
        "pool": [extract(s.waveform, s.sample_rate, config) for s in pool],
        "val": [extract(s.waveform, s.sample_rate, config) for s in val],
        "held": [extract(s.waveform, s.sample_rate, config) for s in held],
        "dev": [extract(s.waveform, s.sample_rate, config) for s in dev],
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

    def fit(labelled: list[int], seed: int) -> tuple[Any, Vocabulary]:
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
        # at least --min-steps optimisation steps: a small first round trained for a fixed
        # number of epochs is a few dozen steps, an undertrained model whose scores (and
        # uncertainties) are mostly initialisation noise
        steps_per_epoch = -(-len(items) // 16)
        epochs = max(args.epochs, -(-args.min_steps // steps_per_epoch))
        train_config = dataclasses.replace(
            TRAIN_PRESETS["audiocaps"], epochs=epochs, batch_size=16, device=args.device,
            early_stopping_patience=args.patience if dev else None, log_every_steps=1000,
            seed=seed,
        )  # fmt: skip
        run = RunConfig(model_name=args.model, model=model_config, vocab=VocabConfig(),
                        train=train_config)  # fmt: skip
        # --dev: early stopping on the dev split's loss (its own clips, never val's), the
        # best checkpoint kept; without it the last epoch's weights
        dev_items = [
            CaptionItem(features=f, tokens=vocab.encode(tokenize(c)), clip_id=f"dev{j}")
            for j, (f, s) in enumerate(zip(feats["dev"], dev, strict=True))
            for c in s.captions
        ]  # fmt: skip
        with tempfile.TemporaryDirectory() as out:
            result = train(run=run, vocab=vocab, train_items=items, out_dir=out,
                           feature_config=config, val_items=dev_items or None)  # fmt: skip
            chosen = result.best_checkpoint if dev_items and result.best_checkpoint else None
            best = load_checkpoint(chosen or result.last_checkpoint, map_location=device)
        model = best.model.to(device)
        model.prepare(items)
        return model, vocab

    def val_cider(model: Any, vocab: Vocabulary) -> float:
        hyps = decode(model, vocab, feats["val"], 1)
        predictions = {str(i): (vocab.decode(h[0].tokens) if h else "") or "<empty>"
                       for i, h in enumerate(hyps)}  # fmt: skip
        return float(evaluate(predictions=predictions, references=val_refs,
                              metrics=["cider"]).scores["CIDEr-D"] or 0.0)  # fmt: skip

    def pick(strategy: str, model: Any, vocab: Vocabulary, labelled: list[int],
             mids_names: dict[str, str], *, seed: int) -> list[int]:  # fmt: skip
        """The next --step clips `strategy` asks for, ranked by active/scoring.rank."""
        chosen = set(labelled)
        unlabelled = [i for i in range(len(pool)) if i not in chosen]
        evidence = []
        if strategy in ("uncertainty", "margin", "committee", "hybrid"):
            hyps = decode(model, vocab, [feats["pool"][i] for i in unlabelled], 3)
            for i, hs in zip(unlabelled, hyps, strict=True):
                evidence.append(scoring.ClipEvidence(
                    key=i,
                    mean_entropy=hs[0].entropy if hs else None,
                    hypotheses=[{"text": vocab.decode(h.tokens), "score": h.score,
                                 "log_prob": h.log_prob} for h in hs],
                    labels=[mids_names.get(m, m) for m in pool[i].mids],
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
        ranked = scoring.rank(strategy, evidence, cider=cider, covered=covered, seed=seed)
        return [r.key for r in ranked[: args.step]]

    flags: dict[str, Any] = {}
    curves: dict[str, list[dict[str, Any]]] = {}
    runs: dict[str, list[list[dict[str, Any]]]] = {}
    needed: dict[str, int | None] = {}
    random_final: dict[str, Any] = {}
    if args.flags_only:
        t = time.perf_counter()
        flag_model = fit(list(range(len(pool))), SEED)
        score = val_cider(*flag_model)
        print(f"flag model: {args.model} {args.preset} on all {len(pool)} pool clips, "
              f"val CIDEr-D {score:.4f} ({time.perf_counter() - t:.0f} s)")  # fmt: skip
    else:
        mids_names = {e.mids[0]: e.label for s in pool for e in s.events if e.mids}
        runs = {s: [] for s in strategies}
        flag_model = None
        in_processes = args.jobs > 1 and len(seeds) > 1
        if in_processes:
            runs, flags = run_seeds_in_processes(args, seeds)
        for run_seed in [] if in_processes else seeds:
            initial = sorted(random.Random(run_seed).sample(range(len(pool)), args.initial))
            first = None  # every strategy starts from the same model
            for strategy in strategies:
                labelled = list(initial)
                curve: list[dict[str, Any]] = []
                for number in range(args.rounds + 1):
                    t = time.perf_counter()
                    if number == 0 and first is not None:
                        model, vocab, score = first
                    else:
                        model, vocab = fit(labelled, run_seed)
                        score = val_cider(model, vocab)
                        first = first or (model, vocab, score)
                    captions = len(labelled) * args.captions_per_clip
                    seconds = round(time.perf_counter() - t, 1)
                    curve.append({"round": number, "clips": len(labelled), "captions": captions,
                                  "value": round(score, 4), "seconds": seconds})  # fmt: skip
                    print(f"seed {run_seed} {strategy:12} round {number}: {captions:5} "
                          f"captions, val CIDEr-D {score:.4f} ({seconds:.0f} s)",
                          flush=True)  # fmt: skip
                    if number == args.rounds:
                        break
                    labelled += pick(strategy, model, vocab, labelled, mids_names,
                                     seed=run_seed + number)  # fmt: skip
                runs[strategy].append(curve)
                if strategy == "random" and flag_model is None:
                    flag_model = (model, vocab)

        # the mean over seeds at each round (every seed reveals the same numbers of captions)
        for strategy in strategies:
            curves[strategy] = [
                {"round": point["round"], "captions": point["captions"],
                 "value": round(sum(c[n]["value"] for c in runs[strategy]) / len(seeds), 4),
                 "values": [c[n]["value"] for c in runs[strategy]]}
                for n, point in enumerate(runs[strategy][0])
            ]  # fmt: skip
        print(f"\nval CIDEr-D by captions revealed (mean of seeds {args.seeds}; per seed in "
              f"brackets); {args.model} {args.preset}, {args.epochs} epochs a round, "
              f"at least {args.min_steps} steps, dev {args.dev}")  # fmt: skip
        header = "".join(f"{p['captions']:>22}" for p in curves["random"])
        print(f"{'strategy':12}{header}")
        for strategy in strategies:
            cells = "".join(
                f"{p['value']:>8.3f} ({' '.join(f'{v:.3f}' for v in p['values'])})".rjust(22)
                for p in curves[strategy]
            )
            print(f"{strategy:12}{cells}")
        target = curves["random"][-1]["value"]
        final_captions = curves["random"][-1]["captions"]
        print(f"\nrandom's final val CIDEr-D {target:.4f} (mean) with {final_captions} captions; "
              "captions each strategy needs to reach it (first round at or above it):")  # fmt: skip
        for strategy in strategies:
            reach = reach_at(curves[strategy], target)
            needed[strategy] = reach
            reached = f"{100 * reach / final_captions:.0f}%" if reach else "not reached"
            per_seed = []
            for k, run_seed in enumerate(seeds):
                own = reach_at(runs[strategy][k], runs["random"][k][-1]["value"])
                per_seed.append(f"seed {run_seed}: {own or '-'}")
            print(f"  {strategy:12} {reach or '-'} captions ({reached}); against each seed's own "
                  f"random final: {', '.join(per_seed)}")  # fmt: skip
        random_final = {"captions": final_captions, "value": target}

    # flags on swapped captions -------------------------------------------------------------
    if held and flag_model is not None and not args.skip_flags:
        model, vocab = flag_model
        hyps = decode(model, vocab, feats["held"], 3)
        suggestions: list[tuple[str | None, float | None]] = [
            (vocab.decode(h[0].tokens), h[0].entropy) if h else (None, None) for h in hyps
        ]
        flags = flag_report(held, suggestions, swap=args.swap, seed=args.data_seed + 1)
        flags["single_caption"] = single_caption_report(
            held, suggestions, share=0.2, seed=args.data_seed + 2
        )
    seconds = time.perf_counter() - started_all
    print(f"total {seconds / 60:.1f} min")
    if args.json:
        args.json.write_text(json.dumps({
            "label": f"SynthScenes simulation ({args.model} {args.preset}, pool {args.pool})",
            "metric": "CIDEr-D",
            "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "curves": curves,
            "runs": runs,
            "random_final": random_final,
            "captions_to_reach_random_final": needed,
            "flags": flags,
            "seconds": round(seconds, 1),
        }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
