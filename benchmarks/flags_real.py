"""Disagreement flags on real human captions: corrupts one caption in a share of the clips
of a public caption set, runs the flag job's own check on every caption, and reports
precision, recall and the rate of untouched captions flagged, overall and per kind.

Usage: .venv/bin/python benchmarks/flags_real.py --captions PATH [--format clotho|audiocaps]
       [--seed 0] [--share 0.20] [--ontology ../shared/data/audioset/ontology.json]

PATH is a Clotho (`file_name,caption_1..5`) or AudioCaps (`audiocap_id,youtube_id,
start_time,caption`) CSV; the format is detected from its header unless --format says.
Corruptions, taking turns over the chosen clips (active.flagmodel.corrupt_clips):
  off-topic     a random caption of another clip
  generic       a lazy caption from LAZY below (not the list the detector was fitted with)
  truncated     the caption's first three words (reported, no target: short can be right)
  wrong-source  the caption's first one-word AudioSet class name ("dog") swapped for another
                one the set uses ("car")
Every caption of every clip then goes through `active.flagmodel.caption_check`, the function
the flag job (`active.services.flags.captions_flag`) calls, with the job's settings
(`flag_thresholds()`), flag model (`flag_model()`, built first if missing: ~2 minutes, after
migrating the settings' database, whose captions it also learns from) and the default
calibration; `--without-model` runs it as the job does before any model exists (CIDEr-D
consensus). The last line is
    flags: precision P recall R untouched_flagged F
over the kinds with a target (off-topic, generic, wrong-source).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TypedDict

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from active import flagmodel, scoring  # noqa: E402  (pure modules, no Django)

TARGET_KINDS = ("off-topic", "generic", "wrong-source")

# Lazy captions a careless worker might type: 24, none of them the detector's own list.
LAZY = (
    "A sound is heard.", "Sounds.", "Some noise.", "There is noise.", "Something happens.",
    "Noise is heard in the background.", "A sound can be heard.", "Someone does something.",
    "This is a sound.", "Sound effects.", "Audio recording.", "Random noises.",
    "A noise occurs.", "Stuff is happening.", "There are sounds here.", "Something is heard.",
    "An unknown sound plays.", "Various noises are heard.", "It makes a sound.",
    "The sound continues.", "Noises can be heard.", "A recording of something.",
    "Sounds are playing.", "Someone makes noise.",
)  # fmt: skip


class Evaluation(TypedDict):
    kinds: dict[str, tuple[int, int]]  # kind -> (corrupted captions, flagged)
    untouched: tuple[int, int]  # (untouched captions, flagged)
    precision: float  # over TARGET_KINDS
    recall: float
    precision_all: float  # over every kind
    recall_all: float


def _django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "earmark.settings")
    os.environ.setdefault("DEBUG", "1")
    import django

    django.setup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--captions", type=Path, required=True)
    parser.add_argument("--format", choices=["clotho", "audiocaps"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--share", type=float, default=0.20)
    parser.add_argument(
        "--ontology", type=Path, default=ROOT.parent / "shared/data/audioset/ontology.json"
    )
    parser.add_argument(
        "--without-model", action="store_true",
        help="run the job's check as it runs before a flag model exists (CIDEr-D consensus)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if not args.captions.is_file():
        parser.error(f"--captions {args.captions}: no such file")
    if not 0.0 < args.share <= 1.0:
        parser.error(f"--share must be in (0, 1], got {args.share}")
    ontology_file = args.ontology
    if not ontology_file.is_file():
        # said aloud: the fixture's few hundred classes give fewer sources to swap in, so
        # wrong-source figures made with it are not comparable with the full ontology's
        ontology_file = ROOT / "tests/fixtures/audioset_ontology.json"
        print(
            f"--ontology {args.ontology}: no such file; using the test fixture {ontology_file}",
            file=sys.stderr,
        )
    clips = flagmodel.read_caption_csv(args.captions, fmt=args.format)
    clips = [c for c in clips if len(c) >= 2]
    if not clips:
        parser.error(f"{args.captions}: no clip has two captions or more")

    _django()
    from active.services.flags import flag_model, flag_thresholds

    started = time.monotonic()
    model = None if args.without_model else flag_model(build_missing=False)
    if model is None and not args.without_model:
        from django.core.management import call_command

        # building reads the database's captions too: bring its tables up to date first
        call_command("migrate", verbosity=0)
        model = flag_model(build_missing=True)
    loaded = time.monotonic()
    ontology = json.loads(ontology_file.read_text(encoding="utf-8"))
    counts = Counter(w for c in clips for t in c for w in scoring.tokens(t))
    sources = [w for w in flagmodel.source_names(ontology) if counts[w] >= 5]
    rng = random.Random(args.seed)
    bad, changed = flagmodel.corrupt_clips(
        clips, share=args.share, rng=rng, lazy=LAZY, sources=sources
    )
    result = evaluate(bad, changed, model=model, thresholds=flag_thresholds())
    elapsed = time.monotonic() - started
    print(
        f"{args.captions.name}: {len(bad)} clips, {sum(len(c) for c in bad)} captions, "
        f"{len(changed)} corrupted (share {args.share}, seed {args.seed}); "
        f"flag model {'loaded' if model else 'missing: CIDEr-D consensus'} in "
        f"{loaded - started:.1f} s, checks {elapsed - (loaded - started):.1f} s"
    )
    print(f"{'kind':<14}{'captions':>9}{'flagged':>9}{'recall':>8}")
    for kind in flagmodel.CORRUPTIONS:
        n, hit = result["kinds"].get(kind, (0, 0))
        print(f"{kind:<14}{n:>9}{hit:>9}{(hit / n if n else 0):>8.3f}")
    n_clean, f_clean = result["untouched"]
    print(f"{'untouched':<14}{n_clean:>9}{f_clean:>9}{(f_clean / n_clean):>8.3f} (flagged share)")
    print(f"all kinds: precision {result['precision_all']:.3f} recall {result['recall_all']:.3f}")
    print(
        f"flags: precision {result['precision']:.3f} recall {result['recall']:.3f} "
        f"untouched_flagged {f_clean / n_clean:.3f}"
    )
    return 0


def evaluate(
    clips: list[list[str]],
    changed: dict[tuple[int, int], str],
    *,
    model: flagmodel.FlagModel | None,
    thresholds: scoring.FlagThresholds,
) -> Evaluation:
    """Runs the flag job's check on every caption; counts per kind and overall."""
    cider = scoring.CiderD(clips)
    flagged: set[tuple[int, int]] = set()
    for c, clip in enumerate(clips):
        for i, text in enumerate(clip):
            findings, _ = flagmodel.caption_check(
                text=text,
                others=clip[:i] + clip[i + 1 :],
                cider=cider,
                thresholds=thresholds,
                model=model,
            )
            if findings:
                flagged.add((c, i))
    kinds: dict[str, tuple[int, int]] = {}
    for key, kind in changed.items():
        n, hit = kinds.get(kind, (0, 0))
        kinds[kind] = (n + 1, hit + (key in flagged))
    everything = {(c, i) for c, clip in enumerate(clips) for i in range(len(clip))}
    untouched = everything - set(changed)
    target = {k for k, kind in changed.items() if kind in TARGET_KINDS}
    # precision over the kinds with a target: a flagged truncated caption counts neither way
    counted = flagged - {k for k, kind in changed.items() if kind not in TARGET_KINDS}
    precision, recall = scoring.precision_recall(counted, target)
    precision_all, recall_all = scoring.precision_recall(flagged, set(changed))
    return Evaluation(
        kinds=kinds,
        untouched=(len(untouched), len(flagged & untouched)),
        precision=precision or 0.0,
        recall=recall or 0.0,
        precision_all=precision_all or 0.0,
        recall_all=recall_all or 0.0,
    )


if __name__ == "__main__":
    raise SystemExit(main())
