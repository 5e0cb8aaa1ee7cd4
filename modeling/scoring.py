"""Scoring a run's model: its best caption per clip against the clips' captions, with
corpus.evaluation's metrics (CIDEr-D while training, all of them at the end).

Run planning checks a run's metrics here (`validation_metrics`) in the web process, so what
loads torch (the run's data, the model) is imported by the functions that score."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from django.core.exceptions import ValidationError

from corpus.models import Snapshot
from modeling.models import TrainingRun

if TYPE_CHECKING:
    from corpus.evaluation import Evaluation
    from modeling.datasets import SplitData
    from modeling.ml.models.base import Captioner
    from modeling.ml.vocab import Vocabulary

VALIDATION_METRICS = ("cider",)  # per epoch: CIDEr-D only (fast, no JVM start for METEOR)
FINAL_METRICS = ("bleu", "meteor", "rouge", "cider", "spice")  # val and test, once trained


def validation_metrics(plateau_metric: str = "") -> tuple[str, ...]:
    """The metric families each validation computes: CIDEr-D (the score) and the family of
    the figure a run's plateaus watch (train.plateau_metric)."""
    from corpus.evaluation import FAMILIES

    if not plateau_metric:
        return VALIDATION_METRICS
    family = next((name for name, names in FAMILIES.items() if plateau_metric in names), None)
    if family is None:
        known = ", ".join(name for names in FAMILIES.values() for name in names)
        raise ValidationError(f"train.plateau_metric={plateau_metric!r} is not one of {known}.")
    return tuple(dict.fromkeys((*VALIDATION_METRICS, family)))


def score_split(
    model: Captioner,
    vocab: Vocabulary,
    data: SplitData,
    *,
    metrics: Sequence[str],
    attributes: dict[int, list[int]],
    beam_size: int = 1,
    length_penalty: float = 1.0,
) -> Evaluation:
    """The model's best caption per clip of `data` scored against the clip's captions."""
    from corpus.evaluation import evaluate
    from corpus.evaluation_services import evaluation_toolkit
    from modeling import datasets
    from modeling.ml.infer import best_captions

    predictions = best_captions(
        model,
        vocab,
        data.clips,
        beam_size=beam_size,
        attributes=attributes,
        length_penalty=length_penalty,
    )
    # the workers' toolkit: its cache folder and its warm METEOR process
    return evaluate(
        predictions=predictions,
        references=datasets.references(data),
        metrics=metrics,
        kit=evaluation_toolkit(),
    )


def run_score_snapshot(
    *,
    run: TrainingRun,
    snapshot: Snapshot,
    metrics: Sequence[str] = VALIDATION_METRICS,
    beam_size: int = 3,
) -> Evaluation:
    """The run's stored checkpoint scored on `snapshot`'s validation split (val, else test),
    with the attribute words and the 1NN bank coming from the run's own training split."""
    from modeling import datasets
    from modeling.ml.checkpoint import load_checkpoint
    from modeling.ml.runtime import pick_device

    target = datasets.snapshot_splits(snapshot)
    val = target.get("val") or target.get("test")
    if val is None or not val.clips:
        raise ValidationError(f"Snapshot v{snapshot.version} has no validation split.")
    data = datasets.prepare_run_data(run)
    datasets.attach_features({"val": val}, data.feature_config)
    if data.video_config is not None:
        datasets.attach_video({"val": val}, data.video_config)
    device = pick_device(data.run_config.train.device)
    with tempfile.TemporaryDirectory(prefix="earmark-rescore-") as tmp:
        local = Path(tmp) / "model.pt"
        if not datasets.copy_from_storage(run.checkpoint, local):
            raise ValidationError(f"Run #{run.pk}'s checkpoint is missing from storage.")
        checkpoint = load_checkpoint(local, map_location=device)
    model, vocab = checkpoint.model.to(device), checkpoint.vocab
    phrases = data.attribute_phrases(replacing={"val": val})
    model.prepare(datasets.caption_items(data.train, vocab, attributes=phrases))
    return score_split(
        model,
        vocab,
        val,
        metrics=metrics,
        attributes=datasets.attribute_ids(phrases, vocab),
        beam_size=beam_size,
    )
