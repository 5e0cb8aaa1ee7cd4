"""Self-describing checkpoints: one file is enough to rebuild and reload a captioner.

A checkpoint is a plain dict saved with ``torch.save`` and read with ``weights_only=True`` (no
pickled code runs on load)::

    format          int, CHECKPOINT_FORMAT
    model_name      registry name ("topdown", ...)
    model_args      asdict(model config), rebuilt with config_from_dict (strict)
    state_dict      model weights (and buffers, e.g. the 1NN bank)
    vocab           Vocabulary.to_dict()
    feature_config  dict describing how the features were computed (modeling.ml.features)
    run_config      asdict(RunConfig) or None
    step, epoch     optimisation steps done, epochs completed
    best_score      best validation score so far (None before any validation)
    optimizer       optimizer.state_dict() or None
    trainer_state   TrainerState.saved() (loop and RNG states, to resume mid-epoch) or None
    code_version    earmark version and git commit that wrote the file

Format 1 files predate ``model.form`` (MAAC, ACT, V-ACT): their model_args are read as the
paper form they were trained in (``config.recorded_model_args``), so they load and compute what
they did; format 2 files record the form.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from modeling.ml.config import ConfigError, recorded_model_args
from modeling.ml.models.base import Captioner
from modeling.ml.registry import UnknownModelError, build_model, lookup, model_config
from modeling.ml.vocab import Vocabulary

CHECKPOINT_FORMAT = 2
# formats this code still reads (see the module docstring for what changed)
_READABLE_FORMATS = (1, 2)
_REQUIRED = ("format", "model_name", "model_args", "state_dict", "vocab")


class CheckpointError(ValueError):
    """The file is missing, unreadable, or does not describe a model we can rebuild."""


@cache
def code_version() -> str:
    """ "earmark <version>" plus the git commit when running from a checkout."""
    try:
        version = metadata.version("earmark")
    except metadata.PackageNotFoundError:
        version = "unknown"
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return f"earmark {version}" + (f" ({commit})" if commit else "")


def _as_dict(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"expected a dataclass or a mapping, got {type(value).__name__}")


def save_checkpoint(
    path: str | Path,
    *,
    model_name: str,
    model: Captioner,
    vocab: Vocabulary,
    feature_config: Any = None,
    run_config: Any = None,
    step: int = 0,
    epoch: int = 0,
    best_score: float | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    trainer_state: dict[str, Any] | None = None,
) -> Path:
    """Write the checkpoint atomically (temporary file, then rename) and return its path."""
    lookup(model_name)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": CHECKPOINT_FORMAT,
        "model_name": model_name,
        "model_args": dataclasses.asdict(model.config),
        "state_dict": {
            k: v.detach().cpu() if torch.is_tensor(v) else v for k, v in model.state_dict().items()
        },
        "vocab": vocab.to_dict(),
        "feature_config": _as_dict(feature_config),
        "run_config": _as_dict(run_config),
        "step": step,
        "epoch": epoch,
        "best_score": best_score,
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "trainer_state": trainer_state,
        "code_version": code_version(),
    }
    # A reader (the web app, a resumed run) must never see half a file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)
    return path


@dataclass
class Checkpoint:
    """A loaded checkpoint: the rebuilt model plus everything stored with it."""

    path: Path
    model_name: str
    model: Captioner
    vocab: Vocabulary
    feature_config: dict[str, Any] | None
    run_config: dict[str, Any] | None
    step: int
    epoch: int
    best_score: float | None
    optimizer_state: dict[str, Any] | None
    trainer_state: dict[str, Any] | None
    code_version: str


def read_checkpoint(
    path: str | Path, *, map_location: str | torch.device = "cpu"
) -> dict[str, Any]:
    """The raw checkpoint dict, checked for the required keys."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # torch raises many types for a corrupt or foreign file
        raise CheckpointError(f"{path}: not a readable checkpoint ({exc})") from exc
    if not isinstance(payload, dict):
        raise CheckpointError(f"{path}: not an earmark checkpoint (a {type(payload).__name__})")
    missing = [key for key in _REQUIRED if key not in payload]
    if missing:
        raise CheckpointError(f"{path}: checkpoint lacks {', '.join(missing)}")
    if payload["format"] not in _READABLE_FORMATS:
        readable = ", ".join(str(f) for f in _READABLE_FORMATS)
        raise CheckpointError(
            f"{path}: checkpoint format {payload['format']!r}, this code reads {readable}"
        )
    if payload["format"] == 1:
        try:
            config_class = lookup(payload["model_name"])[1]
        except UnknownModelError as exc:
            raise CheckpointError(f"{path}: {exc}") from exc
        payload["model_args"] = recorded_model_args(config_class, payload["model_args"])
    return payload


def load_checkpoint(path: str | Path, *, map_location: str | torch.device = "cpu") -> Checkpoint:
    """Rebuild the model from the file alone and load its weights with strict=True."""
    payload = read_checkpoint(path, map_location=map_location)
    name = payload["model_name"]
    try:
        config = model_config(name, payload["model_args"])
        vocab = Vocabulary.from_dict(payload["vocab"])
    except (UnknownModelError, ConfigError, ValueError) as exc:
        raise CheckpointError(f"{path}: {exc}") from exc
    if config.vocab_size != len(vocab):
        raise CheckpointError(
            f"{path}: model_args.vocab_size={config.vocab_size} but the vocabulary has "
            f"{len(vocab)} words"
        )
    model = build_model(name, config)
    try:
        model.load_state_dict(payload["state_dict"], strict=True)
    except RuntimeError as exc:
        detail = " ".join(str(exc).split())  # torch's message spans lines; keep one line
        raise CheckpointError(f"{path}: weights do not match model '{name}': {detail}") from exc
    model.to(map_location)
    return Checkpoint(
        path=Path(path),
        model_name=name,
        model=model,
        vocab=vocab,
        feature_config=payload.get("feature_config"),
        run_config=payload.get("run_config"),
        step=int(payload.get("step", 0)),
        epoch=int(payload.get("epoch", 0)),
        best_score=payload.get("best_score"),
        optimizer_state=payload.get("optimizer"),
        trainer_state=payload.get("trainer_state"),
        code_version=str(payload.get("code_version", "")),
    )
