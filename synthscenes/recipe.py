"""The SynthScenes recipe: ``prepare_synthscenes`` writes a set of scenes to a folder, in
lhotse's recipe style (idempotent, with a manifest written last).

A prepared folder holds, per scene, ``synth-<seed>-<index>.wav`` (16-bit mono) and, with
``video``, ``synth-<seed>-<index>.mp4``; then ``manifest.json``: the arguments and, per scene,
``Scene.metadata()`` plus the names of its ``audio`` and ``video`` files. The manifest is
written last, so a folder without one is a partial run, whose files may be cut short.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from synthscenes.generate import generate_scenes
from synthscenes.io import write_scene, write_scene_video
from synthscenes.scenes import SAMPLE_RATE, SCENE_SECONDS

MANIFEST = "manifest.json"
MANIFEST_VERSION = 1  # bump when the folder's layout changes: older folders are redone


@dataclass(frozen=True)
class PreparedScene:
    """One scene of a prepared folder."""

    name: str  # synth-<seed>-<index>, the stem of its files
    audio: Path
    video: Path | None  # None when prepared without video
    mids: list[str]  # AudioSet labels, each once
    captions: list[str]


def prepare_synthscenes(
    out_dir: Path | str,
    *,
    count: int,
    seed: int = 0,
    start: int = 0,
    sample_rate: int = SAMPLE_RATE,
    seconds: float = SCENE_SECONDS,
    n_captions: int = 5,
    event_weights: Mapping[str, float] | None = None,
    video: bool = True,
) -> list[PreparedScene]:
    """Writes scenes `start` to `start + count - 1` of the SynthScenes set `seed` (see
    `generate_scene` for the other arguments) into `out_dir` and returns them in order.

    Idempotent: when `out_dir` holds a manifest for the same arguments and all its files, it
    is returned as it is and nothing is generated. A partial folder (no manifest, or a file
    gone) is not trusted: every scene is generated and written again. Raises ValueError when
    `out_dir` was prepared with other arguments.
    """
    if count < 0:
        raise ValueError(f"count must be >= 0, not {count}")
    out = Path(out_dir)
    arguments = _as_json({
        "seed": seed, "start": start, "count": count, "sample_rate": sample_rate,
        "seconds": seconds, "n_captions": n_captions, "video": video,
        "event_weights": None if event_weights is None else dict(sorted(event_weights.items())),
    })  # fmt: skip
    done = _completed(out, arguments)
    if done is not None:
        return done
    (out / MANIFEST).unlink(missing_ok=True)  # a stale one must not vouch for new files
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for scene in generate_scenes(
        seed, count, start=start, sample_rate=sample_rate, seconds=seconds,
        n_captions=n_captions, event_weights=event_weights,
    ):  # fmt: skip
        audio = write_scene(out, scene)
        clip_video = write_scene_video(out, scene) if video else None
        entries.append(
            {
                **scene.metadata(),
                "audio": audio.name,
                "video": None if clip_video is None else clip_video.name,
            }
        )
    manifest = {"version": MANIFEST_VERSION, "arguments": arguments, "scenes": entries}
    written = out / f"{MANIFEST}.partial"
    written.write_text(json.dumps(manifest, indent=1))
    written.replace(out / MANIFEST)  # atomic: the manifest is there whole or not at all
    return [_prepared(out, entry) for entry in entries]


def _as_json(value: dict[str, Any]) -> dict[str, Any]:
    """`value` as it reads back from JSON, so it compares equal to a stored manifest's."""
    loaded: dict[str, Any] = json.loads(json.dumps(value))
    return loaded


def _prepared(out: Path, entry: dict[str, Any]) -> PreparedScene:
    return PreparedScene(
        name=entry["name"],
        audio=out / entry["audio"],
        video=None if entry["video"] is None else out / entry["video"],
        mids=list(entry["mids"]),
        captions=list(entry["captions"]),
    )


def _completed(out: Path, arguments: dict[str, Any]) -> list[PreparedScene] | None:
    """The folder's scenes if an earlier call finished it for these arguments; None if it
    has to be made (again)."""
    try:
        manifest = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):  # none yet, or unreadable: not trusted
        return None
    if not isinstance(manifest, dict) or manifest.get("version") != MANIFEST_VERSION:
        return None
    if manifest["arguments"] != arguments:
        theirs = manifest["arguments"]
        differ = [f"{k}={theirs.get(k)!r}" for k in arguments if theirs.get(k) != arguments[k]]
        raise ValueError(
            f"{out} holds SynthScenes prepared with other arguments ({', '.join(differ)}); "
            "prepare into another folder"
        )
    scenes = [_prepared(out, entry) for entry in manifest["scenes"]]
    files = [s.audio for s in scenes] + [s.video for s in scenes if s.video is not None]
    return scenes if all(path.is_file() for path in files) else None
