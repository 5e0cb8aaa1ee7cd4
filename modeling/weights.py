"""Released weights in: the workflow behind ``manage.py import_weights`` and the API's
``POST /api/weights/import``.

``weights_import`` converts an authors' file (``modeling.ml.released``) and stores the result
in ENCODER_WEIGHTS_DIR/released/: an encoder's weights as a state-dict file that a run's
``model.encoder_weights`` / ``model.backbone_weights`` names, a captioner as an Earmark
checkpoint (with its vocabulary and the front end it expects) that ``load_checkpoint`` reads.
The conversion needs torch, imported inside it: the web process only queues it
(``weights_import_queue``), the gpu workers and the command line run it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ValidationError

from core.models import Job
from core.progress import ProgressFn
from core.services import job_enqueue
from modeling.ml.config_released import NEEDS_KEYWORD_WORDS, NEEDS_WORDS, RELEASED_KINDS
from modeling.planning import weights_file

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from modeling.ml.released import Release

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
    import torch

    from modeling.ml.checkpoint import save_checkpoint
    from modeling.ml.config_features import feature_preset
    from modeling.ml.released import ReleasedWeightsError, convert

    stem = name or f"{Path(path).stem}.{kind}"
    if Path(stem).name != stem or stem.startswith("."):
        raise ReleasedWeightsError(f"name {stem!r} must be a plain file name")
    converted = convert(kind, path, words=words, keyword_words=keyword_words)
    folder = Path(settings.ENCODER_WEIGHTS_DIR) / "released"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{stem}.pt"
    notes = list(converted.notes)
    if converted.release is None:
        notes.append(
            f"warning: {Path(path).name} is not a known release (no name, size or "
            "checksum in modeling.ml.released.RELEASES fits it): checked by tensor names "
            "and shapes only"
        )
    elif converted.release.checksum is None:
        notes.append(
            f"{converted.release.name}: no published checksum; checked by tensor names and "
            "shapes only"
        )
    else:
        notes.append(
            f"{converted.release.name}: the published {converted.release.checksum_kind.upper()} "
            "matches"
        )
    if converted.encoder_state is not None:
        # a reader must never see half a file
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        torch.save(converted.encoder_state, tmp)
        os.replace(tmp, target)
    else:
        if converted.model is None or converted.vocab is None:
            raise ReleasedWeightsError(f"{path}: the conversion produced no model")
        save_checkpoint(
            target,
            model_name=converted.model_name,
            model=converted.model,
            vocab=converted.vocab,
            feature_config=feature_preset(_FEATURES[kind]),
        )
    return ImportedWeights(kind=kind, path=target, release=converted.release, notes=notes)


def weights_import_queue(
    *,
    kind: str,
    file: str,
    words: str = "",
    keyword_words: str = "",
    name: str = "",
    created_by: User,
) -> Job:
    """Queue a "weights_import" job for files in ENCODER_WEIGHTS_DIR (named relative to it);
    ValidationError names a bad kind, a missing list or a file outside the folder."""
    if kind not in RELEASED_KINDS:
        raise ValidationError(f"kind: {kind!r} is not one of {', '.join(sorted(RELEASED_KINDS))}")
    if kind in NEEDS_WORDS and not words:
        raise ValidationError(f"words: kind {kind!r} needs the released word list")
    if kind in NEEDS_KEYWORD_WORDS and not keyword_words:
        raise ValidationError(f"keyword_words: kind {kind!r} needs TaggingToEmbs.p")
    if name and (Path(name).name != name or name.startswith(".")):
        raise ValidationError(f"name: {name!r} must be a plain file name")
    params: dict[str, str | None] = {"kind": kind, "file": weights_file(file, option="file")}
    params["words"] = weights_file(words, option="words") if words else None
    params["keyword_words"] = (
        weights_file(keyword_words, option="keyword_words") if keyword_words else None
    )
    params["name"] = name
    return job_enqueue(
        kind="weights_import",
        params=params,
        created_by=created_by,
        label=f"Import released weights {Path(file).name} ({kind})",
    )


def weights_import_job(
    *,
    job: Job,
    progress: ProgressFn,
    kind: str,
    file: str,
    words: str | None = None,
    keyword_words: str | None = None,
    name: str = "",
) -> dict[str, object]:
    """The "weights_import" job; running it again rewrites the same file."""
    imported = weights_import(
        kind=kind, path=file, words=words, keyword_words=keyword_words, name=name
    )
    return {
        "kind": kind,
        "path": str(imported.path.relative_to(Path(settings.ENCODER_WEIGHTS_DIR))),
        "release": imported.release.name if imported.release else None,
        "notes": imported.notes,
    }
