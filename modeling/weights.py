"""Released weights in: the workflow behind ``manage.py import_weights``.

``weights_import`` converts an authors' file (``modeling.ml.released``) and stores the result
in ENCODER_WEIGHTS_DIR/released/: an encoder's weights as a state-dict file that a run's
``model.encoder_weights`` / ``model.backbone_weights`` names, a captioner as an Earmark
checkpoint (with its vocabulary and the front end it expects) that ``load_checkpoint`` reads.
Imports torch: the gpu workers and the command line call it, never a web process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import torch
from django.conf import settings

from modeling.ml.checkpoint import save_checkpoint
from modeling.ml.config_features import feature_preset
from modeling.ml.released import Release, ReleasedWeightsError, convert

# the front end each captioner's released code computes (modeling.ml.config_features)
_FEATURES = {"act": "act_code", "vact_concat": "act_code", "maac": "panns"}


@dataclass
class ImportedWeights:
    """Where the converted file went and what it is."""

    kind: str
    path: Path
    release: Release | None
    notes: list[str] = field(default_factory=list)


def weights_import(
    *,
    kind: str,
    path: str | Path,
    words: str | Path | None = None,
    keyword_words: str | Path | None = None,
    name: str = "",
) -> ImportedWeights:
    """Convert the released ``path`` of ``kind`` and store it as ``name`` (default: the
    file's stem and the kind) in ENCODER_WEIGHTS_DIR/released/. Raises ReleasedWeightsError
    naming the first key that does not fit."""
    converted = convert(kind, path, words=words, keyword_words=keyword_words)
    folder = Path(settings.ENCODER_WEIGHTS_DIR) / "released"
    folder.mkdir(parents=True, exist_ok=True)
    stem = name or f"{Path(path).stem}.{kind}"
    if Path(stem).name != stem or stem.startswith("."):
        raise ReleasedWeightsError(f"name {stem!r} must be a plain file name")
    target = folder / f"{stem}.pt"
    notes = list(converted.notes)
    if converted.release is None:
        notes.append(
            f"{Path(path).name} is not in the table of known releases: checked by "
            "tensor names and shapes only"
        )
    elif converted.release.sha256 is None:
        notes.append(
            f"{converted.release.name}: no published SHA-256; checked by tensor names "
            "and shapes only"
        )
    if converted.encoder_state is not None:
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        torch.save(converted.encoder_state, tmp)
        os.replace(tmp, target)
    else:
        assert converted.model is not None
        assert converted.vocab is not None
        save_checkpoint(
            target,
            model_name=converted.model_name,
            model=converted.model,
            vocab=converted.vocab,
            feature_config=feature_preset(_FEATURES[kind]),
        )
    return ImportedWeights(kind=kind, path=target, release=converted.release, notes=notes)
