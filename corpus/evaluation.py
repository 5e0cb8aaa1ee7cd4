"""Caption metrics as audio-captioning papers report them, computed by pycocoevalcap 1.2.

Pure Python, no Django: the training code in modeling/ml imports it for validation.

`evaluate(predictions=..., references=...)` scores one caption per clip against that clip's
references; `human_upper_bound(references=...)` scores each reference against the others
(the AudioCaps paper's "Human" row). Both return every metric under the name papers use:

    BLEU-1..4, METEOR, ROUGE-L   pycocoevalcap's Bleu(4), Meteor, Rouge
    CIDEr-D                      pycocoevalcap's `Cider` class. Despite its name it computes
                                 CIDEr-D (clipped n-gram counts, a Gaussian length penalty
                                 with sigma 6, scores x10, no stemming), which is what the
                                 captioning papers and the DCASE baselines report as CIDEr(-D).
    SPICE                        pycocoevalcap's Spice; needs Stanford CoreNLP 3.6.0 jars
    SPIDEr                       mean of CIDEr-D and SPICE

The numbers are the ones pycocoevalcap gives when called directly: captions go through its
PTB tokenizer, then through its scorers with the same inputs. What differs is where the Java
parts run (`corpus.evaluation_java`): from a writable cache folder, with one METEOR process
kept alive per worker process.

A metric that cannot be computed (SPICE without CoreNLP) is None in `scores`, with the reason
in `unavailable`; it is never reported as 0.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.cider.cider import Cider
from pycocoevalcap.rouge.rouge import Rouge

from corpus.evaluation_java import (
    EvaluationError,
    JavaError,
    MeteorProcess,
    Toolkit,
    package_version,
    ptb_tokenize,
    shared_meteor,
    spice_score,
    toolkit,
)

BLEU = ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4")
METRICS = (*BLEU, "METEOR", "ROUGE-L", "CIDEr-D", "SPICE", "SPIDEr")
# what callers choose from; SPIDEr comes with "cider" and "spice" together
FAMILIES: dict[str, tuple[str, ...]] = {
    "bleu": BLEU,
    "meteor": ("METEOR",),
    "rouge": ("ROUGE-L",),
    "cider": ("CIDEr-D",),
    "spice": ("SPICE",),
}
ALL_FAMILIES = tuple(FAMILIES)
CIDER_NOTE = (
    "CIDEr-D as the captioning papers report it: pycocoevalcap's Cider (clipped counts, "
    "Gaussian length penalty sigma=6, x10, no stemming)"
)

Progress = Callable[[str], None]
K = TypeVar("K")


# Scoring ----------------------------------------------------------------------------------


@dataclass
class Scores:
    """Corpus-level scores by metric name (None: unavailable, with the reason)."""

    scores: dict[str, float | None] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    per_clip: dict[str, dict[str, float]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    meteor: dict[str, int] | None = None  # the METEOR JVM used: pid, JVMs started so far


@dataclass
class Evaluation:
    scores: dict[str, float | None]
    unavailable: dict[str, str]
    clips: int
    references: int
    seconds: dict[str, float]
    per_clip: dict[str, dict[str, float]] = field(repr=False, default_factory=dict)
    meteor: dict[str, int] | None = None

    def as_dict(self, *, per_clip: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "scores": self.scores,
            "unavailable": self.unavailable,
            "clips": self.clips,
            "references": self.references,
            "seconds": self.seconds,
            "meteor_process": self.meteor,
            "pycocoevalcap": package_version(),
            "cider": CIDER_NOTE,
        }
        if per_clip:
            out["per_clip"] = self.per_clip
        return out


@dataclass
class HumanBound:
    """The AudioCaps "Human" row: the mean over rounds of each reference vs the others."""

    scores: dict[str, float | None]
    unavailable: dict[str, str]
    clips: int
    skipped: int  # clips with fewer than two references, which cannot take part
    rounds: list[dict[str, float | None]]
    references_per_clip: dict[int, int]  # how many clips have n references
    seconds: dict[str, float]

    def as_dict(self) -> dict[str, Any]:
        return {
            "scores": self.scores,
            "unavailable": self.unavailable,
            "clips": self.clips,
            "skipped": self.skipped,
            "rounds": self.rounds,
            "references_per_clip": {str(n): c for n, c in self.references_per_clip.items()},
            "seconds": self.seconds,
            "pycocoevalcap": package_version(),
            "cider": CIDER_NOTE,
        }


def families(names: Collection[str] | None) -> tuple[str, ...]:
    if names is None:
        return ALL_FAMILIES
    unknown = sorted(set(names) - set(FAMILIES))
    if unknown:
        raise ValueError(
            f"Unknown metric {', '.join(unknown)}; choose from {', '.join(ALL_FAMILIES)}."
        )
    return tuple(name for name in ALL_FAMILIES if name in names)


def score_tokenized(
    gts: Mapping[str, Sequence[str]],
    res: Mapping[str, Sequence[str]],
    *,
    metrics: Collection[str] | None = None,
    kit: Toolkit,
    meteor: MeteorProcess | None = None,
    progress: Progress | None = None,
) -> Scores:
    """Runs the chosen scorers on PTB-tokenized captions, as pycocoevalcap's COCOEvalCap does."""
    chosen = families(metrics)
    gts = {key: list(value) for key, value in gts.items()}
    res = {key: list(value) for key, value in res.items()}
    keys = list(gts)
    out = Scores(per_clip={key: {} for key in keys})

    def timed(name: str, run: Callable[[], Any]) -> Any:
        if progress:
            progress(name)
        started = time.perf_counter()
        value = run()
        out.seconds[name] = round(time.perf_counter() - started, 3)
        return value

    if "bleu" in chosen:
        score, per = timed("BLEU", lambda: Bleu(4).compute_score(gts, res, verbose=0))
        for n, name in enumerate(BLEU):
            out.scores[name] = float(score[n])
            _spread(out.per_clip, keys, name, per[n])
    if "meteor" in chosen:
        process = meteor or shared_meteor(kit)
        score, per = timed("METEOR", lambda: process.score(gts, res))
        out.scores["METEOR"] = float(score)
        _spread(out.per_clip, keys, "METEOR", per)
        out.meteor = {"pid": process.jvm_pid, "starts": process.starts}
    if "rouge" in chosen:
        score, per = timed("ROUGE-L", lambda: Rouge().compute_score(gts, res))
        out.scores["ROUGE-L"] = float(score)
        _spread(out.per_clip, keys, "ROUGE-L", per)
    if "cider" in chosen:
        score, per = timed("CIDEr-D", lambda: Cider().compute_score(gts, res))
        out.scores["CIDEr-D"] = float(score)
        _spread(out.per_clip, keys, "CIDEr-D", per)
    if "spice" in chosen:
        missing = kit.spice_missing()
        if missing:
            out.scores["SPICE"] = None
            out.unavailable["SPICE"] = missing
        else:
            try:
                score, per_key = timed("SPICE", lambda: spice_score(gts, res, kit=kit))
            except JavaError as exc:
                out.scores["SPICE"] = None
                out.unavailable["SPICE"] = str(exc)
            else:
                out.scores["SPICE"] = score
                _spread(out.per_clip, keys, "SPICE", [per_key[key] for key in keys])
    if "cider" in chosen and "spice" in chosen:
        spice = out.scores["SPICE"]
        if spice is None:
            out.scores["SPIDEr"] = None
            out.unavailable["SPIDEr"] = "the mean of CIDEr-D and SPICE; SPICE is unavailable"
        else:
            cider = out.scores["CIDEr-D"]
            assert cider is not None
            out.scores["SPIDEr"] = (cider + spice) / 2
            for key in keys:
                clip = out.per_clip[key]
                if "SPICE" in clip:
                    clip["SPIDEr"] = (clip["CIDEr-D"] + clip["SPICE"]) / 2
    return out


def _spread(
    per_clip: dict[str, dict[str, float]], keys: list[str], name: str, values: Sequence[Any]
) -> None:
    for key, value in zip(keys, values, strict=True):
        per_clip[key][name] = float(value)


def check_inputs(predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]) -> None:
    """Raises EvaluationError naming what is wrong: clips without a prediction or without
    references, predictions for unknown clips, empty captions."""
    if not references:
        raise EvaluationError("There are no references to evaluate against.")
    missing = [key for key in references if key not in predictions]
    extra = [key for key in predictions if key not in references]
    problems = []
    if missing:
        problems.append(f"{len(missing)} clip(s) have no prediction ({_few(missing)})")
    if extra:
        problems.append(f"{len(extra)} prediction(s) name clips without references ({_few(extra)})")
    no_refs = [key for key, refs in references.items() if not refs]
    if no_refs:
        problems.append(f"{len(no_refs)} clip(s) have an empty reference list ({_few(no_refs)})")
    blank = [key for key, text in predictions.items() if not str(text).strip()]
    blank += [key for key, refs in references.items() if any(not str(t).strip() for t in refs)]
    if blank:
        problems.append(f"{len(blank)} clip(s) have an empty caption ({_few(blank)})")
    if problems:
        raise EvaluationError("; ".join(problems) + ".")


def _few(keys: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(repr(key) for key in keys[:limit])
    return shown + (", ..." if len(keys) > limit else "")


def evaluate(
    *,
    predictions: Mapping[str, str],
    references: Mapping[str, Sequence[str]],
    metrics: Collection[str] | None = None,
    kit: Toolkit | None = None,
    meteor: MeteorProcess | None = None,
    progress: Progress | None = None,
) -> Evaluation:
    """Scores one predicted caption per clip against the clip's reference captions.

    `predictions` maps a clip key to its caption, `references` the same keys to lists of
    captions; both must cover exactly the same clips. `metrics` picks families from
    FAMILIES (default all).
    """
    check_inputs(predictions, references)
    kit = kit or toolkit()
    chosen = families(metrics)
    if progress:
        progress("tokenizing")
    started = time.perf_counter()
    both = {("r", key): list(refs) for key, refs in references.items()}
    both.update({("p", key): [predictions[key]] for key in references})
    tokenized = ptb_tokenize(both, kit=kit)
    tokenize_seconds = round(time.perf_counter() - started, 3)
    gts = {key: tokenized[("r", key)] for key in references}
    res = {key: tokenized[("p", key)] for key in references}
    out = score_tokenized(gts, res, metrics=chosen, kit=kit, meteor=meteor, progress=progress)
    return Evaluation(
        scores=out.scores,
        unavailable=out.unavailable,
        clips=len(references),
        references=sum(len(refs) for refs in references.values()),
        seconds={"tokenize": tokenize_seconds, **out.seconds},
        per_clip=out.per_clip,
        meteor=out.meteor,
    )


def human_upper_bound(
    *,
    references: Mapping[str, Sequence[str]],
    metrics: Collection[str] | None = None,
    kit: Toolkit | None = None,
    meteor: MeteorProcess | None = None,
    progress: Progress | None = None,
) -> HumanBound:
    """Each reference in turn as the prediction, scored against the clip's other references;
    the mean over rounds is the human upper bound (AudioCaps, Table 3, "Human").

    Round i takes reference i of every clip (in the given order) as the candidate. With N
    references per clip there are N rounds, each scored with N-1 references. Clips with
    fewer references than the most any clip has take reference i mod n in round i. Clips
    with a single reference are skipped (and counted).
    """
    usable = {key: list(refs) for key, refs in references.items() if len(refs) >= 2}
    if not usable:
        raise EvaluationError("No clip has two or more references; a human bound needs them.")
    for key, refs in usable.items():
        if any(not text.strip() for text in refs):
            raise EvaluationError(f"Clip {key!r} has an empty reference caption.")
    kit = kit or toolkit()
    chosen = families(metrics)
    if progress:
        progress("tokenizing")
    started = time.perf_counter()
    tokenized = ptb_tokenize(usable, kit=kit)  # lines are tokenized independently
    seconds: dict[str, float] = {"tokenize": round(time.perf_counter() - started, 3)}
    count = max(len(refs) for refs in usable.values())
    rounds: list[Scores] = []
    for i in range(count):
        gts, res = {}, {}
        for key, refs in tokenized.items():
            pick = i % len(refs)
            res[key] = [refs[pick]]
            gts[key] = refs[:pick] + refs[pick + 1 :]

        def step(name: str, i: int = i) -> None:
            if progress:
                progress(f"round {i + 1}/{count}: {name}")

        scored = score_tokenized(gts, res, metrics=chosen, kit=kit, meteor=meteor, progress=step)
        rounds.append(scored)
        for name, value in scored.seconds.items():
            seconds[name] = round(seconds.get(name, 0.0) + value, 3)
    scores: dict[str, float | None] = {}
    for name in rounds[0].scores:
        values = [r.scores[name] for r in rounds]
        present = [v for v in values if v is not None]
        scores[name] = sum(present) / len(present) if len(present) == len(values) else None
    unavailable = {name: why for r in rounds for name, why in r.unavailable.items()}
    sizes: dict[int, int] = {}
    for refs in usable.values():
        sizes[len(refs)] = sizes.get(len(refs), 0) + 1
    return HumanBound(
        scores=scores,
        unavailable=unavailable,
        clips=len(usable),
        skipped=len(references) - len(usable),
        rounds=[r.scores for r in rounds],
        references_per_clip=dict(sorted(sizes.items())),
        seconds=seconds,
    )


def format_table(scores: Mapping[str, float | None], unavailable: Mapping[str, str]) -> str:
    """A plain-text table of scores; unavailable metrics say so, with the reasons below."""
    lines = [f"{'metric':<9} score"]
    for name, value in scores.items():
        lines.append(f"{name:<9} {value:.4f}" if value is not None else f"{name:<9} unavailable")
    lines += [f"{name}: {why}" for name, why in unavailable.items()]
    return "\n".join(lines)
